"""simulate.py - examples/simulate.kern from Python: the forward run, its gradient through
a tape, and a check against PyTorch's autograd when PyTorch is there.

    python3 python/examples/simulate.py [--device cuda]   # the package setup.sh installed
    PYTHONPATH=build/python /usr/bin/python3 python/examples/simulate.py   # the build tree's"""
import os
import sys

import numpy as np

import kern

device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
here = os.path.dirname(os.path.abspath(__file__))
ctx = kern.Context(device)
mod = kern.compile(os.path.join(here, "..", "..", "examples", "simulate.kern"), context=ctx)

n, steps = 8, 16
x0 = np.random.default_rng(1).uniform(-1, 1, n).astype(np.float32)
w = (0.5 * np.cos(np.arange(steps))).astype(np.float32)
out = np.zeros(n, np.float32)

with kern.Tape(ctx) as tape:
    mod.simulate(x0=x0, w=w, out=out, steps=steps)  # out is written in place on the CPU
tape.backward(seeds=[(out, np.ones(n, np.float32))])  # L = sum(out)
dx0, dw = tape.grad(x0), tape.grad(w)
print("out      ", np.round(out, 5))
print("dL/dx0   ", np.round(dx0, 5))
print("dL/dw[:4]", np.round(dw[:4], 5))

try:
    import torch
except ImportError:
    sys.exit(0)
tx = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
y = tx
for t in range(steps):
    y = torch.sin(y) * tw[t] + y
y.sum().backward()
print("max |dx0 - torch| %.2e, max |dw - torch| %.2e" %
      (np.abs(dx0 - tx.grad.numpy()).max(), np.abs(dw - tw.grad.numpy()).max()))
