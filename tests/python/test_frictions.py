"""The Python frictions of issue 25: Tape.zero (Warp's: adjoints zeroed, records kept) and
Tape.reset (records dropped); scalar_grad by name; Buffer.dtype a NumPy dtype and len(buf);
inspect.signature(kernel); the path rule of kern.compile; NumPy arrays on a Vulkan context
(lavapipe, KERN_VULKAN_VALIDATION=fatal in CI); and kern.gradcheck with the meaning of
`kernc gradcheck`, against a hand-computed error and the command line itself."""

import inspect
import os
import pathlib
import re
import subprocess
import warnings

import numpy as np
import pytest

import kern
from kern import _config

SRC = """
kernel sq(x: f32[], y: f32[], a: f32) {
    for i in 0..len(x) {
        y[i] = a * x[i] * x[i];
    }
}
kernel lin(x: f32[], y: f32[], b: f32) {
    for i in 0..len(x) {
        y[i] = b * x[i];
    }
}
"""


@pytest.fixture(scope="module")
def mod():
    return kern.compile(SRC)


def _no_c_names(msg):
    assert not re.search(r"\bkern_\w+", msg), msg


# ---- Tape.zero and Tape.reset ---------------------------------------------------------

def test_zero_keeps_the_records_for_another_backward(mod):
    """y = a x^2, z = b y: the gradient for two seeds in turn, each against the closed
    form, with the second unaffected by the first (the adjoints were zeroed)."""
    x = np.linspace(0.5, 2.0, 6).astype(np.float32)
    y = np.zeros(6, np.float32)
    z = np.zeros(6, np.float32)
    a, b = 1.5, -0.75
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=a)
        mod.lin(x=y, y=z, b=b)
    seeds = [np.ones(6, np.float32), np.arange(6, dtype=np.float32) - 2]
    for seed in seeds:
        tape.backward(seeds=[(z, seed)])
        np.testing.assert_allclose(tape.grad(x), seed * b * 2 * a * x, rtol=1e-6)
        np.testing.assert_allclose(tape.scalar_grad(0, "a"), np.sum(seed * b * x * x),
                                   rtol=1e-5)
        np.testing.assert_allclose(tape.scalar_grad(1, "b"), np.sum(seed * a * x * x),
                                   rtol=1e-5)
        assert tape.records == 2
        tape.zero()
        np.testing.assert_array_equal(tape.grad(x), np.zeros(6, np.float32))
        assert tape.scalar_grad(1, "b") == 0.0
    # a Jacobian of y = a x^2, row by row: one seed per output element
    jac = np.empty((6, 6))
    for i in range(6):
        tape.zero()
        tape.backward(seeds=[(z, np.eye(6, dtype=np.float32)[i])])
        jac[i] = tape.grad(x)
    np.testing.assert_allclose(jac, np.diag(b * 2 * a * x), rtol=1e-6)


def test_recording_after_backward_needs_reset(mod):
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=1.0)
    tape.backward(seeds=[(y, np.ones(4, np.float32))])
    tape.zero()
    with pytest.raises(kern.ArgumentError) as info:
        with tape:
            mod.sq(x=x, y=y, a=1.0)
    msg = str(info.value)
    _no_c_names(msg)
    assert "tape.reset() starts a new recording (tape.zero() keeps the records" in msg
    tape.reset()
    assert tape.records == 0
    with tape:
        mod.sq(x=x, y=y, a=3.0)
    tape.backward(seeds=[(y, np.ones(4, np.float32))])
    np.testing.assert_allclose(tape.grad(x), 6.0 * x)


def test_no_second_backward_after_the_tape_put_saves_back(mod):
    """sq(x -> y), then lin(y -> x) overwrites x, which the first record read: the tape
    saves x and backward puts it back, so a second backward would read the wrong state."""
    x = np.linspace(1, 2, 5).astype(np.float32)
    x0 = x.copy()
    y = np.zeros(5, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=1.0)
        mod.lin(x=y, y=x, b=2.0)
    assert tape.saved_bytes > 0
    tape.backward(seeds=[(x, np.ones(5, np.float32))])
    np.testing.assert_allclose(tape.grad(x), 4.0 * x0, rtol=1e-6)  # d(2 x0^2)/dx0
    tape.zero()
    with pytest.raises(kern.ArgumentError) as info:
        tape.backward(seeds=[(x, np.ones(5, np.float32))])
    msg = str(info.value)
    _no_c_names(msg)
    assert "cannot run again" in msg and "tape.reset()" in msg, msg


def test_backward_twice_without_zero_is_refused(mod):
    x = np.ones(3, np.float32)
    y = np.zeros(3, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=1.0)
    tape.backward()
    with pytest.raises(kern.ArgumentError, match=r"tape.zero\(\) zeroes the adjoints for "
                                                 r"another backward pass, tape.reset\(\)"):
        tape.backward()


