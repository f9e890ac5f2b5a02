"""The Python package on the CUDA device (docs/python.md): PyTorch and JAX CUDA arrays passed
by DLPack without copies, kern buffers lent to PyTorch without copies, and the gradient of a
per-thread loop against torch.autograd. Needs a GPU: on machines without one every test is
reported as skipped, with the reason (never as passed). Run by scripts/device-python.sh on
the GPU machine."""

import os
import warnings

import numpy as np
import pytest

import kern

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here (torch.cuda.is_available() is False)",
                allow_module_level=True)
try:
    CTX = kern.Context("cuda")
except kern.Error as e:
    pytest.skip("kern has no CUDA device here: %s" % e, allow_module_level=True)


@pytest.fixture(scope="module")
def sim():
    return kern.compile(os.path.join(ROOT, "examples", "simulate.kern"), context=CTX)


def torch_sim(x0, w, steps):
    x = x0
    for t in range(steps):
        x = torch.sin(x) * w[t] + x
    return x


def test_torch_cuda_tensors_in_place(sim):
    g = torch.Generator(device="cuda").manual_seed(0)
    n, steps = 1 << 16, 64
    x0 = torch.rand(n, device="cuda", generator=g) * 2 - 1
    w = (torch.rand(steps, device="cuda", generator=g) - 0.5)
    out = torch.zeros(n, device="cuda")
    ptr = out.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)  # no copy may happen
        sim.simulate(x0=x0, w=w, out=out, steps=steps)
    assert out.data_ptr() == ptr
    ref = torch_sim(x0.double(), w.double(), steps)
    assert torch.max(torch.abs(out.double() - ref)).item() < 1e-4


def test_kern_buffer_lent_to_torch_without_copy():
    b = kern.Buffer.from_array(np.arange(8, dtype=np.float32), context=CTX)
    t = torch.from_dlpack(b)
    assert t.is_cuda
    assert t.data_ptr() == kern._c["buf_pointer"](b._ptr)
    t[3] = 42.0
    torch.cuda.synchronize()
    assert b.read()[3] == 42.0
    b.release()
    assert t[3].item() == 42.0  # the view keeps the memory


def test_views_outlive_their_cuda_context():
    """A CUDA context released while torch views its buffers: the views keep the device
    memory (and kern's CUDA context) until the last is gone."""
    import gc
    ctx = kern.Context("cuda")
    t = torch.from_dlpack(kern.Buffer.from_array(np.arange(1024, dtype=np.float32),
                                                 context=ctx))
    ctx.release()
    del ctx
    gc.collect()
    assert t.is_cuda and t[1023].item() == 1023.0
    t += 1
    assert t.sum().item() == sum(range(1, 1025))
    del t
    gc.collect()
    torch.cuda.synchronize()


def test_gradient_of_a_per_thread_loop_against_autograd(sim):
    g = torch.Generator(device="cuda").manual_seed(1)
    n, steps = 4096, 128
    x0 = torch.rand(n, device="cuda", generator=g) * 2 - 1
    w = (torch.rand(steps, device="cuda", generator=g) - 0.5) * 0.5
    out = torch.zeros(n, device="cuda")
    seed = torch.rand(n, device="cuda", generator=g) - 0.5
    with kern.Tape(CTX) as tape:
        sim.simulate(x0=x0, w=w, out=out, steps=steps)
    tape.backward(seeds={out: seed})
    tx = x0.double().clone().requires_grad_(True)
    tw = w.double().clone().requires_grad_(True)
    (torch_sim(tx, tw, steps) * seed.double()).sum().backward()
    dx = tape.grad(x0)
    dw = tape.grad(w)
    err_x = np.max(np.abs(dx - tx.grad.cpu().numpy()))
    err_w = np.max(np.abs(dw - tw.grad.cpu().numpy()) / (1 + np.abs(tw.grad.cpu().numpy())))
    print("CUDA gradient vs torch.autograd (f64): max |dx0| error %.2e, max rel |dw| error %.2e"
          % (err_x, err_w))
    assert err_x < 1e-3 and err_w < 1e-3


