"""The Python package (python/kern, docs/python.md) on the CPU: every kernel of the
examples against NumPy references, gradients against PyTorch autograd (f64) and the
corpus' own finite differences, zero copies proven by data pointers, every error path with
its message, and arrays released while a kernel uses them.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python (meson test
`python` does this)."""

import gc
import os
import warnings

import numpy as np
import pytest

import kern

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EX = os.path.join(ROOT, "examples")
try:  # Debian's python3-torch, in setup.sh's packages: the reference and a DLPack producer
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed here")


def ex(name):
    return kern.compile(os.path.join(EX, name))


@pytest.fixture(scope="module")
def sim():
    return ex("simulate.kern")


def sim_ref(x0, w, steps):
    x = x0.astype(np.float32).copy()
    for t in range(steps):
        x = (np.sin(x) * w[t] + x).astype(np.float32)
    return x


def inputs(n=8, steps=16, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, n).astype(np.float32),
            rng.uniform(-0.5, 0.5, steps).astype(np.float32))


# ---- every kernel of the examples ------------------------------------------------------

def test_simulate_in_place(sim):
    x0, w = inputs()
    out = np.zeros(8, np.float32)
    sim.simulate(x0=x0, w=w, out=out, steps=16)
    np.testing.assert_allclose(out, sim_ref(x0, w, 16), rtol=1e-6, atol=1e-6)


def test_simulate_positional(sim):
    x0, w = inputs(seed=1)
    out = np.zeros(8, np.float32)
    sim.simulate(x0, w, out, 16)
    np.testing.assert_allclose(out, sim_ref(x0, w, 16), rtol=1e-6, atol=1e-6)


def test_saxpy():
    m = ex("saxpy.kern")
    rng = np.random.default_rng(2)
    x = rng.standard_normal(100).astype(np.float32)
    y = rng.standard_normal(100).astype(np.float32)
    want = (y + np.float32(1.5) * x).astype(np.float32)
    m.saxpy(a=1.5, x=x, y=y)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_heat_time_steps():
    m = ex("heat.kern")
    rng = np.random.default_rng(3)
    u = np.zeros((5, 10), np.float32)
    u[0] = rng.uniform(0, 1, 10)
    k = rng.uniform(0.5, 1, 10).astype(np.float32)
    ref = u.copy()
    for t in range(1, 5):
        m.heat(u=u, k=k, t=t)
        c = ref[t - 1]
        ref[t] = c
        ref[t, 1:-1] = c[1:-1] + np.float32(0.25) * k[1:-1] * (c[:-2] - 2 * c[1:-1] + c[2:])
    np.testing.assert_allclose(u, ref, rtol=1e-5, atol=1e-6)


def test_mse_loss():
    m = ex("loss.kern")
    rng = np.random.default_rng(4)
    pred = rng.standard_normal(64).astype(np.float32)
    target = rng.standard_normal(64).astype(np.float32)
    loss = np.zeros(1, np.float32)
    m.mse(pred=pred, target=target, loss=loss)
    np.testing.assert_allclose(loss[0], np.mean((pred - target) ** 2), rtol=1e-5)


def test_particles_3d():
    m = ex("particles.kern")
    rng = np.random.default_rng(5)
    x = np.zeros((4, 6, 3), np.float32)
    v = np.zeros((4, 6, 3), np.float32)
    x[0] = rng.standard_normal((6, 3))
    v[0] = rng.standard_normal((6, 3))
    rx, rv = x.copy(), v.copy()
    for t in range(1, 4):
        m.step(x=x, v=v, k=2.0, dt=0.1, t=t)
        a = np.float32(-2.0) * rx[t - 1]
        rv[t] = rv[t - 1] + np.float32(0.1) * a
        rx[t] = rx[t - 1] + np.float32(0.1) * rv[t]
    np.testing.assert_allclose(x, rx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v, rv, rtol=1e-5, atol=1e-6)


def test_jacobi_2d():
    m = ex("stencil2d.kern")
    rng = np.random.default_rng(6)
    src = rng.standard_normal((7, 9)).astype(np.float32)
    dst = np.zeros_like(src)
    m.jacobi(src=src, dst=dst)
    ref = src.copy()
    ref[1:-1, 1:-1] = np.float32(0.25) * (src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2] +
                                          src[1:-1, 2:])
    np.testing.assert_allclose(dst, ref, rtol=1e-6, atol=1e-6)


