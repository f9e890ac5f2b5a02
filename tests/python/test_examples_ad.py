"""The custom-adjoint and forward-mode examples (examples/implicit_fit.py,
examples/newton_jvp.py; docs/autodiff.md), checked against NumPy references computed
independently of kern."""
import importlib.util
import os

import numpy as np

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def real_root(a, b):
    r = np.roots([1.0, 0.0, a, -b])
    return r.real[np.argmin(abs(r.imag))]


def test_implicit_custom_adjoint_gradient_and_fit():
    import kern
    ex = load("implicit_fit")
    mod = kern.compile(os.path.join(EXAMPLES, "implicit.kern"))
    n = 16
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 3.0, n).astype(np.float32)
    b = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    t = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    x, loss = np.zeros(n, np.float32), np.zeros(1, np.float32)
    mod["fit"](a, b, t, x, loss)
    xr = np.array([real_root(float(ai), float(bi)) for ai, bi in zip(a, b)])
    np.testing.assert_allclose(x, xr, rtol=1e-5, atol=1e-6)
    ga, gb = np.zeros(n, np.float32), np.zeros(n, np.float32)
    mod["fit.grad"](a, b, t, x, loss, ga, gb, np.zeros(n, np.float32), np.zeros(n, np.float32),
                    np.ones(1, np.float32))
    # dL/da = 2 (x - t) dx/da, dx/da = -x / (3 x^2 + a), dx/db = 1 / (3 x^2 + a), in f64
    gx = 3 * xr ** 2 + a
    np.testing.assert_allclose(ga, 2 * (xr - t) * (-xr / gx), rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(gb, 2 * (xr - t) / gx, rtol=1e-3, atol=1e-5)
    # and the same against central differences of the loss through NumPy's roots
    h = 1e-6
    for i in range(0, n, 5):
        ap, am = a.astype(np.float64), a.astype(np.float64)
        ap = ap.copy(); am = am.copy()
        ap[i] += h; am[i] -= h
        lp = sum((real_root(ap[j], b[j]) - t[j]) ** 2 for j in range(n))
        lm = sum((real_root(am[j], b[j]) - t[j]) ** 2 for j in range(n))
        assert abs(ga[i] - (lp - lm) / (2 * h)) <= 1e-3 * max(1.0, abs(ga[i]))
    a_fit, a_true, losses = ex.main(iters=60, verbose=False)
    assert losses[-1] < 0.05 * losses[0]


def test_newton_by_forward_mode_jacobian():
    import kern
    ex = load("newton_jvp")
    u, c, h, norms = ex.main(n=30, verbose=False)
    assert norms[-1] < 1e-9 and len(norms) <= 12
    # the residual in NumPy at the solution
    up = np.concatenate([[0.0], u, [0.0]])
    r = (up[:-2] - 2 * up[1:-1] + up[2:]) / h ** 2 - u ** 3 + c
    assert np.max(abs(r)) < 1e-8
    # the Jacobian's bands from three JVPs against the hand-derived ones
    mod = kern.compile(os.path.join(EXAMPLES, "newton.kern"))
    v = np.linspace(-1, 1, len(u))
    lower, main, upper = ex.jacobian_bands(mod["residual.jvp"], v, c, h)
    np.testing.assert_allclose(main, -2 / h ** 2 - 3 * v ** 2, rtol=1e-14)
    np.testing.assert_allclose(lower[1:], np.full(len(u) - 1, 1 / h ** 2), rtol=1e-14)
    np.testing.assert_allclose(upper[:-1], np.full(len(u) - 1, 1 / h ** 2), rtol=1e-14)
