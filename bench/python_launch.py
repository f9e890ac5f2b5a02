"""python_launch.py - the host cost of a kernel call from Python (bench/README.md,
"python-launch"), beside the same launch from C (build/bench/launch-bench): saxpy on 16
elements on the CPU, median of 21 batches, microseconds per call, for
  - kern Buffers (no conversion: the argument checks and kern_launch),
  - NumPy arrays used in place (a DLPack import per array per call),
  - PyTorch CPU tensors used in place (the same through torch's __dlpack__).
Run: PYTHONPATH=build/python /usr/bin/python3 bench/python_launch.py [--build build]"""
import os
import subprocess
import sys
import time

import numpy as np

import kern

BUILD = sys.argv[sys.argv.index("--build") + 1] if "--build" in sys.argv else "build"
SRC = ("kernel saxpy(a: f32, x: f32[], y: f32[]) {\n"
       "    for i in 0..len(x) { y[i] += a * x[i]; }\n"
       "}\n")


def median_us(f, calls):
    t = []
    for _ in range(21):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        t.append((time.perf_counter() - t0) / calls * 1e6)
    t.sort()
    return t[len(t) // 2]


def main():
    ctx = kern.Context(threads=1)  # the defaults (checked code), as the C side
    k = kern.compile(SRC, context=ctx).saxpy
    x = np.arange(16, dtype=np.float32)
    y = np.arange(16, dtype=np.float32)
    bx, by = kern.Buffer.from_array(x, ctx), kern.Buffer.from_array(y, ctx)
    rows = [("kern Buffers", median_us(lambda: k(0.5, bx, by), 5000)),
            ("NumPy arrays (in place)", median_us(lambda: k(0.5, x, y), 5000))]
    try:
        import torch
        tx, ty = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
        rows.append(("PyTorch CPU tensors (in place)", median_us(lambda: k(0.5, tx, ty), 5000)))
    except ImportError:
        pass
    c = subprocess.run([os.path.join(BUILD, "bench", "launch-bench")], check=True,
                       capture_output=True, text=True).stdout.split()
    c_us = float(c[c.index("c_launch_us") + 1])
    print("python-launch: saxpy, 16 elements, cpu, 1 thread (median us per call)")
    print("%-34s %8.2f us  %6.1fx C" % ("C (kern_launch)", c_us, 1.0))
    for name, us in rows:
        print("%-34s %8.2f us  %6.1fx C" % (name, us, us / c_us))


if __name__ == "__main__":
    main()
