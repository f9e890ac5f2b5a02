"""installed_check.py PACKAGE_ROOT VERSION - checks an installed kern package, run from /
by scripts/install-check.sh and scripts/pip-check.sh (not a pytest module: it needs an
installed package, which those scripts make).

PACKAGE_ROOT is the directory the package was installed into; the package imported, and
the libkern-jit and libkernc it loaded, must come from there, not from a checkout, a build
tree or another install; its _config.py names the library by a relative path. VERSION is
the project's version (meson.build). Then, against NumPy: a kernel compiled from source
text, its forward run and its gradient through a tape, and a call that must raise kern's
own error."""
import os
import sys

import numpy as np

import kern

root, version = sys.argv[1:3]
here = os.path.dirname(os.path.abspath(kern.__file__))


def fail(msg):
    sys.exit(f"installed_check: {msg}")


if os.path.commonpath([here, os.path.abspath(root)]) != os.path.abspath(root):
    fail(f"kern was imported from {here}, not from {root}")
if os.getcwd() != "/":
    fail(f"run from /, not {os.getcwd()}")
# the libraries this process mapped: both from the install, none from a build tree
with open("/proc/self/maps") as maps:
    mapped = {line.split()[-1] for line in maps if "/libkern" in line}
for lib in ("libkern-jit", "libkernc"):
    paths = [p for p in mapped if os.path.basename(p).startswith(lib + ".so")]
    if not paths:
        fail(f"{lib} is not loaded")
    for p in paths:
        if os.path.commonpath([p, os.path.abspath(root)]) != os.path.abspath(root):
            fail(f"{lib} was loaded from {p}, outside {root}")
if os.path.isabs(kern._library._config.LIBRARY):
    fail(f"_config.py names libkern-jit by an absolute path: {kern._library._config.LIBRARY}")
if kern.__version__ != version or kern.version() != version:
    fail(f"kern.__version__ {kern.__version__!r}, kern.version() {kern.version()!r}, "
         f"meson.build's {version!r}")

mod = kern.compile("""
kernel cube(x: f32[], w: f32[], out: f32[]) {
    for i in 0..len(x) {
        out[i] = w[i] * x[i] * x[i] * x[i] + sin(x[i]);
    }
}
""")
x = np.linspace(-1.5, 1.5, 33, dtype=np.float32)
w = np.linspace(0.5, 2.0, 33, dtype=np.float32)
out = np.zeros_like(x)
with kern.Tape() as tape:
    mod.cube(x=x, w=w, out=out)
seed = np.linspace(1.0, 2.0, 33, dtype=np.float32)  # dL/d(out)
tape.backward(seeds=[(out, seed)])
x64, w64, s64 = x.astype(np.float64), w.astype(np.float64), seed.astype(np.float64)
checks = [
    ("out", out, w64 * x64**3 + np.sin(x64)),
    ("dL/dx", tape.grad(x), s64 * (3 * w64 * x64**2 + np.cos(x64))),
    ("dL/dw", tape.grad(w), s64 * x64**3),
]
for name, got, want in checks:
    if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        fail(f"{name}: largest error {np.max(np.abs(got - want))}")
try:
    mod.cube(x=x, w=w)
    fail("a call without its argument out was accepted")
except kern.ArgumentError as e:
    if "out" not in str(e):
        fail(f"the missing argument's error does not name it: {e}")
print(f"installed_check: kern {kern.__version__} from {here}: forward and gradient match NumPy")