def test_scalar_grad_by_name_or_index(mod):
    x = np.arange(1, 5, dtype=np.float32)
    y = np.zeros(4, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=2.0)
        tape.record_func(lambda: None, [y])
        mod.lin(x=y, y=y.copy(), b=1.0)
    tape.backward(seeds=[(y, np.ones(4, np.float32))])
    want = float(np.sum(x * x))
    assert tape.scalar_grad(0, "a") == pytest.approx(want, rel=1e-6)
    assert tape.scalar_grad(0, 2) == pytest.approx(want, rel=1e-6)
    assert tape.scalar_grad(-3, "a") == pytest.approx(want, rel=1e-6)
    errors = {
        lambda: tape.scalar_grad(0, "c"): "Tape.scalar_grad: kernel 'sq' of record 0 has no "
                                          "parameter named 'c' (it has: x, y, a)",
        lambda: tape.scalar_grad(1, "a"): "Tape.scalar_grad: record 1 is a host step",
        lambda: tape.scalar_grad(3, "a"): "Tape.scalar_grad: record 3 is out of range (the "
                                          "tape has 3 records)",
        lambda: tape.scalar_grad("0", "a"): "Tape.scalar_grad: the record is an index",
        lambda: tape.scalar_grad(0, 1.0): "Tape.scalar_grad: the parameter is a name or an "
                                          "index, not float",
        lambda: tape.scalar_grad(0, "x"): "Tape.scalar_grad: parameter 'x' (f32[]) of kernel "
                                          "'sq' is not a",
    }
    for f, want_msg in errors.items():
        with pytest.raises(kern.ArgumentError) as info:
            f()
        _no_c_names(str(info.value))
        assert str(info.value).startswith(want_msg), str(info.value)


# ---- Buffer and Kernel as Python objects ------------------------------------------------

def test_buffer_dtype_is_numpy_and_len_is_the_first_extent():
    b = kern.Buffer.zeros((7, 3), "float64")
    assert b.dtype == np.dtype(np.float64) and isinstance(b.dtype, np.dtype)
    assert len(b) == 7 and b.ndim == 2 and b.kern_dtype == "f64"
    assert np.zeros(len(b), b.dtype).dtype == np.float64
    a = kern.Buffer.from_array(np.arange(5, dtype=np.int16))
    assert (a.dtype, len(a), a.kern_dtype) == (np.dtype(np.int16), 5, "i16")
    assert len(kern.Buffer.zeros(0)) == 0
    assert a.numpy_dtype == a.dtype  # the old name


def test_signature_lists_the_kernel_parameters(mod):
    sig = inspect.signature(mod.sq)
    assert list(sig.parameters) == ["x", "y", "a"]
    assert [p.annotation for p in sig.parameters.values()] == ["f32[]", "f32[]", "f32"]
    assert sig.bind(1, 2, a=3).arguments == {"x": 1, "y": 2, "a": 3}
    grad = inspect.signature(mod["sq.grad"])
    assert list(grad.parameters) == ["x", "y", "a", "x__grad", "y__grad", "a__grad"]
    with pytest.raises(TypeError):
        sig.bind(1, 2, 3, 4)


# ---- kern.compile: a path or source text ------------------------------------------------

ONE = "kernel one(x: f32[]) { x[0] = 1.0; }"


@pytest.mark.parametrize("name", ["prog.txt", "prog", "a b.kern", "k;1", "w{x}", "ünï.kern",
                                  "kernel"])
def test_an_existing_file_is_read_whatever_its_name(tmp_path, name):
    path = tmp_path / name
    path.write_text(ONE + "\n")
    for given in (str(path), path):
        mod = kern.compile(given)
        x = np.zeros(2, np.float32)
        mod.one(x=x)
        assert x[0] == 1.0


def test_source_text_and_missing_files(tmp_path):
    assert kern.compile(ONE).kernels[0] == "one"  # one line, with '{'
    assert kern.compile(ONE.encode()).kernels[0] == "one"
    assert kern.compile("\n" + ONE).kernels[0] == "one"
    for missing in (str(tmp_path / "nope.kern"), str(tmp_path / "nope"), "nope",
                    tmp_path / "nope"):
        with pytest.raises(kern.NotFoundError) as info:
            kern.compile(missing)
        assert isinstance(info.value, FileNotFoundError)
        assert str(info.value).startswith("kern.compile: no such file '%s'" % missing)
    with pytest.raises(kern.IOError, match="is a directory"):
        kern.compile(str(tmp_path))
    with pytest.raises(kern.ArgumentError, match="expected a path or source text, got int"):
        kern.compile(3)
    with pytest.raises(FileNotFoundError, match="kern.load: no such file"):
        kern.load(str(tmp_path / "nope.so"))
    for text in ("kernel oops(", "  func f("):  # a declaration's start: source
        with pytest.raises(kern.CompileError):
            kern.compile(text)
    assert kern.compile("// a comment alone").kernels == []


