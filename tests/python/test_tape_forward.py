"""The forward tape (kern.Tape(forward=True)) and the forward-mode kernels from Python: a
chain of calls (x1 = a sin(x0); x[0] = x1^2 + b; five steps x[t+1] = x[t] + dt cos(x[t]))
against hand-derived tangents in NumPy and f64 central finite differences; mod["K.jvp"]
with x__tan= keywords; a Hessian-vector product by mod["K.grad.jvp"] against the
hand-derived H v; the forward tape's errors."""

import numpy as np
import pytest

import kern

SRC = """
kernel k1(x0: f64[], x1: f64[], a: f64) {
    for i in 0..len(x0) {
        x1[i] = sin(x0[i]) * a;
    }
}
kernel k2(x1: f64[], b: f64[], x: f64[,]) {
    for i in 0..len(x1) {
        x[0, i] = x1[i] * x1[i] + b[i];
    }
}
kernel step(x: f64[,], t: i32, dt: f64) {
    for i in 0..shape(x, 1) {
        x[t + 1, i] = x[t, i] + dt * cos(x[t, i]);
    }
}
kernel cubic(x: f64[], nograd w: f64[], loss: f64[]) {
    for i in 0..len(x) {
        loss[0] += w[i] * x[i] * x[i] * x[i] / 3.0;
    }
}
kernel amax(x: f32[], g: i32[], hi: f32[], y: f32[]) {
    for i in 0..len(x) {
        y[i] = x[i];
        atomic_max(hi[g[i]], y[i]);  // forward mode recomputes the loop: y is read and written
    }
}
"""

N, T = 10, 5


@pytest.fixture(scope="module")
def mod():
    return kern.compile(SRC)


def _inputs():
    rng = np.random.default_rng(7)
    x0 = rng.uniform(-1.5, 1.5, N)
    b = rng.uniform(-0.5, 0.5, N)
    v0 = rng.uniform(-1, 1, N)
    vb = rng.uniform(-1, 1, N)
    return x0, b, 1.3, 0.15, v0, vb, -0.7, 0.9


def _chain(x0, b, a, dt):
    """The sequence in NumPy: the final state x[T]."""
    x = np.sin(x0) * a
    x = x * x + b
    for _ in range(T):
        x = x + dt * np.cos(x)
    return x


def _chain_tangent(x0, b, a, dt, v0, vb, va, vdt):
    """Its tangent along (v0, vb, va, vdt), derived by hand."""
    x1 = np.sin(x0) * a
    d1 = a * np.cos(x0) * v0 + np.sin(x0) * va
    x = x1 * x1 + b
    d = 2 * x1 * d1 + vb
    for _ in range(T):
        x, d = x + dt * np.cos(x), d + vdt * np.cos(x) - dt * np.sin(x) * d
    return x, d


def test_forward_tape_chain_against_numpy(mod):
    x0, b, a, dt, v0, vb, va, vdt = _inputs()
    x1 = np.zeros(N)
    x = np.zeros((T + 1, N))
    tape = kern.Tape(forward=True)
    tape.set_tangent(x0, v0)
    tape.set_tangent(b, vb)
    tape.set_scalar_tangent("a", va)
    tape.set_scalar_tangent("dt", vdt)
    with tape:
        mod.k1(x0=x0, x1=x1, a=a)
        mod.k2(x1=x1, b=b, x=x)
        for t in range(T):
            mod.step(x=x, t=t, dt=dt)
    assert tape.records == 2 + T
    want_x, want_d = _chain_tangent(x0, b, a, dt, v0, vb, va, vdt)
    np.testing.assert_allclose(x[T], want_x, rtol=1e-13, atol=1e-13)  # the primal, as K's
    np.testing.assert_allclose(tape.tangent(x1), a * np.cos(x0) * v0 + np.sin(x0) * va,
                               rtol=1e-13, atol=1e-13)
    got = tape.tangent(x)[T]
    np.testing.assert_allclose(got, want_d, rtol=1e-12, atol=1e-12)
    h = 1e-6
    fd = (_chain(x0 + h * v0, b + h * vb, a + h * va, dt + h * vdt) -
          _chain(x0 - h * v0, b - h * vb, a - h * va, dt - h * vdt)) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-8)
    np.testing.assert_array_equal(tape.tangent(x0), v0)  # only read: unchanged
    # zero() zeroes every tangent and keeps the records
    tape.zero()
    assert tape.records == 2 + T
    np.testing.assert_array_equal(tape.tangent(x), np.zeros_like(x))
    np.testing.assert_array_equal(tape.tangent(x0), np.zeros_like(x0))
    tape.set_tangent(x0, v0)
    # reset() forgets the tape's own tangents, keeps the set ones
    tape.reset()
    assert tape.records == 0
    with pytest.raises(kern.NotFoundError, match="no tangent"):
        tape.tangent(x)
    np.testing.assert_array_equal(tape.tangent(x0), v0)
    tape.release()


