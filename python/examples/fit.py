"""fit.py - a small optimisation loop: fit the weights w of a per-thread loop
(examples/simulate.kern) so that its output matches a target, by plain gradient descent on
L = mean((out - target)^2), with kern computing out and dL/dw. Runs on the CPU, or on the
GPU with --device cuda (PyTorch CUDA tensors passed in place when PyTorch is there).

    python3 python/examples/fit.py [--device cuda]   # the package setup.sh installed
    PYTHONPATH=build/python /usr/bin/python3 python/examples/fit.py   # the build tree's"""
import os
import sys

import numpy as np

import kern

device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
here = os.path.dirname(os.path.abspath(__file__))
ctx = kern.Context(device)
mod = kern.compile(os.path.join(here, "..", "..", "examples", "simulate.kern"), context=ctx)

rng = np.random.default_rng(0)
n, steps = 256, 8
x0 = rng.uniform(-1, 1, n).astype(np.float32)
w_true = rng.uniform(-0.3, 0.3, steps).astype(np.float32)


def arrays(*a):
    if device == "cpu":
        return a
    import torch
    return [torch.from_numpy(x).to("cuda") for x in a]


x0_d, w_true_d, target = arrays(x0, w_true, np.zeros(n, np.float32))
mod.simulate(x0=x0_d, w=w_true_d, out=target, steps=steps)  # the target, from known weights
target = np.asarray(target.cpu() if hasattr(target, "cpu") else target)

w = np.zeros(steps, np.float32)
lr = 0.3
for it in range(401):
    w_d, out = arrays(w, np.zeros(n, np.float32))
    with kern.Tape(ctx) as tape:
        mod.simulate(x0=x0_d, w=w_d, out=out, steps=steps)
    o = np.asarray(out.cpu() if hasattr(out, "cpu") else out)
    loss = float(np.mean((o - target) ** 2))
    first = loss if it == 0 else first
    seed = (2.0 / n * (o - target)).astype(np.float32)  # dL/d(out)
    tape.backward(seeds=[(out, arrays(seed)[0])])
    w = w - lr * tape.grad(w_d)
    tape.release()
    if it % 100 == 0:
        print("iteration %3d  loss %.3e  |w - w_true| %.3e" %
              (it, loss, float(np.abs(w - w_true).max())))
# the weights of neighbouring steps nearly trade places (an ill-conditioned problem), so
# the check is the loss, not w: gradient descent must have cut it a hundredfold
assert loss < first / 100, (first, loss)
print("loss %.3e -> %.3e" % (first, loss))
