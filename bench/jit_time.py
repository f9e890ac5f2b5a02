"""jit_time.py - JIT compile time of every benchmark kernel (bench/README.md, "jit-time"):
kern.compile of each bench/kernels/*.kern with the gradients built lazily (the default:
K.grad when first looked up) and eagerly (KERN_JIT_EAGER_GRADS=1, as before), and the time
of the first K.grad lookup. Median of 5 compilations each, milliseconds.
Run: PYTHONPATH=build/python /usr/bin/python3 bench/jit_time.py"""
import glob
import os
import subprocess
import sys
import time

import kern

HERE = os.path.dirname(os.path.abspath(__file__))


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def measure(path):
    ctx = kern.Context(threads=1, debug=False)
    fwd, grad = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        m = kern.compile(path, context=ctx)
        t1 = time.perf_counter()
        names = [n for n in m.kernels if n.endswith(".grad")]
        if names:
            m.kernel(names[0])
        t2 = time.perf_counter()
        fwd.append((t1 - t0) * 1e3)
        grad.append((t2 - t1) * 1e3)
        m.release()
    return median(fwd), median(grad)


if __name__ == "__main__":
    if len(sys.argv) > 1:  # child: one file, prints "fwd grad"
        print("%.2f %.2f" % measure(sys.argv[1]))
        sys.exit(0)
    print("jit-time: kern.compile of bench/kernels/*.kern, cpu, median of 5 (ms)")
    print("%-22s %12s %16s %14s" % ("file", "eager (all)", "lazy: primal", "first K.grad"))
    for path in sorted(glob.glob(os.path.join(HERE, "kernels", "*.kern"))):
        env = dict(os.environ)
        lazy = subprocess.run([sys.executable, __file__, path], env=env, check=True,
                              capture_output=True, text=True).stdout.split()
        env["KERN_JIT_EAGER_GRADS"] = "1"
        eager = subprocess.run([sys.executable, __file__, path], env=env, check=True,
                               capture_output=True, text=True).stdout.split()
        print("%-22s %12s %16s %14s" % (os.path.basename(path), eager[0], lazy[0], lazy[1]))
