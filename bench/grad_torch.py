#!/usr/bin/python3
"""grad_torch.py - the PyTorch side of grad-bench (bench/README.md, "grad-bench").

The same gradients as bench/kernels/grad_*.kern, through PyTorch's CPU autograd, in f32.
bench/grad_bench.c starts this script as a subprocess (/usr/bin/python3, which has torch)
and talks to it over stdin/stdout, one command per line, one answer per line:

  threads N                      -> "ok N"      torch.set_num_threads(N), interop 1
  setup NAME DIR KEY=VALUE ...   -> "ok"        load NAME's inputs from DIR (raw
                                                little-endian f32/i32 files that the
                                                harness wrote) and build the tensors
  check                          -> "ok"        one forward + backward; writes the
                                                gradients to DIR/torch_<what>.bin (f32)
  time N                         -> "times T1 .. TN"   N timed forward + backward runs, ms
  quit

A timed run is forward + backward from the leaf tensors (fresh .grad each run):
time.perf_counter around building the graph and out.backward(seed). Errors are answered
as "error MESSAGE" (the harness reports them and carries on without PyTorch's column).

Workloads (their parameters come as KEY=VALUE; files are named after the kern
parameters):
  simulate  n steps wgrad(0|1)   x0[n] w[steps] seed[n]: out = T steps of
            x = sin(x) * w[t] + x; out.backward(seed); gradients x0 (and w when wgrad)
  springs   n steps k dt         x0[n] v0[n] seedx[n] seedv[n]: the chain of masses of
            grad_springs.kern for steps launches; (x, v).backward((seedx, seedv));
            gradients x0, v0, k
  stencil   n m steps            u0[n*m] seed[n*m]: steps sweeps of grad_stencil.kern;
            gradient u0
  ragged    n total maxcount     x0[n] w[total] start[n] count[n] seed[n]: item i runs
            count[i] steps over w[start[i] ..]; written in the usual dense form: w copied
            into a padded [maxcount, n] layout (index_copy, whose backward is a gather),
            then maxcount masked steps over all items (torch.where); gradients x0, w
"""
import os
import sys
import time

import numpy as np
import torch


def load(d, name, dtype=np.float32, shape=None):
    a = np.fromfile(os.path.join(d, name + ".bin"), dtype=dtype)
    if shape is not None:
        a = a.reshape(shape)
    return torch.from_numpy(a.copy())


class Simulate:
    def __init__(self, d, p):
        self.n, self.steps, self.wgrad = int(p["n"]), int(p["steps"]), p["wgrad"] == "1"
        self.x0 = load(d, "x0")
        self.w = load(d, "w")
        self.seed = load(d, "seed")

    def run(self):
        x0 = self.x0.detach().requires_grad_(True)
        w = self.w.detach().requires_grad_(self.wgrad)
        x = x0
        for wt in w.unbind(0):
            x = torch.sin(x) * wt + x
        x.backward(self.seed)
        return {"x0": x0.grad, "w": w.grad if self.wgrad else None}


class Springs:
    def __init__(self, d, p):
        self.steps, self.k, self.dt = int(p["steps"]), float(p["k"]), float(p["dt"])
        self.x0, self.v0 = load(d, "x0"), load(d, "v0")
        self.seedx, self.seedv = load(d, "seedx"), load(d, "seedv")

    def run(self):
        x = x0 = self.x0.detach().requires_grad_(True)
        v = v0 = self.v0.detach().requires_grad_(True)
        k = torch.tensor(self.k, dtype=torch.float32, requires_grad=True)
        dt = self.dt
        pad = torch.nn.functional.pad
        for _ in range(self.steps):
            d = x[1:] - x[:-1]  # x[i+1] - x[i]
            # f[i] = k * (x[i-1] - x[i]) [i > 0] + k * (x[i+1] - x[i]) [i < n-1]
            f = pad(k * -d, (1, 0)) + pad(k * d, (0, 1))
            v = v + dt * f
            x = x + dt * v
        torch.autograd.backward((x, v), (self.seedx, self.seedv))
        return {"x0": x0.grad, "v0": v0.grad, "k": k.grad.reshape(1)}