def test_jax_arrays_by_dlpack():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX has no GPU here")
    m = kern.compile(os.path.join(ROOT, "examples", "simulate.kern"), context=CTX)
    x0 = jax.device_put(jnp.linspace(-1.0, 1.0, 1024, dtype=jnp.float32), gpus[0])
    w = jax.device_put(jnp.full((32,), 0.25, dtype=jnp.float32), gpus[0])
    out = torch.zeros(1024, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)  # JAX's inputs in place too
        m.simulate(x0=x0, w=w, out=out, steps=32)
    ref = torch_sim(torch.linspace(-1, 1, 1024, dtype=torch.float64), torch.full((32,), 0.25,
                    dtype=torch.float64), 32)
    assert torch.max(torch.abs(out.double().cpu() - ref)).item() < 1e-4


def test_async_calls_are_ordered_by_streams():
    """Context(sync=False): no host waits; torch's work before a call (on a side stream too)
    reaches kern through DLPack's stream argument, and torch's work after it waits for
    kern's stream. Results are checked by torch ops queued right after the calls."""
    import time
    ctx = kern.Context("cuda", sync=False)
    m = kern.compile(os.path.join(ROOT, "examples", "simulate.kern"), context=ctx)
    side = torch.cuda.Stream()
    n, steps = 1 << 18, 64
    with torch.cuda.stream(side):
        x0 = torch.linspace(-1, 1, n, device="cuda") * 0.999  # produced on the side stream
        w = torch.full((steps,), 0.3, device="cuda")
        out = torch.zeros(n, device="cuda")
        for _ in range(3):
            m.simulate(x0=x0, w=w, out=out, steps=steps)
            x0 = out * 0.5  # consumes out on the side stream, makes the next input
        total = out.double().sum()
    torch.cuda.synchronize()
    ref = torch.linspace(-1, 1, n, device="cuda", dtype=torch.float64) * 0.999
    for _ in range(3):
        r = torch_sim(ref, torch.full((steps,), 0.3, device="cuda", dtype=torch.float64), steps)
        ref = r * 0.5
    assert torch.max(torch.abs(out.double() - r)).item() < 1e-4
    assert abs(total.item() - r.sum().item()) <= 1e-5 * abs(r.sum().item()) + 1e-2
    x = torch.ones(16, device="cuda")
    y = torch.zeros(16, device="cuda")
    sax = kern.compile(os.path.join(ROOT, "examples", "saxpy.kern"), context=ctx)
    for _ in range(50):
        sax.saxpy(a=1.0, x=x, y=y)
    calls = 2000
    t0 = time.perf_counter()
    for _ in range(calls):
        sax.saxpy(a=1.0, x=x, y=y)
    us = (time.perf_counter() - t0) / calls * 1e6
    assert y[0].item() == 2050.0
    print("CUDA call from Python, sync=False: %.1f us per call" % us)


def test_numpy_on_cuda_is_copied_with_a_plain_reason_and_gradcheck_runs_there(sim):
    """NumPy arrays are host memory: copied to the device and back, the warning saying so
    (not a DLPack refusal); kern.gradcheck retypes to f64 on the CUDA device and passes."""
    rng = np.random.default_rng(3)
    x0 = rng.uniform(-1, 1, 64).astype(np.float32)
    w = rng.uniform(-1, 1, 16).astype(np.float32)
    out = np.zeros(64, np.float32)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        sim.simulate(x0=x0, w=w, out=out, steps=16)
    want = torch_sim(torch.from_numpy(x0).double(), torch.from_numpy(w).double(), 16).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    msgs = [str(m.message) for m in got if issubclass(m.category, kern.CopyWarning)]
    assert len(msgs) == 3 and all("host memory on a cuda context" in m and "DLPack" not in m
                                  for m in msgs), msgs
    r = kern.gradcheck(sim.simulate, x0=x0, w=w, out=out, steps=16)
    assert r["ok"] and r["checked"] == 64 + 16 + 64, r
