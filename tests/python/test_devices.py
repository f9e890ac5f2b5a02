"""Several devices from Python (docs/python.md, "Several GPUs"): device strings "NAME:N",
their errors, contexts of two devices used from two threads at once, and Buffer.copy_from
and Buffer.to between contexts, each against NumPy. Here the devices are the CPU and
Vulkan device 0 (lavapipe in CI); tests/python/test_multigpu.py has the two-GPU half."""

import numpy as np
import pytest

import kern

# NumPy arrays on the Vulkan device are copies (said by a CopyWarning): expected here
pytestmark = pytest.mark.filterwarnings("ignore::kern.CopyWarning")

SRC = """
kernel roll(x: f32[], w: f32[], out: f32[], steps: i32) {
    for i in 0..len(x) {
        var v = x[i];
        for t in 0..steps {
            v = v * w[t] + 0.25 * cos(v);
        }
        out[i] = v;
    }
}
"""


def roll_ref(x, w):
    """roll's out and, for dL/d(out) = 1, dL/dx and dL/dw, in float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    vs = [x]
    for t in range(len(w)):
        vs.append(vs[-1] * w[t] + 0.25 * np.cos(vs[-1]))
    g, dw = np.ones_like(x), np.zeros(len(w))
    for t in reversed(range(len(w))):
        dw[t] = np.sum(g * vs[t])
        g = g * (w[t] - 0.25 * np.sin(vs[t]))
    return vs[-1], g, dw


@pytest.fixture(scope="module")
def vulkan0():
    try:
        return kern.Context("vulkan:0")
    except kern.UnsupportedError as e:
        pytest.skip("no Vulkan device here: %s" % e)


def test_vulkan_device_zero(vulkan0):
    assert vulkan0.device == "vulkan" and vulkan0.index == 0
    assert repr(vulkan0) == "kern.Context('vulkan:0')"
    assert repr(kern.Buffer.zeros(3, context=vulkan0)) == "kern.Buffer(f32[3], vulkan:0)"
    assert vulkan0.device_name.startswith("vulkan: ")
    assert kern.context("vulkan:0") is kern.context("vulkan:0")
    assert kern.Context("cpu").index == 0 and kern.Context("cpu:0").index == 0


@pytest.mark.parametrize("device, error, message", [
    ("cuda:-1", kern.ArgumentError, r"device 'cuda:-1': the device number must be 0 or more"),
    ("cuda:x", kern.ArgumentError, r"device 'cuda:x': 'x' is not a device number"),
    ("vulkan:", kern.ArgumentError, r"device 'vulkan:': '' is not a device number"),
    ("cuda:01", kern.ArgumentError, r"'01' is not a device number"),
    ("cuda:1:2", kern.ArgumentError, r"'1:2' is not a device number"),
    ("tpu:0", kern.ArgumentError, r"unknown device 'tpu:0' \(cpu, cuda, vulkan\); NAME:N"),
    ("cpu:1", kern.ArgumentError,
     r"kern.Context\('cpu:1'\): there is no cpu device 1: the cpu backend has one device \(0\)"),
    (3, kern.ArgumentError, r"a device is a string such as 'cpu', 'cuda', 'cuda:1'"),
])
def test_device_string_errors(device, error, message):
    with pytest.raises(error, match=message):
        kern.Context(device)


def test_device_number_beyond_the_count(vulkan0):
    with pytest.raises(kern.ArgumentError,
                       match=r"kern.Context\('vulkan:99'\): cannot create the vulkan device: "
                             r"there is no device 99: the loader sees \d+ \(0 to \d+\)"):
        kern.Context("vulkan:99")


def run_roll(ctx, seed, rounds):
    """roll and roll.grad `rounds` times on ctx, on random data: [(x, w, out, gx, gw)]."""
    results = []
    mod = kern.compile(SRC, context=ctx)
    rng = np.random.default_rng(seed)
    for r in range(rounds):
        x = rng.uniform(-1, 1, 500).astype(np.float32)
        w = rng.uniform(0.5, 0.9, 6).astype(np.float32)
        out = np.zeros_like(x)
        gx, gw = np.zeros_like(x), np.zeros_like(w)
        mod.roll(x=x, w=w, out=out, steps=6)
        mod["roll.grad"](x=x, w=w, out=out, steps=6, x__grad=gx, w__grad=gw,
                         out__grad=np.ones_like(x))
        results.append((x, w, out, gx, gw))
    return results


def check_roll(results, rounds):
    assert len(results) == rounds
    for x, w, out, gx, gw in results:
        want, wgx, wgw = roll_ref(x, w)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gx, wgx, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gw, wgw, rtol=1e-3)


@pytest.mark.parametrize("second", ["cpu", "vulkan:0"])
def test_two_contexts_on_two_threads_at_once(second, vulkan0, in_threads):
    contexts = [kern.Context("cpu", threads=1),
                vulkan0 if second == "vulkan:0" else kern.Context("cpu", threads=1)]
    for r in in_threads(lambda i: run_roll(contexts[i], i, 4), 2):
        check_roll(r, 4)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_copies_between_cpu_and_vulkan(vulkan0, dtype):
    cpu = kern.Context("cpu")
    a = (np.arange(3000).reshape(30, 100) * 3 - 7).astype(dtype)
    src = kern.Buffer.from_array(a, context=cpu)
    on_vk = src.to(vulkan0)
    assert on_vk.context is vulkan0 and on_vk.shape == (30, 100)
    np.testing.assert_array_equal(on_vk.numpy(), a)
    back = kern.Buffer.zeros((30, 100), dtype, context=cpu)
    back.copy_from(on_vk)
    np.testing.assert_array_equal(back.numpy(), a)
    other = on_vk.to(kern.Context("vulkan:0"))  # another context of the same device
    np.testing.assert_array_equal(other.read(), a)
    np.testing.assert_array_equal(src.to("cpu").numpy(), a)  # a device string: its default context


def test_copy_after_a_launch_on_the_other_device(vulkan0):
    mod = kern.compile(SRC, context=vulkan0)
    x = np.linspace(-1, 1, 257).astype(np.float32)
    w = np.full(6, 0.8, np.float32)
    out = kern.Buffer.zeros(257, context=vulkan0)
    mod.roll(x=x, w=w, out=out, steps=6)
    host = out.to(kern.Context("cpu"))
    np.testing.assert_allclose(host.numpy(), roll_ref(x, w)[0], rtol=1e-4, atol=1e-5)


def test_copy_refusals(vulkan0):
    cpu = kern.Context("cpu")
    b = kern.Buffer.zeros(4, context=cpu)
    with pytest.raises(kern.ArgumentError,
                       match=r"Buffer.copy_from: the source is f32\[5\], the destination f32\[4\]"):
        b.copy_from(kern.Buffer.zeros(5, context=vulkan0))
    with pytest.raises(kern.ArgumentError, match=r"the source must be a kern.Buffer, not ndarray"):
        b.copy_from(np.zeros(4, np.float32))
    with pytest.raises(kern.ArgumentError, match=r"Buffer.to: expected a kern.Context"):
        b.to(0)
    gone = kern.Buffer.zeros(4, context=vulkan0)
    gone.release()
    with pytest.raises(kern.ArgumentError, match=r"Buffer.copy_from: the buffer was released"):
        b.copy_from(gone)