# ---- NumPy on a Vulkan context ----------------------------------------------------------

def _vulkan():
    try:
        return kern.Context("vulkan")
    except kern.Error as e:
        pytest.skip("no Vulkan device: %s" % e)


def test_numpy_on_vulkan_is_copied_with_a_plain_reason():
    ctx = _vulkan()
    mod = kern.compile(SRC, context=ctx)
    x = np.arange(1, 9, dtype=np.float32)
    y = np.zeros(8, np.float32)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        mod.sq(x=x, y=y, a=0.5)
    np.testing.assert_allclose(y, 0.5 * x * x, rtol=1e-6)
    msgs = [str(w.message) for w in got if issubclass(w.category, kern.CopyWarning)]
    assert len(msgs) == 2, msgs
    for m in msgs:
        assert "host memory on a vulkan context: copied to the device and back" in m, m
        assert "DLPack" not in m, m
    # a kern Buffer stays on the device: no copy, no warning
    xb = kern.Buffer.from_array(x, context=ctx)
    yb = kern.Buffer.zeros(8, context=ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)
        mod.sq(x=xb, y=yb, a=2.0)
    np.testing.assert_allclose(yb.read(), 2.0 * x * x, rtol=1e-6)
    ctx.release()


# ---- gradcheck: one meaning for both front ends -----------------------------------------

WRONG = """
func sq(x: f32) -> f32 grad sq_adj {
    return x * x;
}
func sq_adj(x: f32, r: f32, dr: f32) -> f32 {
    return 3.0 * x * dr;
}
kernel f(x: f32[], y: f32[]) {
    for i in 0..len(x) {
        y[i] = sq(x[i]);
    }
}
"""


def test_relative_error_and_sample_are_the_command_lines():
    from kern._gradcheck import relerr, sample
    assert relerr(3.0, 2.0) == pytest.approx(1 / 3)
    assert relerr(1e-5, 0.0) == pytest.approx(1e-2)  # the floor 1e-3
    assert relerr(float("nan"), float("nan")) == 0.0
    assert relerr(float("inf"), 1.0) == float("inf")
    assert sample(5, 200) == [0, 1, 2, 3, 4]
    # 10 of 30, spacing 3, each shifted by c mod 3: every residue mod 3 is reached
    got = sample(30, 10)
    assert got == [0, 4, 8, 9, 13, 17, 18, 22, 26, 27]
    assert {g % 3 for g in got} == {0, 1, 2}


def _kernc():
    library = _config.LIBRARY  # relative to the package (python/kern/_config.py.in)
    if not os.path.isabs(library):
        library = os.path.normpath(os.path.join(os.path.dirname(_config.__file__), library))
    path = os.path.join(os.path.dirname(os.path.dirname(library)), "kernc")
    if not os.path.exists(path):
        pytest.fail("kernc is not built beside the library (%s)" % path)
    return path


def _cli(tmp_path, file, kernel, arrays, weights, scalars=()):
    args = [_kernc(), "gradcheck", str(file), kernel]
    for name, a in list(arrays.items()) + [(k + ".grad", w) for k, w in weights.items()]:
        p = tmp_path / (name + ".npy")
        np.save(p, a)
        args.append("%s=%s" % (name, p))
    args += ["%s=%r" % kv for kv in scalars]
    r = subprocess.run(args, capture_output=True, text=True)
    m = re.search(r"gradcheck \S+: (\d+) elements, worst relative error (\S+) \(f64, tol "
                  r"\S+\), (\S+) \(f32, tol \S+\): (ok|FAILED)", r.stdout)
    assert m, (r.stdout, r.stderr)
    return int(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4) == "ok", r


def test_a_wrong_gradient_fails_both_alike(tmp_path):
    """sq_adj says 3 x where the derivative is 2 x: with L = w_x . x + w_y . y after f, K.grad
    of x is w_x + 3 x w_y, the difference w_x + 2 x w_y; the worst relative error computed
    here in NumPy from those, in both precisions, in both front ends."""
    file = tmp_path / "wrong.kern"
    file.write_text(WRONG)
    x = np.linspace(0.5, 1.0, 12).astype(np.float32)
    y = np.zeros(12, np.float32)
    w = {"y": np.full(12, 0.75), "x": np.full(12, -0.5)}
    res = kern.gradcheck(kern.compile(file).f, x=x, y=y, weights=w)
    assert not res["ok"] and res["checked"] == 24
    xd = x.astype(np.float64)
    ana, fd = w["x"] + 3 * xd * w["y"], w["x"] + 2 * xd * w["y"]
    want = np.max(np.abs(ana - fd) / np.maximum(np.maximum(np.abs(ana), np.abs(fd)), 1e-3))
    assert want > 0.3
    assert res["worst"] == pytest.approx(want, rel=1e-6)
    assert res["worst_f32"] == pytest.approx(want, rel=1e-4)
    assert res["where"].startswith("x[")
    n, e64, e32, ok, r = _cli(tmp_path, file, "f", {"x": x, "y": y}, w)
    assert (n, ok, r.returncode) == (24, False, 1)
    assert e64 == pytest.approx(want, rel=0.02)  # printed with 2 digits
    assert e32 == pytest.approx(want, rel=0.02)


