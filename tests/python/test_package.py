"""The package as a package (docs/python.md, "Getting it"): its version against meson.build
and `kernc --version`, how it names its library, and the error of a library that does not
load. The installed copies (meson install, a staged install, pip install .) are checked by
scripts/install-check.sh and scripts/pip-check.sh with tests/python/installed_check.py.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python/test_package.py"""

import os
import re
import subprocess
import sys

import pytest

import kern

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PACKAGE = os.path.dirname(os.path.abspath(kern.__file__))
# the build tree's package (build/python/kern) has kernc two directories up
KERNC = os.path.normpath(os.path.join(PACKAGE, "..", "..", "kernc"))


def meson_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        m = re.search(r"^project\('kern',.*?^  version : '([^']+)'", f.read(), re.S | re.M)
    assert m, "meson.build has no project version"
    return m.group(1)


def test_version_is_meson_builds_and_the_librarys():
    assert kern.__version__ == meson_version()
    assert kern.version() == kern.__version__


@pytest.mark.skipif(not os.access(KERNC, os.X_OK),
                    reason="not the build tree's package: no kernc beside it")
def test_version_is_kernc_s():
    out = subprocess.run([KERNC, "--version"], capture_output=True, text=True, check=True).stdout
    first = out.splitlines()[0]  # "kernc V (libkern V)", then LLVM and the targets
    assert first == f"kernc {kern.__version__} (libkern {kern.__version__})"


@pytest.mark.skipif(kern._library._config is None, reason="the source tree's package")
def test_config_names_the_library_relative_to_the_package():
    library = kern._library._config.LIBRARY
    assert not os.path.isabs(library)
    assert os.path.exists(os.path.join(PACKAGE, library))


def run_import(env):
    """`import kern` in a fresh interpreter from /, with this package on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.path.dirname(PACKAGE), **env}
    return subprocess.run([sys.executable, "-c", "import kern; print(kern.__file__)"], cwd="/",
                          env=env, capture_output=True, text=True)


def test_imports_from_root():
    r = run_import({})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(PACKAGE, "__init__.py")


def test_a_library_that_does_not_load_is_an_import_error_naming_it():
    r = run_import({"KERN_LIBRARY": "/nonexistent/libkern-jit.so.0"})
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: kern: cannot load libkern-jit "
                           "/nonexistent/libkern-jit.so.0 (named by KERN_LIBRARY): "), last
    assert "set KERN_LIBRARY" in last


def test_a_file_that_is_not_a_library_is_an_import_error(tmp_path):
    fake = tmp_path / "libkern-jit.so.0"
    fake.write_text("not an ELF file\n")
    r = run_import({"KERN_LIBRARY": str(fake)})
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: kern: cannot load libkern-jit {fake} "), last
