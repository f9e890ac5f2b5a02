"""The adstack memory budget from Python (docs/autodiff.md, "Memory budget and
checkpointing"): Context(ad_memory_budget=..., ad_strategy=...) and adstack_info(); the
checkpointed gradient under a small budget against an f64 NumPy reference; a budget nothing
fits and a bad strategy as errors."""

import numpy as np
import pytest

import kern

SRC = """
kernel walk(x0: f32[], w: f32[], out: f32[]) {
    for i in 0..len(x0) {
        var x = x0[i];
        for t in 0..len(w) {
            x = 0.5 * sin(x) * w[t] + 0.4 * x;
        }
        out[i] = x;
    }
}
"""

T = 300


def reference(x0, w, g):
    """d sum(g out) / d (x0, w) in f64, storing every state."""
    x0, w, g = (np.asarray(a, np.float64) for a in (x0, w, g))
    xs = np.empty((T, len(x0)))
    x = x0.copy()
    for t in range(T):
        xs[t] = x
        x = 0.5 * np.sin(x) * w[t] + 0.4 * x
    a, gw = g.copy(), np.zeros(T)
    for t in reversed(range(T)):
        gw[t] = np.sum(a * 0.5 * np.sin(xs[t]))
        a = a * (0.5 * np.cos(xs[t]) * w[t] + 0.4)
    return a, gw


def run(ctx):
    mod = kern.compile(SRC, context=ctx)
    x0 = np.linspace(-1.5, 1.5, 64).astype(np.float32)
    w = (0.8 + 0.4 * np.cos(np.arange(T))).astype(np.float32)
    out = np.zeros_like(x0)
    g = (1.0 + np.arange(64) % 3).astype(np.float32)
    gx0, gw = np.zeros_like(x0), np.zeros_like(w)
    mod["walk.grad"](x0=x0, w=w, out=out, x0__grad=gx0, w__grad=gw, out__grad=g.copy())
    return x0, w, g, gx0, gw


@pytest.mark.parametrize("budget, strategy, want", [
    (0, None, "store"), (1 << 11, None, "recompute"), (0, "slots", "slots"),
    (0, "recompute", "recompute")])
def test_strategies_against_numpy(budget, strategy, want):
    # debug: scalar code, a thread is one slot (SIMD code keeps a slot per lane, and the
    # 2 KiB budget holds one thread's checkpoints only without lanes)
    ctx = kern.Context(threads=2, ad_memory_budget=budget, ad_strategy=strategy, debug=True)
    x0, w, g, gx0, gw = run(ctx)
    info = ctx.adstack_info()
    assert info["strategy"] == want
    assert info["needed_bytes"] <= info["store_all_bytes"]
    if budget:
        assert info["budget"] == budget and info["needed_bytes"] <= budget
    rx0, rw = reference(x0, w, g)
    np.testing.assert_allclose(gx0, rx0, rtol=1e-4, atol=1e-6 * np.abs(rx0).max())
    np.testing.assert_allclose(gw, rw, rtol=1e-4, atol=1e-6 * np.abs(rw).max())
    ctx.release()


def test_nothing_fits_is_an_error():
    ctx = kern.Context(threads=2, ad_memory_budget=16)
    with pytest.raises(kern.Error, match="memory budget is 16 bytes"):
        run(ctx)
    assert ctx.adstack_info()["heap_bytes"] == 0
    ctx.release()


def test_bad_options():
    with pytest.raises(kern.ArgumentError, match="unknown ad_strategy 'often'"):
        kern.Context(ad_strategy="often")
    with pytest.raises(kern.ArgumentError, match="budget -1 is negative"):
        kern.Context(ad_memory_budget=-1)