def test_a_right_gradient_passes_both_alike(tmp_path):
    """examples/simulate.kern with the same inputs and weights: the same number of elements,
    the same verdict, and the same worst errors (the same f64 code on the same point)."""
    here = pathlib.Path(__file__).resolve().parents[2]
    file = here / "examples" / "simulate.kern"
    rng = np.random.default_rng(5)
    x0 = rng.uniform(-1, 1, 300).astype(np.float32)  # more than max_checks: a sample
    wt = rng.uniform(-1, 1, 16).astype(np.float32)
    out = np.zeros(300, np.float32)
    w = {"x0": rng.uniform(-1, 1, 300), "w": rng.uniform(-1, 1, 16),
         "out": rng.uniform(-1, 1, 300)}
    res = kern.gradcheck(kern.compile(file).simulate, x0=x0, w=wt, out=out, steps=16,
                         weights=w)
    assert res["ok"] and res["checked"] == 200 and res["primal_written"] is None
    assert res["worst"] < 1e-6 and res["worst_f32"] < 1e-2
    n, e64, e32, ok, r = _cli(tmp_path, file, "simulate", {"x0": x0, "w": wt, "out": out}, w,
                              [("steps", 16)])
    assert (n, ok) == (200, True), r.stdout
    assert float("%.2g" % res["worst"]) == pytest.approx(e64, rel=0.1, abs=1e-12)
    assert float("%.2g" % res["worst_f32"]) == pytest.approx(e32, rel=0.1, abs=1e-9)


def test_gradcheck_errors(mod):
    x = np.ones(3, np.float32)
    y = np.zeros(3, np.float32)
    with pytest.raises(kern.ArgumentError, match="missing argument 'a'"):
        kern.gradcheck(mod.sq, x=x, y=y)
    with pytest.raises(kern.ArgumentError, match="has no parameter named 'b'"):
        kern.gradcheck(mod.sq, x=x, y=y, a=1.0, b=2.0)
    with pytest.raises(kern.ArgumentError, match="the weights of 'y' have shape"):
        kern.gradcheck(mod.sq, x=x, y=y, a=1.0, weights={"y": np.ones(4)})
    with pytest.raises(kern.ArgumentError, match="eps and max_checks must be positive"):
        kern.gradcheck(mod.sq, x=x, y=y, a=1.0, eps=0)


def test_numpy_tangent_on_vulkan_says_to_give_a_buffer():
    ctx = _vulkan()
    tape = kern.Tape(context=ctx, forward=True)
    with pytest.raises(kern.ArgumentError) as info:
        tape.set_tangent(np.zeros(4, np.float32), np.ones(4, np.float32))
    msg = str(info.value)
    assert msg.startswith("Tape.set_tangent: the array is host memory, which a vulkan context "
                          "cannot use in place; give a kern.Buffer"), msg
    assert "DLPack" not in msg
    tape.release()
    ctx.release()


def test_recording_after_zero_without_backward_warns_once(mod):
    """zero() used to drop the records: a call recorded after a zero() that kept records no
    backward ran over says that it is added to them (FutureWarning), once; the gradient
    then is that of both calls, as Warp's tape gives."""
    x = np.linspace(1, 2, 4).astype(np.float32)
    y = np.zeros(4, np.float32)
    z = np.zeros(4, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=1.0)
    tape.zero()
    with pytest.warns(FutureWarning, match=r"kernel 'lin' on the tape: tape.zero\(\) keeps the "
                                           r"records .* added to 1 earlier record"):
        with tape:
            mod.lin(x=y, y=z, b=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with tape:
            mod.lin(x=y, y=z, b=3.0)  # said once
    assert tape.records == 3
    tape.backward(seeds=[(z, np.ones(4, np.float32))])
    np.testing.assert_allclose(tape.grad(x), 3.0 * 2 * x, rtol=1e-6)
    tape.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with tape:
            mod.sq(x=x, y=y, a=1.0)
        tape.zero()  # then backward, no recording: nothing to say
        tape.backward(seeds=[(y, np.ones(4, np.float32))])
