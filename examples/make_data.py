#!/usr/bin/python3
"""make_data.py - writes the inputs of examples/springs.kern and examples/elastic.kern to
examples/data/ (examples/README.md). Deterministic (a fixed seed); needs NumPy:

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


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20)
    springs(out, rng)
    elastic(out, rng)


if __name__ == "__main__":
    main()