ALPHA = 0.2  # grad_stencil.kern's


class Stencil:
    def __init__(self, d, p):
        self.n, self.m, self.steps = int(p["n"]), int(p["m"]), int(p["steps"])
        self.u0 = load(d, "u0", shape=(self.n, self.m))
        self.seed = load(d, "seed", shape=(self.n, self.m))

    def run(self):
        u = u0 = self.u0.detach().requires_grad_(True)
        for _ in range(self.steps):
            c = u[1:-1, 1:-1]
            s = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
            un = u.clone()  # the border is copied
            un[1:-1, 1:-1] = c + ALPHA * (s - 4.0 * c)
            u = un
        u.backward(self.seed)
        return {"u0": u0.grad}


class Ragged:
    def __init__(self, d, p):
        self.n, self.maxcount = int(p["n"]), int(p["maxcount"])
        self.x0, self.w, self.seed = load(d, "x0"), load(d, "w"), load(d, "seed")
        start = load(d, "start", np.int32).long()
        count = load(d, "count", np.int32).long()
        n, total = self.n, self.w.shape[0]
        # pos[k]: where w[k] (item i, step j) goes in a padded [maxcount, n] layout, j * n + i
        item = torch.repeat_interleave(torch.arange(n), count)
        step = torch.arange(total) - start[item]
        self.pos = step * n + item
        j = torch.arange(self.maxcount).unsqueeze(1)
        self.active = (j < count.unsqueeze(0)).unbind(0)

    def run(self):
        x0 = self.x0.detach().requires_grad_(True)
        w = self.w.detach().requires_grad_(True)
        # padded copy of w; its backward is a gather (every w[k] has its own slot)
        wpad = w.new_zeros(self.maxcount * self.n).index_copy(0, self.pos, w)
        x = x0
        for j, row in enumerate(wpad.view(self.maxcount, self.n).unbind(0)):
            x = torch.where(self.active[j], torch.sin(x) * row + x, x)
        x.backward(self.seed)
        return {"x0": x0.grad, "w": w.grad}


WORKLOADS = {"simulate": Simulate, "springs": Springs, "stencil": Stencil, "ragged": Ragged}


def main():
    torch.set_grad_enabled(True)
    work, wdir = None, None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        cmd = words[0]
        try:
            if cmd == "quit":
                break
            if cmd == "threads":
                torch.set_num_threads(int(words[1]))
                try:
                    torch.set_num_interop_threads(1)
                except RuntimeError:
                    pass  # only settable before the first parallel work
                answer = "ok %d" % torch.get_num_threads()
            elif cmd == "setup":
                wdir = words[2]
                params = dict(kv.split("=", 1) for kv in words[3:])
                work = None
                work = WORKLOADS[words[1]](wdir, params)
                answer = "ok"
            elif cmd == "check":
                grads = work.run()
                for name, g in grads.items():
                    if g is not None:
                        path = os.path.join(wdir, "torch_%s.bin" % name)
                        g.detach().numpy().astype(np.float32).tofile(path)
                answer = "ok"
            elif cmd == "time":
                times = []
                for _ in range(int(words[1])):
                    t0 = time.perf_counter()
                    work.run()
                    times.append((time.perf_counter() - t0) * 1e3)
                answer = "times " + " ".join("%.4f" % t for t in times)
            elif cmd == "version":
                info = torch.__config__.parallel_info()
                backend = [l for l in info.splitlines() if "parallel backend" in l]
                answer = "ok torch %s, %s, at::get_num_threads() %d" % (
                    torch.__version__, backend[0].strip() if backend else "?",
                    torch.get_num_threads())
            else:
                answer = "error unknown command " + cmd
        except Exception as e:  # reported to the harness, which carries on without torch
            answer = "error %s: %s" % (type(e).__name__, str(e).replace("\n", " "))
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