def test_bounce_with_int_output():
    m = ex("bounce.kern")
    rng = np.random.default_rng(7)
    n, steps, dt, vmax = 5, 40, 0.05, 20.0
    y0 = rng.uniform(0.5, 2, n).astype(np.float32)
    v0 = rng.uniform(-1, 1, n).astype(np.float32)
    y1, v1 = np.zeros(n, np.float32), np.zeros(n, np.float32)
    hits = np.zeros(n, np.int32)
    m.bounce(y0=y0, v0=v0, y1=y1, v1=v1, dt=dt, steps=steps, vmax=vmax, hits=hits)
    f = np.float32
    for b in range(n):
        y, vy, count = f(y0[b]), f(v0[b]), 0
        for _ in range(steps):
            vy = f(np.clip(f(vy - f(9.81) * f(dt)), -f(vmax), f(vmax)))
            y = f(y + f(vy * f(dt)))
            if y < 0:
                y, vy, count = -y, f(-vy * f(0.8)), count + 1
        k = 0
        while abs(vy) > 1e-3 and k < 64:
            vy, k = f(vy * f(0.5)), k + 1
        assert hits[b] == count
        np.testing.assert_allclose([y1[b], v1[b]], [y, vy], rtol=1e-5, atol=1e-6)


# ---- zero copies ---------------------------------------------------------------------

def test_numpy_used_in_place(sim):
    x0, w = inputs()
    out = np.zeros(8, np.float32)
    ptr = out.ctypes.data
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)  # no copy may happen
        sim.simulate(x0=x0, w=w, out=out, steps=16)
    assert out.ctypes.data == ptr
    assert np.all(out != 0)


@needs_torch
def test_torch_cpu_tensor_updated_in_place(sim):
    x0, w = inputs()
    out = torch.zeros(8)
    ptr = out.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)
        sim.simulate(x0=torch.from_numpy(x0), w=torch.from_numpy(w), out=out, steps=16)
    assert out.data_ptr() == ptr
    np.testing.assert_allclose(out.numpy(), sim_ref(x0, w, 16), rtol=1e-6, atol=1e-6)


@needs_torch
def test_kern_buffer_to_torch_and_numpy_without_copy():
    b = kern.Buffer.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(b)
    a = b.numpy()
    assert t.data_ptr() == a.ctypes.data
    t[1, 2] = 42.0
    assert a[1, 2] == 42.0 and b.read()[1, 2] == 42.0
    b.release()  # the views keep the memory
    assert t[1, 2].item() == 42.0
    del t, a
    gc.collect()


def test_read_only_inputs_are_used_in_place(sim):
    """A read-only array for a parameter the kernel never writes is used in place; for one
    it may write, it is copied with a warning (and never written)."""
    x0, w = inputs()
    x0.flags.writeable = False
    w.flags.writeable = False
    out = np.zeros(8, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)
        sim.simulate(x0=x0, w=w, out=out, steps=16)
    np.testing.assert_allclose(out, sim_ref(x0, w, 16), rtol=1e-6, atol=1e-6)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.warns(kern.CopyWarning, match="parameter 'out': copied, not used in place "
                                              r"\(the array is read-only, and the kernel may "
                                              r"write it\)"):
        sim.simulate(x0=x0, w=w, out=ro, steps=16)
    assert np.all(ro == 0), "a read-only array is never written"


def test_copies_are_said_and_written_back(sim):
    x0, w = inputs()
    out64 = np.zeros(8)  # f64 for an f32 parameter
    with pytest.warns(kern.CopyWarning, match="parameter 'out': copied, not used in place "
                                              r"\(its dtype is float64, the parameter is f32\)"):
        sim.simulate(x0=x0, w=w, out=out64, steps=16)
    np.testing.assert_allclose(out64, sim_ref(x0, w, 16), rtol=1e-6, atol=1e-6)
    strided = np.zeros(16, np.float32)[::2]
    with pytest.warns(kern.CopyWarning, match="parameter 'out'"):
        sim.simulate(x0=x0, w=w, out=strided, steps=16)
    np.testing.assert_allclose(strided, sim_ref(x0, w, 16), rtol=1e-6, atol=1e-6)


# ---- gradients -------------------------------------------------------------------------

