"""Fits the coefficients a_i of x^3 + a_i x = b_i so that the roots x_i reach a target, by
gradient descent through examples/implicit.kern, whose Newton solve has a custom adjoint
(the implicit-function derivative). Prints the loss every 20 iterations.

    /usr/bin/python3 examples/implicit_fit.py   # the package setup.sh installed
    PYTHONPATH=build/python /usr/bin/python3 examples/implicit_fit.py   # the build tree's
"""
import os
import sys

import numpy as np

import kern


def main(iters=200, lr=0.5, n=64, verbose=True):
    here = os.path.dirname(os.path.abspath(__file__))
    mod = kern.compile(os.path.join(here, "implicit.kern"))
    fit, fit_grad = mod["fit"], mod["fit.grad"]
    rng = np.random.default_rng(7)
    b = rng.uniform(0.5, 2.0, n).astype(np.float32)
    a_true = rng.uniform(0.5, 3.0, n).astype(np.float32)
    # the roots for a_true, by NumPy's polynomial roots (the real one)
    target = np.array([np.roots([1, 0, at, -bt]).real[np.argmin(abs(np.roots([1, 0, at, -bt]).imag))]
                       for at, bt in zip(a_true, b)], dtype=np.float32)
    a = np.full(n, 1.0, np.float32)
    x = np.zeros(n, np.float32)
    losses = []
    for it in range(iters):
        loss = np.zeros(1, np.float32)
        fit(a, b, target, x, loss)
        losses.append(float(loss[0]))
        a_grad = np.zeros(n, np.float32)
        fit_grad(a, b, target, x, loss, a_grad, np.zeros(n, np.float32),
                 np.zeros(n, np.float32), np.zeros(n, np.float32), np.ones(1, np.float32))
        a -= lr * a_grad
        np.maximum(a, 0.05, out=a)  # keep one real root
        if verbose and it % 20 == 0:
            print("iteration %3d  loss %.6g" % (it, losses[-1]))
    return a, a_true, losses


if __name__ == "__main__":
    a, a_true, losses = main()
    print("final loss %.3g, max |a - a_true| %.3g" % (losses[-1], float(np.max(abs(a - a_true)))))
    sys.exit(0 if losses[-1] < 1e-3 * losses[0] else 1)
