"""kern.torch on the CUDA device (docs/python.md, "PyTorch autograd"): gradients against
torch.autograd.gradcheck in f64 on CUDA tensors, CUDA stream ordering (sync=False: the op
on a side stream, its inputs made and its results consumed there, with no host waits),
kern.Graph of CUDA tensors, and the refusal inside torch.cuda.graph. Needs a GPU: on
machines without one every test is reported as skipped with the reason. Run by
`scripts/device-run.sh torch` on the GPU machine."""

import os

import pytest

import kern

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here (torch.cuda.is_available() is False)",
                allow_module_level=True)
try:
    CTX = kern.Context("cuda")
except kern.Error as e:
    pytest.skip("kern has no CUDA device here: %s" % e, allow_module_level=True)
import kern.torch as kt  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bridge.kern")


def torch_sim(x0, w, steps):
    x = x0
    for t in range(steps):
        x = torch.sin(x) * w[t] + x
    return x


def test_gradcheck_on_cuda_tensors():
    sim = kt.function(kern.compile(SRC, context=CTX).sim, shapes={"out": "x0"})
    g = torch.Generator(device="cuda").manual_seed(0)
    x0 = (torch.rand(9, device="cuda", dtype=torch.float64, generator=g) * 2 - 1) \
        .requires_grad_()
    w = (torch.rand(4, device="cuda", dtype=torch.float64, generator=g) - 0.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: sim(a, b, steps=4), (x0, w), eps=1e-6,
                                    atol=1e-7, rtol=1e-6)
    out = sim(x0, w, 4)
    assert out.is_cuda
    assert torch.allclose(out, torch_sim(x0, w, 4), rtol=1e-12, atol=1e-12)


def test_stream_order_on_a_side_stream():
    """Context(sync=False): forward and backward run on kern's stream, ordered after the
    side stream's work that made their inputs and before the side stream's work that reads
    their results; the host never waits until the end. A large first input makes a missing
    wait show: its producer is still running when the op is queued."""
    ctx = kern.Context("cuda", sync=False)
    sim = kt.function(kern.compile(SRC, context=ctx).sim32, shapes={"out": "x0"})
    side = torch.cuda.Stream()
    n, steps = 1 << 20, 32
    with torch.cuda.stream(side):
        base = torch.linspace(-1, 1, n, device="cuda")
        x0 = base.clone().requires_grad_()
        w = torch.full((steps,), 0.3, device="cuda", requires_grad=True)
        h = x0
        for _ in range(20):  # slow producers on the side stream
            h = torch.sin(h) * 0.5 + h * 0.5
        out = sim(h, w, steps=steps)
        out2 = sim(out * 0.5, w, steps=steps)  # consumes out on the side stream
        loss = (out2 * out2).sum()
        loss.backward()
        gx, gw = x0.grad.double().clone(), w.grad.double().clone()  # read on the side stream
    torch.cuda.synchronize()
    xr = base.double().requires_grad_()
    wr = torch.full((steps,), 0.3, device="cuda", dtype=torch.float64, requires_grad=True)
    hr = xr
    for _ in range(20):
        hr = torch.sin(hr) * 0.5 + hr * 0.5
    r2 = torch_sim(torch_sim(hr, wr, steps) * 0.5, wr, steps)
    (r2 * r2).sum().backward()
    assert torch.max(torch.abs(out2.double() - r2)).item() < 1e-4
    assert torch.max(torch.abs(gx - xr.grad)).item() < 1e-3 * torch.max(torch.abs(xr.grad))
    # w.grad sums a million f32 terms per step (atomics in any order)
    assert torch.max(torch.abs(gw - wr.grad)).item() < 5e-3 * torch.max(torch.abs(wr.grad))


def test_kern_graph_of_cuda_tensors():
    mod = kern.compile(SRC, context=CTX)
    x0 = torch.linspace(-1, 1, 4096, device="cuda")
    w = torch.full((16,), 0.25, device="cuda")
    out = torch.zeros_like(x0)
    with kern.Graph(CTX) as g:
        mod.sim32(x0=x0, w=w, out=out, steps=16)
        mod.sim32(x0=out, w=w, out=x0, steps=16)  # x0 <- sim(sim(x0))
    assert g.launches == 2
    for _ in range(3):
        g.launch()
    ref = torch.linspace(-1, 1, 4096, device="cuda", dtype=torch.float64)
    for _ in range(6):
        ref = torch_sim(ref, w.double(), 16)
    assert torch.max(torch.abs(x0.double() - ref)).item() < 1e-3


def test_refused_inside_torch_cuda_graph():
    sim = kt.function(kern.compile(SRC, context=CTX).sim32, shapes={"out": "x0"})
    x0 = torch.linspace(-1, 1, 64, device="cuda")
    w = torch.full((4,), 0.25, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        graph = torch.cuda.CUDAGraph()
        with pytest.raises(kern.UnsupportedError, match="captures a CUDA graph.*kern.Graph"):
            with torch.cuda.graph(graph, stream=s):
                sim(x0, w, steps=4)
    torch.cuda.synchronize()
