"""The examples run as documented: every command of examples/README.md's sh blocks and of
the header comments of examples/*.kern runs, from a copy of examples/ (so nothing in the
checkout changes), and what it writes is checked against NumPy references written here;
make_data.py writes the files that are shipped; the pictures are valid PNG files; fit.py's
gradient is checked against float64 finite differences; the picture writers never replace
a file that they did not write."""
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import kern

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kern.__file__))))  # build/python/kern/__init__.py
KERNC = os.environ.get("KERNC", os.path.join(BUILD, "kernc"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import pngout  # noqa: E402

# Documented commands left out here, with the reason: springs' gradcheck takes about a
# minute; the examples suite runs it (tests/test_examples.c, springs_gradcheck_on_the_...).
SLOW = ["build/kernc gradcheck examples/springs.kern"]


def sandbox(tmp_path):
    """A directory that looks like the repository root to the documented commands: a copy
    of examples/, and build/, python/ as links."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    os.symlink(BUILD, tmp_path / "build")
    os.symlink(os.path.join(ROOT, "python"), tmp_path / "python")
    return tmp_path


def run_sh(script, cwd):
    script = script.replace("/usr/bin/python3 ", sys.executable + " ")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, "%s\n---\n%s%s" % (script, r.stdout, r.stderr)
    return r.stdout


def readme_blocks():
    text = open(os.path.join(EXAMPLES, "README.md")).read()
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def header_commands(path):
    """The commands in the first comment block of a .kern file: lines `//   kernc ...` and
    their continuation lines; the schematic ones (`...the same arguments...`) left out."""
    cmds, cur = [], None
    for line in open(path):
        if not line.startswith("//"):
            break
        body = line[2:].strip()
        if cur is not None:
            cur += " " + body
        elif body.startswith("kernc "):
            cur = body
        if cur is not None and not cur.endswith("\\"):
            cmds.append(cur)
            cur = None
        elif cur is not None:
            cur = cur[:-1]
    return [c for c in cmds if "..." not in c]


# ---- NumPy references of what the commands write ---------------------------------------

def ref_rows(done, start, step):
    """Rows 0..n-1 of a time-indexed array: row 0 as given, row t = step(row t - 1, t)."""
    rows = [start]
    for t in range(1, done):
        rows.append(step(rows[-1], t))
    return rows


def launched_rows(a):
    """How many leading rows of a (time-indexed, zero until written) hold values."""
    nz = [bool(np.any(r != 0)) for r in a]
    n = len(nz) - nz[::-1].index(True) if any(nz) else 0
    assert all(nz[:n]), "a row inside the trajectory is zero"
    return n


def check_heat(d):
    u = np.load(d / "u.npy")
    u0, k = np.load(d / "examples/data/heat_u.npy"), np.load(d / "examples/data/heat_k.npy")
    n = launched_rows(u)
    assert n >= 3   # at least t = 1 and t = 2 ran

    def step(prev, t):
        new = prev.copy()
        new[1:-1] = prev[1:-1] + 0.25 * k[1:-1] * (prev[:-2] - 2 * prev[1:-1] + prev[2:])
        return new
    ref = ref_rows(n, u0[0].astype(np.float64), step)
    np.testing.assert_allclose(u[:n], ref, rtol=1e-5, atol=1e-6)
    return n


def check_particles(d):
    x, v = np.load(d / "x.npy"), np.load(d / "v.npy")
    x0, v0 = np.load(d / "examples/data/particles_x.npy"), np.load(d / "examples/data/particles_v.npy")
    n = launched_rows(x)
    assert n >= 3 and launched_rows(v) == n
    xs, vs = [x0[0].astype(np.float64)], [v0[0].astype(np.float64)]
    for t in range(1, n):
        vs.append(vs[-1] + 0.01 * (-2.0 * xs[-1]))
        xs.append(xs[-1] + 0.01 * vs[-1])
    np.testing.assert_allclose(x[:n], xs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v[:n], vs, rtol=1e-5, atol=1e-6)
    return n


def check_stencil(d):
    g = np.load(d / "grid.npy")
    ref = np.load(d / "examples/data/stencil_grid.npy").astype(np.float64)
    for sweeps in range(1, 30):      # each sweep carries the hot edge one row further
        new = ref.copy()
        new[1:-1, 1:-1] = 0.25 * (ref[:-2, 1:-1] + ref[2:, 1:-1] + ref[1:-1, :-2] + ref[1:-1, 2:])
        ref = new
        if np.allclose(g, ref, rtol=1e-5, atol=1e-6):
            return sweeps
    raise AssertionError("grid.npy is no number of Jacobi sweeps of stencil_grid.npy")


def check_saxpy(d):
    y = np.load(d / "y.npy")
    x, y0 = np.load(d / "examples/data/x0.npy"), np.load(d / "examples/data/out.npy")
    np.testing.assert_allclose(y, 2 * x + y0, rtol=1e-6)


def check_bounce(d):
    y1, hits = np.load(d / "y1.npy"), np.load(d / "hits.npy")
    y0, v0 = np.load(d / "examples/data/bounce_y0.npy"), np.load(d / "examples/data/bounce_v0.npy")
    f32 = np.float32
    for b in range(len(y0)):          # bounce.kern in the same float32 operations
        y, vy, count = f32(y0[b]), f32(v0[b]), 0
        for _ in range(200):
            vy = np.clip(f32(vy - f32(9.81) * f32(0.01)), f32(-20), f32(20))
            y = f32(y + f32(vy * f32(0.01)))
            if y < 0:
                y, vy, count = -y, f32(-vy * f32(0.8)), count + 1
        assert hits[b] == count
        assert abs(y1[b] - y) <= 1e-4 * max(1.0, abs(y))
    assert hits.sum() > 0


def bounce2d_reference(x0, v0, steps, dt=0.02):
    """bounce2d.kern's step in float64: (T + 1, B, 2) positions."""
    x, v, rows = x0.astype(np.float64), v0.astype(np.float64), [x0.astype(np.float64)]
    for _ in range(steps):
        v = v + [0.0, -9.81 * dt]
        p = x + dt * v
        low, far = p[:, 1] < 0, p[:, 0] > 4.0
        p[low, 1] *= -0.8
        v[low, 1] *= -0.8
        p[far, 0] = 4.0 - 0.8 * (p[far, 0] - 4.0)
        v[far, 0] *= -0.8
        x = p
        rows.append(x)
    return np.array(rows)


def polyline_miss(path, target):
    """The sum over balls of the squared distance from target[b] to path[:, b]."""
    a, b = path[:-1], path[1:]
    d = b - a
    s = np.clip(np.sum((target - a) * d, -1) / np.maximum(np.sum(d * d, -1), 1e-12), 0, 1)
    return float(np.sum(np.min(np.sum((a + s[..., None] * d - target) ** 2, -1), 0)))


def check_bounce2d(d):
    x = np.load(d / "x.npy")
    x0, v0 = np.load(d / "examples/data/bounce2d_x.npy"), np.load(d / "examples/data/bounce2d_v.npy")
    ref = bounce2d_reference(x0[0], v0[0], x.shape[0] - 1)
    np.testing.assert_allclose(x, ref, atol=2e-4)
    if os.path.exists(d / "loss.npy"):
        target = np.load(d / "examples/data/bounce2d_target.npy")
        loss = np.load(d / "loss.npy")
        assert abs(loss[0] - polyline_miss(ref, target)) <= 1e-3 * polyline_miss(ref, target)


def springs_reference(d, steps=50, k=40.0, dt=0.01):
    load = lambda n: np.load(d / ("examples/data/springs_%s.npy" % n)).astype(np.float64)
    x, v, rest, target = load("x0"), load("v0"), load("rest"), load("target")
    pairs = np.load(d / "examples/data/springs_pairs.npy")
    i, j = pairs[:, 0], pairs[:, 1]
    for _ in range(steps):
        f = np.zeros_like(x)
        f[..., 1] = -9.8
        dd = x[:, j] - x[:, i]
        ln = np.linalg.norm(dd, axis=-1, keepdims=True)
        fs = k * (ln - rest[:, None]) / ln * dd
        np.add.at(f, (slice(None), i), fs)
        np.add.at(f, (slice(None), j), -fs)
        v = (v + dt * f) * 0.99
        x = x + dt * v
    return x, float(np.sum((x.mean(1) - target) ** 2))


def check_springs(d):
    x_ref, loss_ref = springs_reference(d)
    if os.path.exists(d / "xT.npy"):
        np.testing.assert_allclose(np.load(d / "xT.npy"), x_ref, atol=1e-3)
    loss = np.load(d / "loss.npy")
    assert abs(loss[0] - loss_ref) <= 1e-4 * loss_ref


def check_elastic(d):
    load = lambda n: np.load(d / ("examples/data/elastic_%s.npy" % n))
    rest, x, tets = load("rest").astype(np.float64), load("x").astype(np.float64), load("tets")

    def edges(p):
        a = p[tets[:, 0]]
        return np.stack([p[tets[:, 1]] - a, p[tets[:, 2]] - a, p[tets[:, 3]] - a], axis=-1)
    dm, ds = edges(rest), edges(x)
    f = ds @ np.linalg.inv(dm)
    logj = np.log(np.linalg.det(f))
    psi = 0.5 * (np.einsum("eij,eij->e", f, f) - 3) - logj + 0.5 * 10 * logj ** 2
    e_ref = float(np.sum(np.abs(np.linalg.det(dm)) / 6 * psi))
    assert abs(np.load(d / "e.npy")[0] - e_ref) <= 1e-4 * abs(e_ref)


def check_picture(path, program):
    """A valid PNG: signature, every chunk's CRC, IHDR first and IEND last, and the IDAT
    data inflating to exactly height rows of (1 + width * channels) bytes; written by us."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        (crc,) = struct.unpack(">I", data[pos + 8 + size:pos + 12 + size])
        assert zlib.crc32(kind + body) == crc, (path, kind)
        chunks.append(kind)
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
        if kind == b"IDAT":
            idat += body
        pos += 12 + size
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and pos == len(data), path
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    assert depth == 8 and 200 <= width <= 2000 and 150 <= height <= 1000, (width, height)
    assert len(zlib.decompress(idat)) == height * (1 + width * channels), path
    assert pngout.png_software(path) == "%s/%s" % (pngout.MARK, program)


def check_bounce_opt(d, out):
    first, last = re.search(r"loss (\S+) -> (\S+) after", out).groups()
    assert float(last) < 1e-6 * float(first), out    # every path through its target
    check_picture(d / "examples/images/bounce_frames.png", "bounce_opt.py")
    check_picture(d / "examples/images/bounce_loss.png", "bounce_opt.py")


def check_fit(d, out):
    first, last, err = map(float, re.search(r"loss (\S+) -> (\S+), max \|w - w_true\| (\S+)",
                                            out).groups())
    assert last < 1e-9 * first and err < 1e-5, out
    check_picture(d / "examples/images/fit_loss.png", "fit.py")


def check_make_data(d, out):
    compare_data(d / "examples/data", os.path.join(EXAMPLES, "data"))


# what a README block or a .kern file's commands write, by the file they name
CHECKS = {
    "heat.kern": check_heat, "particles.kern": check_particles,
    "stencil2d.kern": check_stencil, "saxpy.kern": check_saxpy, "bounce.kern": check_bounce,
    "bounce2d.kern": check_bounce2d, "springs.kern": check_springs,
    "elastic.kern": check_elastic,
}
PY_CHECKS = {"bounce_opt.py": check_bounce_opt, "fit.py": check_fit,
             "make_data.py": check_make_data}


def check_block(script, d, out):
    checked = []
    for name, check in CHECKS.items():
        if re.search(r"examples/%s " % re.escape(name), script):
            check(d)
            checked.append(name)
    for name, check in PY_CHECKS.items():
        if re.search(r"/%s( |$)" % re.escape(name), script, re.M):
            check(d, out)
            checked.append(name)
    return checked


def test_readme_sh_blocks_run(tmp_path):
    blocks = readme_blocks()
    assert len(blocks) >= 10
    checked = []
    for i, block in enumerate(blocks):
        lines = [ln for ln in block.splitlines() if not any(s in ln for s in SLOW)]
        d = sandbox(tmp_path / ("block%d" % i))
        out = run_sh("\n".join(lines), d)
        checked += check_block(block, d, out)
        if "simulate.py" in block:          # its gradient against torch.autograd in float64
            line = re.search(r"max \|dx0 - torch\| (\S+), max \|dw - torch\| (\S+)", out)
            assert line and float(line.group(1)) < 1e-5 and float(line.group(2)) < 1e-5, out
    # every kernel and script named above was run and checked by some block
    assert sorted(set(checked)) == sorted(list(CHECKS) + list(PY_CHECKS)), checked
    assert sum(any(s in b for s in SLOW) for b in blocks) == len(SLOW)


def test_kern_header_commands_run(tmp_path):
    seen = {}
    for name in sorted(os.listdir(EXAMPLES)):
        if not name.endswith(".kern"):
            continue
        cmds = header_commands(os.path.join(EXAMPLES, name))
        if not cmds:
            continue
        d = sandbox(tmp_path / name)
        script = "\n".join(KERNC.join(("'", "'")) + c[len("kernc"):] for c in cmds)
        out = run_sh(script, d)
        seen[name] = (check_block(script.replace(KERNC, "build/kernc"), d, out), len(cmds))
    # the files whose header commands are literal, and that their checks ran
    assert {n: s[0] for n, s in seen.items()} == {
        "bounce.kern": ["bounce.kern"], "bounce2d.kern": ["bounce2d.kern"],
        "elastic.kern": ["elastic.kern"], "springs.kern": ["springs.kern"],
        "heat.kern": ["heat.kern"], "particles.kern": ["particles.kern"],
        "saxpy.kern": ["saxpy.kern"], "stencil2d.kern": ["stencil2d.kern"]}, seen


def compare_data(made, shipped):
    made_names, shipped_names = sorted(os.listdir(made)), sorted(os.listdir(shipped))
    assert made_names == shipped_names, (made_names, shipped_names)
    for name in shipped_names:
        a, b = np.load(os.path.join(made, name)), np.load(os.path.join(shipped, name))
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), name


def test_make_data_writes_the_shipped_files(tmp_path):
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "make_data.py"), str(tmp_path)],
                   check=True, timeout=60)
    compare_data(tmp_path, os.path.join(EXAMPLES, "data"))


def test_committed_pictures_are_valid_png():
    for name, program in [("bounce_frames.png", "bounce_opt.py"),
                          ("bounce_loss.png", "bounce_opt.py"), ("fit_loss.png", "fit.py")]:
        path = os.path.join(EXAMPLES, "images", name)
        check_picture(path, program)
        assert os.path.getsize(path) < 100_000


def test_fit_gradient_against_float64_finite_differences():
    """fit.py's loss, sum over k of mean((out_k - target_k)^2) with out_k the state after k
    steps of simulate.kern, and its gradient through one tape of the 8 launches, against
    central differences of the same loss computed in float64 NumPy."""
    mod = kern.compile(os.path.join(EXAMPLES, "simulate.kern"))
    rng = np.random.default_rng(5)
    n, steps = 64, 8
    x0 = rng.uniform(-1, 1, n).astype(np.float32)
    w = rng.uniform(-0.3, 0.3, steps).astype(np.float32)
    targets = rng.uniform(-1, 1, (steps, n))

    def loss64(w64):
        x, total = x0.astype(np.float64), 0.0
        for k in range(steps):
            x = np.sin(x) * w64[k] + x
            total += np.mean((x - targets[k]) ** 2)
        return total

    outs = [np.zeros(n, np.float32) for _ in range(steps)]
    with kern.Tape() as tape:
        for k in range(steps):
            mod.simulate(x0=x0, w=w, out=outs[k], steps=k + 1)
    tape.backward(seeds=[(outs[k], (2.0 / n * (outs[k] - targets[k])).astype(np.float32))
                         for k in range(steps)])
    grad = tape.grad(w)
    tape.release()
    h = 1e-6
    for k in range(steps):
        e = np.zeros(steps)
        e[k] = h
        fd = (loss64(w + e) - loss64(w - e)) / (2 * h)
        assert abs(grad[k] - fd) <= 1e-4 * max(1.0, abs(fd)), (k, grad[k], fd)


def test_bounce_opt_gradient_against_float64_finite_differences():
    """The gradient bounce_opt.py descends (dL/d(throw) through the tape of 100 step
    launches and miss) against central differences of the float64 reference."""
    import bounce_opt
    ctx = kern.Context("cpu")
    mod = kern.compile(os.path.join(EXAMPLES, "bounce2d.kern"), context=ctx)
    scene = bounce_opt.Scene(ctx, os.path.join(EXAMPLES, "data"))
    scene.v0 = scene.v0 + np.float32(0.3)
    tape = kern.Tape(ctx)
    loss = scene.throw(mod, tape)
    tape.backward(seeds=[(scene.loss, scene.seed)])
    grad = tape.grad(scene.v)[0]
    tape.release()
    x0 = np.load(os.path.join(EXAMPLES, "data", "bounce2d_x.npy"))[0]
    target = scene.target
    ref = lambda v: polyline_miss(bounce2d_reference(x0, v, scene.steps), target)
    assert abs(loss - ref(scene.v0)) <= 1e-4 * ref(scene.v0)
    h = 1e-5
    for b in range(len(x0)):
        for c in range(2):
            e = np.zeros_like(scene.v0, dtype=np.float64)
            e[b, c] = h
            fd = (ref(scene.v0 + e) - ref(scene.v0 - e)) / (2 * h)
            assert abs(grad[b, c] - fd) <= 2e-3 * max(1.0, abs(fd)), (b, c, grad[b, c], fd)


def test_pictures_never_replace_foreign_files(tmp_path):
    d = sandbox(tmp_path)
    out = d / "pics"
    out.mkdir()
    (out / "bounce_loss.png").write_text("not ours")
    cmd = [sys.executable, str(d / "python/examples/bounce_opt.py"), "--iters", "1",
           "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "was not written by a kern example" in r.stderr, r.stderr
    assert (out / "bounce_loss.png").read_text() == "not ours"
    assert not (out / "bounce_frames.png").exists()   # refused before anything was written
    # a PNG of another program is not ours either; a directory that is a file is refused
    shutil.copy(os.path.join(EXAMPLES, "images", "fit_loss.png"), out / "bounce_loss.png")
    png = open(out / "bounce_loss.png", "rb").read()
    (out / "bounce_loss.png").write_bytes(png.replace(b"kern python/examples", b"not a kern example!!"))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "bounce_loss.png" in r.stderr, r.stderr
    r = subprocess.run(cmd[:-1] + [str(out / "bounce_loss.png")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "not a directory" in r.stderr, r.stderr
    # a directory that is not there it makes (that it replaces its own pictures, the README's
    # commands show: they write over examples/images)
    r = subprocess.run(cmd[:-1] + [str(out / "new")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    check_picture(out / "new" / "bounce_frames.png", "bounce_opt.py")
    assert sorted(os.listdir(out / "new")) == ["bounce_frames.png", "bounce_loss.png"]
