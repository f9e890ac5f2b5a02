"""kern.Graph (docs/python.md, "Graphs"): calls captured inside `with kern.Graph(ctx)` and
replayed by launch(), against the same calls made directly and against NumPy; what the
graph keeps alive; the refusals. On the CPU, and on Vulkan where the runtime has it
(lavapipe in CI, with KERN_VULKAN_VALIDATION=fatal)."""

import gc

import numpy as np
import pytest

import kern

SRC = """
kernel step(x: f32[], v: f32[], dt: f32) {
    for i in 0..len(x) {
        v[i] += -dt * sin(x[i]);
        x[i] += dt * v[i];
    }
}

kernel sq(x: f32[], y: f32[], a: f32) {
    for i in 0..len(x) {
        y[i] = a * x[i] * x[i];
    }
}
"""

DEVICES = ["cpu"] + (["vulkan"] if "vulkan" in kern._library._BACKENDS else [])


def numpy_step(x, v, dt):
    v = v - dt * np.sin(x)
    return x + dt * v, v


@pytest.fixture(scope="module", params=DEVICES)
def ctx(request):
    try:
        return kern.Context(request.param)
    except kern.Error as e:
        pytest.skip("no %s device: %s" % (request.param, e))


def start():
    x = np.linspace(-2, 2, 257).astype(np.float32)
    return x, np.zeros_like(x)


def test_replays_match_direct_calls_and_numpy(ctx):
    mod = kern.compile(SRC, context=ctx)
    x0, v0 = start()
    # the direct calls
    xd, vd = kern.Buffer.from_array(x0, context=ctx), kern.Buffer.from_array(v0, context=ctx)
    for _ in range(5):
        mod.step(x=xd, v=vd, dt=0.05)
        mod.step(x=xd, v=vd, dt=0.02)
    # the same calls, captured once and replayed five times
    xg, vg = kern.Buffer.from_array(x0, context=ctx), kern.Buffer.from_array(v0, context=ctx)
    with kern.Graph(ctx) as g:
        mod.step(x=xg, v=vg, dt=0.05)
        mod.step(x=xg, v=vg, dt=0.02)
    assert g.launches == 2
    assert np.array_equal(xg.read(), x0)  # capturing runs nothing
    for _ in range(5):
        g.launch()
    assert np.array_equal(xg.read(), xd.read()) and np.array_equal(vg.read(), vd.read())
    xr, vr = x0.astype(np.float64), v0.astype(np.float64)
    for _ in range(5):
        xr, vr = numpy_step(xr, vr, 0.05)
        xr, vr = numpy_step(xr, vr, 0.02)
    assert np.max(np.abs(xg.read() - xr)) < 1e-4
    g.release()
    with pytest.raises(kern.ArgumentError, match="Graph.launch: the graph was released"):
        g.launch()


def test_forward_and_gradient_step_replayed(ctx):
    """One training step, y = a x^2 and its gradient sq.grad, captured and replayed: the
    adjoints accumulate replay after replay, as the same calls made directly."""
    mod = kern.compile(SRC, context=ctx)
    x = np.linspace(-1, 1, 33).astype(np.float32)
    bufs = {k: kern.Buffer.from_array(v, context=ctx) for k, v in
            dict(x=x, y=np.zeros_like(x), gx=np.zeros_like(x), gy=np.ones_like(x),
                 ga=np.zeros(1, np.float32)).items()}
    b = bufs
    with kern.Graph(ctx) as g:
        mod.sq(x=b["x"], y=b["y"], a=1.5)
        mod["sq.grad"](b["x"], b["y"], 1.5, b["gx"], b["gy"], b["ga"])
    for _ in range(3):
        b["gy"].write(np.ones_like(x))  # sq.grad zeroes y.grad (y is overwritten)
        g.launch()
    assert np.allclose(b["y"].read(), 1.5 * x * x, rtol=1e-6)
    assert np.allclose(b["gx"].read(), 3 * (2 * 1.5 * x), rtol=1e-5, atol=1e-6)
    assert np.allclose(b["ga"].read(), [3 * np.sum(x * x)], rtol=1e-5)


def test_numpy_arrays_in_place_kept_alive():
    """On the CPU, NumPy arrays are used in place by replays; the graph keeps them (and the
    module) alive after the caller drops them."""
    ctx = kern.Context("cpu")
    mod = kern.compile(SRC, context=ctx)
    x0, v0 = start()
    x, v = x0.copy(), v0.copy()
    with kern.Graph(ctx) as g:
        mod.sq(x=x.copy(), y=v, a=2.0)  # a temporary, dropped at once
        mod.step(x=x, v=v, dt=0.1)
    del mod
    gc.collect()
    g.launch()
    vr = 2.0 * x0 * x0 - 0.1 * np.sin(x0)
    assert np.allclose(v, vr, rtol=1e-5, atol=1e-6)
    assert np.allclose(x, x0 + 0.1 * vr, rtol=1e-5, atol=1e-6)


def test_refusals():
    ctx = kern.Context("cpu")
    mod = kern.compile(SRC, context=ctx)
    x, v = start()
    g = kern.Graph(ctx)
    with pytest.raises(kern.ArgumentError, match="not captured yet"):
        g.launch()
    with g:
        with pytest.raises(kern.ArgumentError, match="already capturing"):
            with kern.Graph(ctx):
                pass
        with pytest.warns(kern.CopyWarning):
            with pytest.raises(kern.ArgumentError, match="must use its arrays in place"):
                mod.step(x=x.astype(np.float64), v=v, dt=0.1)  # a copy
        with pytest.raises(kern.ArgumentError, match="cannot be captured into a kern.Graph"):
            with kern.Tape(ctx):
                mod.step(x=x, v=v, dt=0.1)
        tape = kern.Tape(ctx)
        with pytest.raises(kern.ArgumentError, match="Tape.backward: the context is capturing"):
            tape.backward()
        with pytest.raises(kern.ArgumentError, match="still capturing"):
            g.launch()
    assert g.launches == 0
    with pytest.raises(kern.ArgumentError, match="captures once"):
        with g:
            pass
    # an exception inside the with block: no graph, the context free to capture again
    with pytest.raises(ZeroDivisionError):
        with kern.Graph(ctx) as bad:
            mod.step(x=x, v=v, dt=0.1)
            1 / 0
    with pytest.raises(kern.ArgumentError, match="its capture raised ZeroDivisionError"):
        bad.launch()
    with kern.Graph(ctx) as ok:
        mod.step(x=x, v=v, dt=0.1)
    ctx.release()
    with pytest.raises(kern.ArgumentError, match="the graph's context was released"):
        ok.launch()