def torch_sim(x0, w, steps):
    tx = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    y = tx
    for t in range(steps):
        y = torch.sin(y) * tw[t] + y
    return tx, tw, y


@needs_torch
def test_gradient_against_torch_autograd(sim):
    x0, w = inputs(n=32, steps=24)
    out = np.zeros(32, np.float32)
    seed = np.random.default_rng(8).uniform(-1, 1, 32).astype(np.float32)
    with kern.Tape() as tape:
        sim.simulate(x0=x0, w=w, out=out, steps=24)
    tape.backward(seeds=[(out, seed)])
    tx, tw, y = torch_sim(x0, w, 24)
    (y * torch.tensor(seed, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(tape.grad(x0), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tape.grad(w), tw.grad.numpy(), rtol=1e-4, atol=1e-4)


@needs_torch
def test_tape_over_several_launches_against_torch():
    """heat.kern over 6 time steps: the tape runs the 6 gradients in reverse."""
    m = ex("heat.kern")
    rng = np.random.default_rng(9)
    T, n = 7, 12
    u = np.zeros((T, n), np.float32)
    u[0] = rng.uniform(0, 1, n)
    k = rng.uniform(0.5, 1, n).astype(np.float32)
    seed = rng.uniform(-1, 1, n).astype(np.float32)
    u0 = u[0].copy()
    with kern.Tape() as tape:
        for t in range(1, T):
            m.heat(u=u, k=k, t=t)
    assert tape.records == T - 1
    g = np.zeros((T, n), np.float32)
    g[T - 1] = seed
    tape.backward(seeds=[(u, g)])
    du = tape.grad(u)
    tu = torch.tensor(u0, dtype=torch.float64, requires_grad=True)
    tk = torch.tensor(k, dtype=torch.float64)
    c = tu
    for _ in range(1, T):
        nxt = c.clone()
        nxt[1:-1] = c[1:-1] + 0.25 * tk[1:-1] * (c[:-2] - 2 * c[1:-1] + c[2:])
        c = nxt
    (c * torch.tensor(seed, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(du[0], tu.grad.numpy(), rtol=1e-4, atol=1e-5)


@needs_torch
def test_tape_with_torch_tensors(sim):
    x0, w = inputs()
    tx0, tw, tout = torch.from_numpy(x0.copy()), torch.from_numpy(w.copy()), torch.zeros(8)
    with kern.Tape() as tape:
        sim.simulate(x0=tx0, w=tw, out=tout, steps=16)
    tape.backward(seeds={tout: torch.ones(8)})
    rx, rw, y = torch_sim(x0, w, 16)
    y.sum().backward()
    np.testing.assert_allclose(tape.grad(tx0), rx.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_scalar_gradient():
    m = ex("saxpy.kern")
    x = np.linspace(-1, 1, 10).astype(np.float32)
    y = np.zeros(10, np.float32)
    with kern.Tape() as tape:
        m.saxpy(a=2.0, x=x, y=y)
    tape.backward(seeds=[(y, np.ones(10, np.float32))])
    assert tape.scalar_grad(0, 0) == pytest.approx(float(x.sum()), abs=1e-5)


CORPUS_SAMPLE = [(n, "f64") for n in ["math_trig", "while_break_continue", "break_loop",
                                       "nested_loops", "mass_spring", "matmul"]] + \
    [(n, "f32") for n in ["math_trig", "nested_loops", "mass_spring", "matmul"]]


@pytest.mark.parametrize("name,real", CORPUS_SAMPLE)
def test_corpus_sample_gradcheck(name, real):
    """A sample of the gradient corpus (tests/grad, REAL = f64 and f32) through Python."""
    path = os.path.join(ROOT, "tests", "grad", name + ".kern")
    with open(path) as f:
        src = f.read().replace("REAL", real)
    m = kern.compile(src, name=name + ".kern")
    k = [m.kernel(n) for n in m.kernels if not n.endswith(".grad")][0]
    rng = np.random.default_rng(10)
    args = {}
    for p in k.params:
        if p.is_array:
            shape = (8,) * p.rank
            dt = {5: np.float32, 6: np.float64, 2: np.int32, 3: np.uint32, 4: np.int64,
                  1: np.bool_}[p.dtype]
            args[p.name] = (rng.uniform(-1, 1, shape).astype(dt) if p.differentiable
                            else rng.integers(0, 8, shape).astype(dt))
        else:
            # integer scalars: 1 for a time index t (time-indexed arrays), else the size
            ints = 1 if p.name == "t" else 8
            args[p.name] = ints if p.dtype in (2, 3, 4) else (True if p.dtype == 1 else 0.5)
    r = kern.gradcheck(k, **args)
    assert r["ok"], r


def test_gradcheck_finds_a_wrong_gradient():
    """An in-place update compiled without the global-access check has a wrong K.grad
    (it re-reads the values K overwrote): gradcheck must say so."""
    src = ("kernel sq(x: f32[]) {\n"
           "    for i in 0..len(x) { x[i] = x[i] * x[i]; }\n"
           "}\n")
    try:
        m = kern.compile(src)
        k = m.sq
    except kern.Error:
        pytest.skip("in-place kernels are rejected by the compiler here")
    x = np.linspace(0.5, 1.5, 6).astype(np.float32)
    try:
        r = kern.gradcheck(k, x=x)
    except kern.NotFoundError as e:
        assert "was not built" in str(e)  # the compiler refused its gradient: also loud
        return
    assert not r["ok"], r


# ---- errors ----------------------------------------------------------------------------

def test_errors_name_kernel_and_parameter(sim):
    x0, w = inputs()
    out = np.zeros(8, np.float32)
    with pytest.raises(kern.ArgumentError, match="kernel 'simulate': missing argument 'steps'"):
        sim.simulate(x0=x0, w=w, out=out)
    with pytest.raises(kern.ArgumentError, match="has no parameter named 'bogus'"):
        sim.simulate(x0=x0, w=w, out=out, steps=1, bogus=2)
    with pytest.raises(kern.ArgumentError, match="parameter 'steps': expected an integer"):
        sim.simulate(x0=x0, w=w, out=out, steps=1.5)
    with pytest.raises(kern.ArgumentError, match="2147483648 is out of range for i32"):
        sim.simulate(x0=x0, w=w, out=out, steps=2 ** 31)
    with pytest.raises(kern.ArgumentError, match="parameter 'x0': an array of rank 2"):
        sim.simulate(x0=x0[None], w=w, out=out, steps=1)
    with pytest.raises(kern.ArgumentError, match="parameter 'x0': expected an array"):
        sim.simulate(x0=3.0, w=w, out=out, steps=1)
    with pytest.raises(kern.ArgumentError, match="parameter 'x0': an array of complex64 cannot "
                                                 "be converted to f32"):
        sim.simulate(x0=x0.astype(np.complex64), w=w, out=out, steps=1)
    with pytest.raises(kern.ArgumentError, match="parameter 'x0': an array of <U1 cannot"):
        sim.simulate(x0=np.array(list("abcdefgh")), w=w, out=out, steps=1)
    m = ex("bounce.kern")
    with pytest.raises(kern.ArgumentError, match="parameter 'hits': an array of float32 cannot "
                                                 "be converted to i32"):
        f = np.zeros(2, np.float32)
        m.bounce(y0=f, v0=f, y1=f, v1=f, dt=0.1, steps=1, vmax=1.0, hits=f)
    with pytest.raises(kern.ArgumentError, match="takes 4 arguments, got 5"):
        sim.simulate(x0, w, out, 1, 2)
    with pytest.raises(kern.ArgumentError, match="'steps' is given twice"):
        sim.simulate(x0, w, out, 1, steps=2)


def test_index_out_of_bounds_is_an_error_with_the_line():
    m = kern.compile(os.path.join(EX, "simulate.kern"), context=kern.Context(debug=True))
    x0, w = inputs(steps=4)
    with pytest.raises(kern.DeviceError, match=r"kernel 'simulate' \(.*simulate.kern:\d+:\d+\): index 4 out "
                                              r"of bounds for dimension 0 of extent 4"):
        m.simulate(x0=x0, w=w, out=np.zeros(8, np.float32), steps=5)


def test_compile_errors_carry_the_diagnostics():
    with pytest.raises(kern.CompileError, match=r"bad.kern:1:\d+: error"):
        kern.compile("kernel k(x: f32[]) { x = 1; }\n", name="bad.kern")
    with pytest.raises(kern.NotFoundError,
                       match="kern.compile: no such file '/nonexistent/no.kern'"):
        kern.compile("/nonexistent/no.kern")
    with pytest.raises(kern.NotFoundError, match="no kernel 'nope'"):
        ex("saxpy.kern")["nope"]


def test_adstack_overflow_raises_with_the_command_lines_message():
    src = ("kernel w(x: f32[], y: f32[]) {\n"
           "    for i in 0..len(x) {\n"
           "        var v = x[i];\n"
           "        while v < 100.0 { v = v * 2.0 + 1.0; }\n"
           "        y[i] = v;\n"
           "    }\n"
           "}\n")
    ctx = kern.Context(ad_stack_size=2)
    m = kern.compile(src, context=ctx, name="w.kern")
    x = np.full(4, 0.5, np.float32)
    y = np.zeros(4, np.float32)
    with kern.Tape(ctx) as tape:
        m.w(x=x, y=y)
    with pytest.raises(kern.Error, match=r"adstack overflow in the loop at w.kern:4:9: the loop "
                                         r"runs more than 2 iterations \(--ad-stack-size 2\); "
                                         r"it needs --ad-stack-size (\d+) or more \(kernc\), "
                                         r"or kern.Context\(ad_stack_size=\1\)"):
        tape.backward(seeds=[(y, np.ones(4, np.float32))])


def test_load_refuses_a_truncated_module(tmp_path):
    bad = tmp_path / "m.so"
    bad.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 40)
    with pytest.raises(kern.FormatError, match="is not a loadable module"):
        kern.load(bad)


def test_released_handles_are_errors():
    ctx = kern.Context()
    m = kern.compile(os.path.join(EX, "saxpy.kern"), context=ctx)
    b = kern.Buffer.zeros(4, context=ctx)
    b.release()
    with pytest.raises(kern.ArgumentError, match="the buffer was released"):
        b.read()
    m.release()
    with pytest.raises(kern.ArgumentError, match="the module was released"):
        m.saxpy(a=1.0, x=np.zeros(4, np.float32), y=np.zeros(4, np.float32))
    ctx.release()
    with pytest.raises(kern.ArgumentError, match="the context was released"):
        kern.Buffer.zeros(4, context=ctx)


# ---- lifetimes -----------------------------------------------------------------------

@needs_torch
def test_arrays_released_while_in_use_stay_valid(sim):
    """Thousands of calls on temporaries that die at once, kern buffers released right
    after a launch, and exported views outliving their buffers: results stay right and
    nothing crashes (run under the sanitizers' eyes in CI's C tests; here the Python
    side)."""
    x0, w = inputs(n=64)
    want = sim_ref(x0, w, 16)
    for i in range(2000):
        out = np.zeros(64, np.float32)
        sim.simulate(x0=x0.copy(), w=w.copy(), out=out, steps=16)
        if i % 500 == 0:
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
        del out
    views = []
    for i in range(200):
        b = kern.Buffer.from_array(np.full(16, i, np.float32))
        views.append(torch.from_dlpack(b))
        b.release()
    gc.collect()
    for i, v in enumerate(views):
        assert v[7].item() == i
    del views
    gc.collect()
    t = torch.zeros(64)
    sim.simulate(x0=torch.from_numpy(x0), w=torch.from_numpy(w), out=t, steps=16)
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, atol=1e-6)


@needs_torch
def test_views_outlive_their_context():
    """A context released (or collected) while torch tensors view its buffers: the tensors
    keep their memory, and the last one frees it (CI runs this against the sanitized
    library)."""
    ctx = kern.Context("cpu")
    b = kern.Buffer.from_array(np.arange(64, dtype=np.float32), context=ctx)
    t = torch.from_dlpack(b)
    u = torch.from_dlpack(kern.Buffer.from_array(np.ones(8, np.float32), context=ctx))
    ctx.release()
    del b, ctx
    gc.collect()
    assert t[63].item() == 63.0
    t[0] = -5.0
    assert t.sum().item() == sum(range(1, 64)) - 5.0
    del t
    gc.collect()
    assert u.sum().item() == 8.0
    del u
    gc.collect()


def test_devices_come_from_the_target_registry():
    # the runtime's registry (kern_backend_name, kern_backend_available), not a list of the
    # package's own: the backends with a device, and nothing else
    from kern import _library
    assert _library._BACKENDS == {"cpu": 0, "cuda": 1, "vulkan": 3}
    with pytest.raises(kern.ArgumentError, match=r"unknown device 'metal' \(cpu, cuda, vulkan\)"):
        kern.Context("metal")
