"""kern.torch (docs/python.md, "PyTorch autograd"): kernels as torch.autograd.Functions.
Gradients against torch.autograd.gradcheck in f64 (central differences of the forward,
an independent reference), values and gradients against the same computation written in
PyTorch, zero copies (the tensors' own pointers reach kern_buffer_wrap, no CopyWarning),
and the errors. CPU here; tests/python/test_bridge_cuda.py has the CUDA half."""

import os
import warnings

import pytest

import kern

torch = pytest.importorskip("torch")
import kern.torch as kt  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bridge.kern")


@pytest.fixture(scope="module")
def mod():
    return kern.compile(SRC)


def torch_sim(x0, w, steps):
    x = x0
    for t in range(steps):
        x = torch.sin(x) * w[t] + x
    return x


def f64(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return ((torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * scale) \
        .requires_grad_()


def test_gradcheck_per_thread_loop(mod):
    sim = kt.function(mod.sim, shapes={"out": "x0"})
    x0, w = f64(7, seed=1), f64(5, seed=2, scale=0.5)
    assert torch.autograd.gradcheck(lambda a, b: sim(a, b, steps=5), (x0, w), eps=1e-6,
                                    atol=1e-7, rtol=1e-6)
    out = sim(x0, w, 5)
    assert torch.allclose(out, torch_sim(x0, w, 5), rtol=1e-12, atol=1e-12)


def test_gradcheck_updated_array_and_scalar_tensor(mod):
    """y is updated (+=): given, it is the initial value of a copy, left alone itself; its
    gradient is that of the initial value. a, a one-element tensor, gets its gradient."""
    axpy = kt.function(mod.axpy)
    a = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    x, y = f64(9, seed=3), f64(9, seed=4)
    y_before = y.detach().clone()
    out = axpy(a, x, y)
    assert torch.equal(y.detach(), y_before)  # the argument is not written
    assert torch.allclose(out, y_before + 0.7 * torch.sin(x.detach()), rtol=1e-14)
    assert torch.autograd.gradcheck(lambda a, x, y: axpy(a=a, x=x, y=y), (a, x, y), eps=1e-6,
                                    atol=1e-7, rtol=1e-6)
    # the same against torch.autograd of the PyTorch version, through a loss
    g = torch.linspace(-1, 2, 9, dtype=torch.float64)
    (axpy(a, x, y) * g).sum().backward()
    got = [a.grad.clone(), x.grad.clone(), y.grad.clone()]
    for t in (a, x, y):
        t.grad = None
    ((y + a * torch.sin(x)) * g).sum().backward()
    for mine, ref in zip(got, (a.grad, x.grad, y.grad)):
        assert mine.shape == ref.shape
        assert torch.allclose(mine, ref, rtol=1e-12, atol=1e-14)


def test_two_outputs_an_integer_input_and_a_shape_function(mod):
    pick = kt.function(mod.pick, shapes={"s": lambda idx, **_: (len(idx),), "q": "idx"})
    assert pick.outputs == ["s", "q"]
    x = f64(6, seed=5)
    idx = torch.tensor([5, 0, 0, 3], dtype=torch.int32)
    s, q = pick(x, idx)
    xs = x.detach()[idx.long()]
    assert torch.allclose(s, xs * xs) and torch.allclose(q, torch.exp(xs) * 0.5)
    assert torch.autograd.gradcheck(lambda x: pick(x, idx), (x,), eps=1e-6, atol=1e-7,
                                    rtol=1e-6)


def test_composes_with_torch_ops_against_autograd(mod):
    sim = kt.function(mod.sim, shapes={"out": "x0"})
    x0, w = f64(64, seed=6), f64(8, seed=7, scale=0.4)
    loss = (sim(x0 * 0.5, torch.tanh(w), steps=8) ** 2).sum()
    loss.backward()
    mine = (x0.grad.clone(), w.grad.clone())
    x0.grad = w.grad = None
    (torch_sim(x0 * 0.5, torch.tanh(w), 8) ** 2).sum().backward()
    assert torch.allclose(mine[0], x0.grad, rtol=1e-10, atol=1e-12)
    assert torch.allclose(mine[1], w.grad, rtol=1e-10, atol=1e-12)


def test_zero_copies(mod, monkeypatch):
    """The tensors themselves reach the kernel: their data pointers are wrapped
    (kern_buffer_wrap), in forward and in backward, and nothing is copied."""
    wrapped = []
    wrap = kern._c["buf_wrap"]

    def spy(ctx, dtype, rank, dims, ptr, *rest):
        wrapped.append(ptr)
        return wrap(ctx, dtype, rank, dims, ptr, *rest)
    monkeypatch.setitem(kern._c, "buf_wrap", spy)
    sim = kt.function(mod.sim32, shapes={"out": "x0"})
    x0 = torch.linspace(-1, 1, 16).requires_grad_()
    w = torch.full((4,), 0.3).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)
        out = sim(x0, w, steps=4)
        assert {x0.data_ptr(), w.data_ptr(), out.data_ptr()} <= set(wrapped)
        wrapped.clear()
        grads = []  # the gradients backward returns, before PyTorch accumulates them
        x0.register_hook(lambda g: grads.append(g.data_ptr()))
        w.register_hook(lambda g: grads.append(g.data_ptr()))
        out.backward(torch.ones(16))
    # backward: the primals again (as forward left them) and the adjoints it returns
    assert len(grads) == 2
    assert {x0.data_ptr(), w.data_ptr(), out.data_ptr(), *grads} <= set(wrapped)
    ref_x0, ref_w = x0.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    torch_sim(ref_x0, ref_w, 4).sum().backward()
    assert torch.allclose(x0.grad.double(), ref_x0.grad, rtol=1e-5, atol=1e-6)
    assert torch.allclose(w.grad.double(), ref_w.grad, rtol=1e-5, atol=1e-5)


def test_not_recorded_on_a_kern_tape(mod):
    sim = kt.function(mod.sim, shapes={"out": "x0"})
    x0, w = f64(4, seed=8), f64(3, seed=9)
    with kern.Tape() as tape:
        out = sim(x0, w, steps=3)
    assert tape.records == 0
    out.sum().backward()
    assert x0.grad is not None and w.grad is not None


def test_changed_saved_tensor_is_detected(mod):
    sim = kt.function(mod.sim, shapes={"out": "x0"})
    x0, w = f64(4, seed=10), f64(3, seed=11)
    out = sim(x0, w, steps=3)
    with torch.no_grad():
        out.mul_(2)  # K.grad would read what K did not leave
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_errors(mod):
    with pytest.raises(kern.ArgumentError, match="'out' .*shapes=\\{'out'"):
        kt.function(mod.sim)(f64(3), f64(2), steps=2)
    with pytest.raises(kern.ArgumentError, match="parameter 'x0' is not an output"):
        kt.function(mod.sim, shapes={"x0": (3,)})
    with pytest.raises(kern.ArgumentError, match="no parameter named 'nope'"):
        kt.function(mod.sim, shapes={"nope": (3,)})
    with pytest.raises(kern.ArgumentError, match="shaped like 'steps'"):
        kt.function(mod.sim, shapes={"out": "steps"})
    sim = kt.function(mod.sim, shapes={"out": "x0"})
    with pytest.raises(kern.ArgumentError,
                       match="parameter 'x0' \\(f64\\[\\]\\): a tensor of float32, expected "
                             "float64"):
        sim(torch.zeros(3), f64(2), steps=2)
    with pytest.raises(kern.ArgumentError, match="parameter 'w': expected a torch.Tensor"):
        sim(f64(3), [0.5, 0.5], steps=2)
    with pytest.raises(kern.ArgumentError, match="has no parameter named 'step'"):
        sim(f64(3), f64(2), step=2)
    with pytest.raises(kern.ArgumentError, match="'steps': expected a scalar i32"):
        sim(f64(3), f64(2), steps=torch.ones(2, dtype=torch.int32))
    with pytest.raises(kern.ArgumentError, match="output 'q' is shaped like 's', which is "
                                                 "not given"):
        kt.function(mod.pick, shapes={"s": (2,), "q": "s"})(f64(3), torch.zeros(
            2, dtype=torch.int32))
    with pytest.raises(kern.ArgumentError, match="shape \\(3, 'x'\\) is not a tuple"):
        kt.function(mod.sim, shapes={"out": (3, "x")})(f64(3), f64(2), steps=2)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="this PyTorch (%s) has no "
                    "torch.compile (2.0 and later)" % torch.__version__)
