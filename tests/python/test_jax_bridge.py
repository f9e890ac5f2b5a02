"""kern.jax (docs/python.md, "JAX"): kernels as jax.custom_vjp functions. Values and
gradients against jax.grad of the same computation written in jax.numpy, in f64: eagerly
(JAX's arrays used in place through DLPack, no CopyWarning) and under jax.jit (through
jax.pure_callback), on JAX's CPU with a CPU context and on its GPU with a CUDA context.
Needs JAX, which the development machines lack (skipped here, with the reason); run by
`scripts/device-run.sh torch` on the GPU machine."""

import os
import warnings

import numpy as np
import pytest

import kern

jax = pytest.importorskip("jax", reason="JAX is not installed here (the GPU machine has it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
import kern.jax as kj  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bridge.kern")


def jax_sim(x0, w, steps):
    x = x0
    for t in range(steps):
        x = jnp.sin(x) * w[t] + x
    return x


def places():
    out = [("cpu", jax.devices("cpu")[0])]
    gpus = [d for d in jax.devices() if d.platform in ("gpu", "cuda")]
    if gpus:
        try:
            kern.Context("cuda")
            out.append(("cuda", gpus[0]))
        except kern.Error:
            pass
    return out


@pytest.fixture(scope="module", params=places(), ids=lambda p: p[0])
def place(request):
    device, jdev = request.param
    return kern.Context(device), jdev


def data(jdev, n, steps, seed):
    r = np.random.default_rng(seed)
    x0 = jax.device_put(jnp.asarray(r.uniform(-1, 1, n)), jdev)
    w = jax.device_put(jnp.asarray(r.uniform(-0.5, 0.5, steps)), jdev)
    return x0, w


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_grad_against_jax(place, jit):
    ctx, jdev = place
    sim = kj.function(kern.compile(SRC, context=ctx).sim, shapes={"out": "x0"})
    x0, w = data(jdev, 200, 6, 1)
    g = jnp.linspace(-1.0, 1.0, 200)

    def loss(f):
        return lambda x0, w: jnp.sum(jnp.tanh(f(x0 * 0.5, w, 6)) * g)
    mine = jax.grad(loss(lambda a, b, s: sim(a, b, steps=s)), (0, 1))
    ref = jax.grad(loss(jax_sim), (0, 1))
    if jit:
        mine = jax.jit(mine)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)
        got = mine(x0, w)
        out = sim(x0, w, steps=6)
    want = ref(x0, w)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax_sim(x0, w, 6)), rtol=1e-12)


def test_updated_array_gradient(place):
    """y is updated (+=): given, it is the initial value; its gradient is that of the
    initial value; a is a scalar passed by value."""
    ctx, jdev = place
    axpy = kj.function(kern.compile(SRC, context=ctx).axpy)
    x, y = data(jdev, 50, 50, 2)
    y_before = np.asarray(y).copy()

    def loss(f):
        return lambda x, y: jnp.sum(f(0.7, x, y) ** 2)
    got = jax.grad(loss(lambda a, x, y: axpy(a, x, y)), (0, 1))(x, y)
    want = jax.grad(loss(lambda a, x, y: y + a * jnp.sin(x)), (0, 1))(x, y)
    assert np.array_equal(np.asarray(y), y_before)  # the argument is not written
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)


def test_errors():
    sim = kj.function(kern.compile(SRC).sim, shapes={"out": "x0"})
    with pytest.raises(kern.ArgumentError, match="an array of float32, expected float64"):
        sim(jnp.zeros(3, jnp.float32), jnp.zeros(2), steps=2)
    with pytest.raises(kern.ArgumentError, match="missing argument 'w'"):
        sim(jnp.zeros(3), steps=2)


def test_eager_call_uses_jax_memory_in_place(place, monkeypatch):
    """An eager call imports JAX's arrays through DLPack (kern_buffer_from_dlpack) and makes
    its buffers without host data: nothing is copied through the host."""
    ctx, jdev = place
    sim = kj.function(kern.compile(SRC, context=ctx).sim, shapes={"out": "x0"})
    x0, w = data(jdev, 64, 3, 3)
    sim(x0, w, steps=3)  # compiled, warm
    calls = {"dlpack": 0, "host data": 0}
    imp, create = kern._c["from_dlpack"], kern._c["buf_create"]

    def spy_import(*a):
        calls["dlpack"] += 1
        return imp(*a)

    def spy_create(ctx_, code, rank, dims, data, out):
        calls["host data"] += data is not None
        return create(ctx_, code, rank, dims, data, out)
    monkeypatch.setitem(kern._c, "from_dlpack", spy_import)
    monkeypatch.setitem(kern._c, "buf_create", spy_create)
    out = sim(x0, w, steps=3)
    assert calls == {"dlpack": 2, "host data": 0}
    assert _platforms(out) == _platforms(x0)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax_sim(x0, w, 3)), rtol=1e-12)


def _platforms(a):
    return {d.platform for d in a.devices()}