def test_scalar_tangents_apply_per_call(mod):
    """dt's tangent given to one step of five: the tangent of that step alone."""
    x0, b, a, dt, *_ = _inputs()
    x1 = np.zeros(N)
    x = np.zeros((T + 1, N))
    mod.k1(x0=x0, x1=x1, a=a)
    mod.k2(x1=x1, b=b, x=x)
    tape = kern.Tape(forward=True)
    with tape:
        for t in range(T):
            tape.set_scalar_tangent("dt", 1.0 if t == 2 else None)
            mod.step(x=x, t=t, dt=dt)
    d = np.cos(x[2])  # d x[3] / d dt of step 2
    for t in range(3, T):
        d = d - dt * np.sin(x[t]) * d
    np.testing.assert_allclose(tape.tangent(x)[T], d, rtol=1e-12, atol=1e-13)


def test_jvp_kernel_with_tan_keywords(mod):
    x0, _, a, _, v0, _, va, _ = _inputs()
    x1 = np.zeros(N)
    x0_tan, x1_tan, a_tan = v0.copy(), np.full(N, 5.0), np.array([va])
    mod["k1.jvp"](x0, x1, a, x0__tan=x0_tan, x1__tan=x1_tan, a__tan=a_tan)
    np.testing.assert_allclose(x1, np.sin(x0) * a, rtol=1e-14)
    # x1 is overwritten: its tangent replaced, not accumulated
    np.testing.assert_allclose(x1_tan, a * np.cos(x0) * v0 + np.sin(x0) * va, rtol=1e-13,
                               atol=1e-14)
    np.testing.assert_array_equal(x0_tan, v0)
    # Kernel.jvp is the same kernel
    assert mod.k1.jvp is mod["k1.jvp"]
    assert [p.name for p in mod.k1.jvp.params] == ["x0", "x1", "a", "x0.tan", "x1.tan", "a.tan"]


def test_hessian_vector_product_by_grad_jvp(mod):
    """loss = sum w x^3 / 3: gradient w x^2, Hessian diag(2 w x); K.grad.jvp with the seed
    loss.grad = 1 and x.tan = v turns x.grad.tan into H v."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-2, 2, N)
    w = rng.uniform(0.5, 1.5, N)
    v = rng.uniform(-1, 1, N)
    k = mod["cubic.grad.jvp"]
    assert [p.name for p in k.params] == [
        "x", "w", "loss", "x.grad", "loss.grad", "x.tan", "loss.tan", "x.grad.tan",
        "loss.grad.tan"]
    loss = np.zeros(1)
    x_grad = np.zeros(N)
    loss_grad = np.ones(1)
    x_grad_tan = np.zeros(N)
    x_tan = v.copy()
    loss_tan = np.zeros(1)
    loss_grad_tan = np.zeros(1)
    k(x, w, loss, x_grad, loss_grad, x__tan=x_tan, loss__tan=loss_tan,
      x__grad__tan=x_grad_tan, loss__grad__tan=loss_grad_tan)
    np.testing.assert_allclose(x_grad, w * x * x, rtol=1e-13)          # the gradient
    np.testing.assert_allclose(x_grad_tan, 2 * w * x * v, rtol=1e-13)  # H v
    # K.grad leaves the primal arrays alone, and loss (updated by +=) keeps its adjoint
    np.testing.assert_array_equal(loss, [0.0])
    np.testing.assert_array_equal(loss_grad, [1.0])
    np.testing.assert_array_equal(loss_tan, [0.0])
    np.testing.assert_array_equal(loss_grad_tan, [0.0])


def test_forward_tape_errors(mod):
    x0, b, a, *_ = _inputs()
    x1 = np.zeros(N)
    tape = kern.Tape(forward=True)
    with tape:
        mod.k1(x0=x0, x1=x1, a=a)
    with pytest.raises(kern.ArgumentError, match="forward tape .* has no backward pass"):
        tape.backward()
    with pytest.raises(kern.ArgumentError, match=r"Tape.grad: the tape is a forward tape "
                                                  r"\(kern.Tape\(forward=True\)\)"):
        tape.grad(x1)
    with pytest.raises(kern.ArgumentError, match="Tape.record_func: the tape is a forward"):
        tape.record_func(lambda: None, [x1])
    with pytest.raises(kern.ArgumentError, match="tangent of shape"):
        tape.set_tangent(x0, np.zeros(N + 1))
    with pytest.raises(kern.ArgumentError, match="reverse tape has no tangents"):
        kern.Tape().set_tangent(x0, x0)
    # a kernel whose K.jvp is refused: nothing runs, the message names it and why
    xs = np.array([1, 5, 2, 7], np.float32)
    g = np.array([0, 1, 0, 1], np.int32)
    hi = np.full(2, -1, np.float32)
    with pytest.raises(kern.Error, match=r"kernel 'amax' has no forward-mode kernel "
                                         r"'amax.jvp'.*atomic_max"):
        with tape:
            mod.amax(x=xs, g=g, hi=hi, y=np.zeros(4, np.float32))
    np.testing.assert_array_equal(hi, [-1, -1])
    assert tape.records == 1
    tape.release()