def test_inside_torch_compile(mod):
    """torch.compile breaks the graph at the kern op and runs it eagerly (its fallback):
    values and gradients as without compile."""
    sim = kt.function(mod.sim, shapes={"out": "x0"})

    def loss(x0, w):
        return (torch.cos(sim(x0 * 2.0, w, steps=6)) * 3.0).sum()
    compiled = torch.compile(loss, backend="eager")
    x0, w = f64(32, seed=12), f64(6, seed=13, scale=0.5)
    got = compiled(x0, w)
    got.backward()
    mine = (x0.grad.clone(), w.grad.clone())
    x0.grad = w.grad = None
    ref = (torch.cos(torch_sim(x0 * 2.0, w, 6)) * 3.0).sum()
    ref.backward()
    assert torch.allclose(got, ref, rtol=1e-12)
    assert torch.allclose(mine[0], x0.grad, rtol=1e-10, atol=1e-12)
    assert torch.allclose(mine[1], w.grad, rtol=1e-10, atol=1e-12)


def test_refused_while_capturing_a_kern_graph(mod):
    sim = kt.function(mod.sim, shapes={"out": "x0"})
    with kern.Graph(mod.context) as g:
        with pytest.raises(kern.ArgumentError, match="captures a kern.Graph"):
            sim(f64(3), f64(2), steps=2)
    assert g.launches == 0


def test_vulkan_context_refused():
    if "vulkan" not in kern._library._BACKENDS:
        pytest.skip("this runtime has no Vulkan device")
    try:
        ctx = kern.Context("vulkan")
    except kern.Error as e:
        pytest.skip("no Vulkan device: %s" % e)
    m = kern.compile(SRC, context=ctx)
    with pytest.raises(kern.ArgumentError, match="runs on a vulkan context, and PyTorch"):
        kt.function(m.sim, shapes={"out": "x0"})
