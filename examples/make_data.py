#!/usr/bin/python3
"""make_data.py - writes the inputs of every example that reads files to examples/data/
(examples/README.md): the main job of the top README (simulate.kern, also saxpy.kern's),
heat.kern, particles.kern, stencil2d.kern, bounce.kern, bounce2d.kern, springs.kern and
elastic.kern. Deterministic (fixed seeds; tests/python/test_examples.py checks that the
shipped files are what it writes); needs NumPy:

    /usr/bin/python3 examples/make_data.py [OUTDIR]        (default: examples/data)
"""
import os
import sys

import numpy as np


def springs(out, rng, systems=16):
    # P = 8 particles on the corners of a unit cube (springs.kern's const P), springs between
    # every pair: the 12 edges, 12 face diagonals and 4 body diagonals keep the cube rigid.
    cube = np.array([[i & 1, (i >> 1) & 1, (i >> 2) & 1] for i in range(8)], np.float32)
    pairs = np.array([(i, j) for i in range(8) for j in range(i + 1, 8)], np.int32)
    rest = np.linalg.norm(cube[pairs[:, 1]] - cube[pairs[:, 0]], axis=1).astype(np.float32)
    # each system: the cube, shifted, squashed or stretched a little, thrown with a velocity
    shift = rng.uniform(-1, 1, (systems, 1, 3)) + np.array([0, 2, 0])
    scale = rng.uniform(0.85, 1.15, (systems, 1, 3))
    x0 = (cube[None] - 0.5) * scale + shift + 0.02 * rng.standard_normal((systems, 8, 3))
    v0 = rng.uniform(-1, 1, (systems, 1, 3)) + 0.1 * rng.standard_normal((systems, 8, 3))
    arrays = {
        "x0": x0.astype(np.float32),            # (B, P, 3): vec3[,]
        "v0": v0.astype(np.float32),
        "pairs": pairs,                         # (S, 2) int32: ivec2[]
        "rest": rest,                           # (S,)
        "target": np.array([0.0, 1.5, 0.0], np.float32),  # vec3, by value
        "xT": np.zeros((systems, 8, 3), np.float32),
        "loss": np.zeros(1, np.float32),
    }
    for name, a in arrays.items():
        np.save(os.path.join(out, "springs_%s.npy" % name), a)


def elastic(out, rng, n=3, h=0.5):
    # an n x n x n grid of vertices, each cube of the grid split into 6 tetrahedra around its
    # diagonal from corner 0 to corner 7 (the Kuhn split), then stretched, sheared and jiggled
    idx = lambda i, j, k: (i * n + j) * n + k
    rest = np.array([[i, j, k] for i in range(n) for j in range(n) for k in range(n)], np.float64) * h
    tets = []
    for i in range(n - 1):
        for j in range(n - 1):
            for k in range(n - 1):
                c = [idx(i + a, j + b, k + d) for a in (0, 1) for b in (0, 1) for d in (0, 1)]
                for p, q in [(1, 3), (1, 5), (2, 3), (2, 6), (4, 5), (4, 6)]:
                    tets.append([c[0], c[p], c[q], c[7]])
    f = np.array([[1.10, 0.05, 0.00], [0.00, 0.95, 0.03], [0.02, 0.00, 1.00]])
    x = rest @ f.T + 0.01 * rng.standard_normal(rest.shape)
    np.save(os.path.join(out, "elastic_rest.npy"), rest.astype(np.float32))   # (V, 3): vec3[]
    np.save(os.path.join(out, "elastic_x.npy"), x.astype(np.float32))
    np.save(os.path.join(out, "elastic_tets.npy"), np.array(tets, np.int32))  # (E, 4): ivec4[]
    np.save(os.path.join(out, "elastic_e.npy"), np.zeros(1, np.float32))


def save(out, arrays):
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)


def main_job(out, n=8, steps=16):
    # simulate.kern's x0, w, out and the adjoints of simulate.grad (dL/d(out) = 1); saxpy.kern
    # takes x0 and out as x and y
    save(out, {
        "x0": np.linspace(-1, 1, n, dtype=np.float32),
        "w": (0.5 * np.cos(np.arange(steps))).astype(np.float32),
        "out": np.zeros(n, np.float32),
        "x0_grad": np.zeros(n, np.float32),
        "w_grad": np.zeros(steps, np.float32),
        "out_grad": np.ones(n, np.float32),
    })


def heat(out, rng, n=32, steps=8):
    # u: row 0 a warm bump on a cold rod, rows 1..steps computed by launches t = 1..steps;
    # k: the conductivity along the rod (ALPHA k <= 0.25 keeps the explicit scheme stable)
    u = np.zeros((steps + 1, n), np.float32)
    u[0] = np.exp(-((np.arange(n) - n / 3) / 3.0) ** 2)
    save(out, {"heat_u": u, "heat_k": rng.uniform(0.5, 1.0, n).astype(np.float32)})


def particles(out, rng, count=16, steps=8):
    # x, v: (steps + 1, count, 3), row 0 the start, rows t = 1..steps from launches
    x = np.zeros((steps + 1, count, 3), np.float32)
    v = np.zeros((steps + 1, count, 3), np.float32)
    x[0] = rng.uniform(-1, 1, (count, 3))
    v[0] = rng.uniform(-0.5, 0.5, (count, 3))
    save(out, {"particles_x": x, "particles_v": v})


def stencil2d(out, n=16, m=24):
    # a plate with its top edge held at 1 and the others at 0; the inside starts at 0
    g = np.zeros((n, m), np.float32)
    g[0, :] = 1.0
    save(out, {"stencil_grid": g})


def bounce(out, rng, balls=8):
    # heights and vertical speeds; y1, v1 and hits are written by the kernel
    save(out, {
        "bounce_y0": rng.uniform(0.5, 3.0, balls).astype(np.float32),
        "bounce_v0": rng.uniform(-2.0, 2.0, balls).astype(np.float32),
        "bounce_y1": np.zeros(balls, np.float32),
        "bounce_v1": np.zeros(balls, np.float32),
        "bounce_hits": np.zeros(balls, np.int32),
    })


def bounce2d(out, steps=100):
    # four balls thrown from x = 0.3 at four heights, all at (1, 0) m/s: a first guess that
    # python/examples/bounce_opt.py improves until each path goes through its target
    start = np.array([[0.3, 0.5], [0.3, 1.0], [0.3, 1.5], [0.3, 2.0]], np.float32)
    x = np.zeros((steps + 1, len(start), 2), np.float32)
    v = np.zeros_like(x)
    x[0] = start
    v[0] = [1.0, 0.0]
    save(out, {
        "bounce2d_x": x,
        "bounce2d_v": v,
        "bounce2d_target": np.array([[3.2, 0.6], [1.5, 1.2], [2.2, 0.3], [0.8, 1.6]], np.float32),
        "bounce2d_loss": np.zeros(1, np.float32),
    })


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20)
    springs(out, rng)
    elastic(out, rng)
    main_job(out)
    rng = np.random.default_rng(21)     # a generator of their own: springs' and elastic's files stay as they were
    heat(out, rng)
    particles(out, rng)
    stencil2d(out)
    bounce(out, rng)
    bounce2d(out)


if __name__ == "__main__":
    main()
