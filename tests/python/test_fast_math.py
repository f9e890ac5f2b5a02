"""Math accuracy from Python (docs/reference.md, "Accuracy of the math builtins"):
Context(fast_math=...) and $KERN_FAST_MATH. By default every device meets kern's table
(checked here in f32 against NumPy's f64 functions on the CPU and, where a Vulkan device
exists, on Vulkan with kern's own library); fast_math=True takes the driver's
approximations on the GPUs and is checked against gross errors only."""

import numpy as np
import pytest

import kern

# NumPy arrays go to Vulkan by copies (said by a warning that is not this test's subject)
pytestmark = pytest.mark.filterwarnings("ignore:.*copied, not used in place")

SRC = """
kernel m(x: f32[], out: f32[,]) {
    for i in 0..len(x) {
        out[0, i] = sin(x[i]); out[1, i] = exp(x[i]); out[2, i] = log(abs(x[i]) + 0.5);
        out[3, i] = pow(abs(x[i]) + 0.5, 1.7); out[4, i] = atan2(x[i], 0.75);
    }
}
"""


def refs(x):
    # the arguments as the kernel computes them, in f32: the table bounds the functions'
    # error, not the rounding of abs(x) + 0.5 before them
    a = (np.abs(x) + np.float32(0.5)).astype(np.float32).astype(np.float64)
    x = x.astype(np.float64)
    return np.stack([np.sin(x), np.exp(x), np.log(a), np.power(a, np.float64(np.float32(1.7))),
                     np.arctan2(x, 0.75)])


def ulps(got, want):
    """|got - want| in units of the f32 spacing at want (at least the spacing at 1/2 for
    results below 1: ulps near a zero of sin mean little)."""
    w = want.astype(np.float32)
    spacing = np.spacing(np.maximum(np.abs(w), np.float32(0.5)))
    return np.abs(got.astype(np.float64) - want) / spacing


def run(ctx):
    x = np.linspace(-12.0, 12.0, 4001).astype(np.float32)
    out = np.zeros((5, len(x)), np.float32)
    kern.compile(SRC, context=ctx)["m"](x=x, out=out)
    return out, refs(x)


def contexts():
    yield "cpu"
    try:
        kern.Context("vulkan").release()
        yield "vulkan"
    except kern.Error:
        pass


@pytest.mark.parametrize("device", list(contexts()))
def test_default_meets_the_table(device):
    ctx = kern.Context(device, fast_math=False)
    got, want = run(ctx)
    bounds = [2, 3, 2, 4, 3]  # sin, exp, log, pow, atan2 (f32 column of the table)
    for f, bound in enumerate(bounds):
        worst = ulps(got[f], want[f]).max()
        assert worst <= bound, (device, f, worst)
    ctx.release()


@pytest.mark.parametrize("device", list(contexts()))
def test_fast_math_runs_close(device):
    ctx = kern.Context(device, fast_math=True)
    got, want = run(ctx)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-3)
    ctx.release()


def test_fast_math_from_the_environment(monkeypatch):
    monkeypatch.setenv("KERN_FAST_MATH", "1")  # read; the CPU keeps glibc
    ctx = kern.Context("cpu")
    got, want = run(ctx)
    assert ulps(got[0], want[0]).max() <= 2
    ctx.release()
