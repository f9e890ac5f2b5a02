#!/usr/bin/env python3
"""checks_bench.py - checked code (the default) against unchecked code, in one run.

Runs cpu-bench and grad-bench (BUILDDIR/bench) alternately with $KERN_NO_CHECKS=1 (the
runtime's unchecked JIT code) and without it (checked: bounds, division and shift checks),
ROUNDS times each (the even rounds unchecked first, the odd ones checked first), and
prints per workload the best kern time of each and their ratio: checked / unchecked. The issue's target is at most 1.2 on every row.

usage: checks_bench.py [BUILDDIR] [--rounds N] [--quick] [--only-cpu | --only-grad]
       [-- extra arguments for both benchmarks]
"""
import os
import subprocess
import sys
import time

BENCHES = {
    # name: (binary, the columns holding kern's times)
    "cpu-bench": ("cpu-bench", ["kern ms"]),
    "grad-bench": ("grad-bench", ["K ms", "K.grad ms"]),
}


def tables(text):
    """The markdown tables of text: a list of (header cells, rows of cells)."""
    out, header, rows = [], None, []
    for line in text.splitlines():
        if not line.startswith("|"):
            if header:
                out.append((header, rows))
            header, rows = None, []
            continue
        cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not all(set(c) <= set("-:") for c in cells):
            rows.append(cells)
    if header:
        out.append((header, rows))
    return out


def times(text, columns):
    """{(workload, size, column): ms} from the first table with those columns."""
    for header, rows in tables(text):
        if all(c in header for c in columns):
            got = {}
            for r in rows:
                for c in columns:
                    try:
                        got[(r[0], r[1], c)] = float(r[header.index(c)])
                    except (ValueError, IndexError):
                        pass
            return got
    raise SystemExit("checks_bench: no table with the columns %s in:\n%s" % (columns, text))


def run(binary, extra, unchecked):
    env = dict(os.environ)
    env.pop("KERN_NO_CHECKS", None)
    if unchecked:
        env["KERN_NO_CHECKS"] = "1"
    p = subprocess.run([binary] + extra, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise SystemExit("checks_bench: %s failed (status %d):\n%s" %
                         (binary, p.returncode, p.stdout))
    return p.stdout


def main(argv):
    builddir, rounds, quick, extra, which = "build", 2, False, [], list(BENCHES)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            extra = argv[i + 1:]
            break
        if a == "--rounds" and i + 1 < len(argv):
            rounds = int(argv[i + 1])
            i += 1
        elif a == "--quick":
            quick = True
        elif a == "--only-cpu":
            which = ["cpu-bench"]
        elif a == "--only-grad":
            which = ["grad-bench"]
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif not a.startswith("-"):
            builddir = a
        else:
            print("checks_bench: unknown option %r" % a, file=sys.stderr)
            return 2
        i += 1
    if quick:
        extra = ["--quick"] + extra
    print("checks_bench  %s, %d rounds, load average %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S %Z"), rounds, os.getloadavg()))
    print("ratio = best checked / best unchecked (kern's own times, the same binary)\n")
    print("| benchmark | workload | size | time | unchecked ms | checked ms | checked / unchecked |")
    print("|---|---|---|---|---:|---:|---:|")
    worst = 0.0
    for name in which:
        binary, columns = BENCHES[name]
        path = os.path.join(builddir, "bench", binary)
        best = {False: {}, True: {}}
        for r in range(rounds):
            # each round starts with the other one: on a shared machine the first process
            # after a pause can get memory (bandwidth) the next ones do not
            for unchecked in ((True, False) if r % 2 == 0 else (False, True)):
                got = times(run(path, extra, unchecked), columns)
                for k, v in got.items():
                    b = best[unchecked]
                    b[k] = min(b.get(k, v), v)
        for key in sorted(best[True], key=lambda k: list(best[True]).index(k)):
            if key not in best[False]:
                continue
            u, c = best[True][key], best[False][key]
            ratio = c / u if u > 0 else float("nan")
            worst = max(worst, ratio)
            print("| %s | %s | %s | %s | %.2f | %.2f | %.2f |" % (
                name, key[0], key[1], key[2], u, c, ratio))
    print("\nworst checked / unchecked: %.2f" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
