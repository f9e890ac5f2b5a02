"""Newton's method for r(u) = 0 (examples/newton.kern) with the Jacobian from forward mode:
three launches of residual.jvp, with tangents 1 on the items i = k mod 3 (k = 0, 1, 2),
give every entry of the tridiagonal Jacobian (a coloring: neighbours never share a color).
Each step then solves the tridiagonal system J du = -r (Thomas' algorithm) in NumPy.

    /usr/bin/python3 examples/newton_jvp.py   # the package setup.sh installed
    PYTHONPATH=build/python /usr/bin/python3 examples/newton_jvp.py   # the build tree's
"""
import os
import sys

import numpy as np

import kern


def jacobian_bands(jvp, u, c, h):
    """The diagonals (lower, main, upper) of dr/du from three JVPs."""
    n = len(u)
    lower, main, upper = np.zeros(n), np.zeros(n), np.zeros(n)
    r = np.zeros(n)
    for k in range(3):
        v = np.zeros(n)
        v[k::3] = 1.0
        r_tan = np.zeros(n)
        jvp(u, c, r, h, u__tan=v, c__tan=np.zeros(n), r__tan=r_tan, h__tan=np.zeros(1))
        for i in range(n):  # column j of row i is in color j mod 3
            j = i - 1 + ((k - (i - 1)) % 3)
            if j == i:
                main[i] = r_tan[i]
            elif j == i - 1:
                lower[i] = r_tan[i]
            elif j == i + 1 and j < n:
                upper[i] = r_tan[i]
    return lower, main, upper


def thomas(lower, main, upper, rhs):
    n = len(rhs)
    cp, dp = np.zeros(n), np.zeros(n)
    cp[0], dp[0] = upper[0] / main[0], rhs[0] / main[0]
    for i in range(1, n):
        m = main[i] - lower[i] * cp[i - 1]
        cp[i] = upper[i] / m
        dp[i] = (rhs[i] - lower[i] * dp[i - 1]) / m
    x = np.zeros(n)
    x[-1] = dp[-1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return x


def main(n=50, verbose=True):
    here = os.path.dirname(os.path.abspath(__file__))
    mod = kern.compile(os.path.join(here, "newton.kern"))
    residual, jvp = mod["residual"], mod["residual.jvp"]
    h = 1.0 / (n + 1)
    c = 50.0 * np.sin(np.pi * h * np.arange(1, n + 1))
    u = np.zeros(n)
    norms = []
    for it in range(20):
        r = np.zeros(n)
        residual(u, c, r, h)
        norms.append(float(np.max(abs(r))))
        if verbose:
            print("Newton step %2d  max |r| = %.3e" % (it, norms[-1]))
        if norms[-1] < 1e-9:
            break
        lower, main_, upper = jacobian_bands(jvp, u, c, h)
        u = u + thomas(lower, main_, upper, -r)
    return u, c, h, norms


if __name__ == "__main__":
    u, c, h, norms = main()
    sys.exit(0 if norms[-1] < 1e-9 else 1)
