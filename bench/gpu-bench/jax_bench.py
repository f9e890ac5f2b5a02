#!/usr/bin/env python3
"""jax_bench.py - the JAX side of the GPU benchmark (bench/gpu-bench/README.md).

The workloads "loop", "ragged", "divergent" and "kepler" of workload.h, written the usual
JAX way:
  loop:    lax.scan over w (one step per element), jax.jit for the forward,
           jax.jit(jax.grad(L, argnums=(0, 1))) for the gradient of L = sum(out * g);
  ragged:  JAX cannot differentiate lax.while_loop in reverse mode, so the scan runs to the
           largest count, len(w), and item i keeps x unchanged once t >= count[i] (jnp.where):
           every item computes len(w) steps, masked;
  divergent: the same as ragged with divergent's counts (uniform in 0 .. len(w));
  kepler:  the `while` workload. The forward is a lax.while_loop over the whole batch (one
           iteration per step of every item, masked per item with jnp.where once it has
           converged) that stops when every item has converged or at the cap len(w); the
           gradient cannot go through lax.while_loop in reverse mode, so it differentiates a
           lax.scan of len(w) masked iterations (the cap): every item computes len(w)
           iterations in K.grad's counterpart;
  loop_ckptK (--only ckpt, K = --ckpt, 32 by default): loop with checkpoints, the JAX way: a
           scan over segments of K steps whose body (an inner scan of K steps) is
           jax.checkpoint-ed, so the gradient keeps x at the start of each segment and
           recomputes the segment's steps in the reverse sweep (a remainder of len(w) mod K
           steps is a plain scan after it). Checked and compared with the baseline's loop.
Prints `jax WORKLOAD METRIC VALUE` lines ('#' lines are comments): compile_ms (the first call
of each jitted function), temp_bytes (XLA's temporary memory of the compiled gradient, from
memory_analysis(), where JAX has it), forward_ms and fwdrev_ms (medians of --reps calls after --warmup,
time.perf_counter around the call and jax.block_until_ready), check_* (the gradient with g
kept on a subset of items against a double-precision numpy reference), and with --compare
DIR vs_baseline_* (the full-size results against the CUDA baseline's). --dump DIR writes
DIR/jax_WORKLOAD_{out,x0grad,wgrad}.f32.

Skips (exit status 0, a '# jax: skipped' line) when JAX or numpy cannot be imported, or when
JAX has no GPU (unless --cpu). Exit status 1 when a check failed.
"""
import argparse
import sys
import time

CHECK_TOL = 1e-4  # workload.h GB_CHECK_TOL
AGREE_TOL = 1e-3  # workload.h GB_AGREE_TOL


def skip(why):
    print(f"# jax: skipped: {why}", flush=True)
    print(f"jax_bench.py: skipped: {why}", file=sys.stderr)
    sys.exit(0)


def make_inputs(np, n, steps, check):
    """workload.h's inputs: x0, w, g, count and g kept on the check subset."""

    def frac(i, seed):
        h = (i.astype(np.uint64) * np.uint64(2654435761) + np.uint64(seed * 40503)) & np.uint64(
            0xFFFFFFFF
        )
        return (h >> np.uint64(9)).astype(np.float64) / 8388608.0

    i = np.arange(n, dtype=np.int64)
    x0 = (-2.0 + 4.0 * frac(i, 1)).astype(np.float32)
    w = (0.5 + frac(np.arange(steps, dtype=np.int64), 2)).astype(np.float32)
    g = (0.5 + frac(i, 3)).astype(np.float32)
    lo = steps // 2
    count = (lo + (i * 7919) % (steps - lo + 1)).astype(np.int32)
    dcount = np.minimum(np.floor(frac(i, 4) * (steps + 1)), steps).astype(np.int32)
    e = (np.float32(0.6) * w[i % steps]).astype(np.float32)  # kepler's e, as in float
    stride = n // check if check > 0 and n > check else 1
    gsub = np.where(i % stride == 0, g, np.float32(0)).astype(np.float32)
    return x0, w, g, count, dcount, e, gsub, stride


def reference(np, x0, w, T, g):
    """Double precision, vectorized over the given items: out, dL/dx0, dL/dw."""
    steps = w.shape[0]
    w = w.astype(np.float64)
    x = x0.astype(np.float64)
    xs = np.empty((steps, x.shape[0]))
    for t in range(steps):
        xs[t] = x
        x = np.where(t < T, 0.5 * np.sin(x) * w[t] + 0.4 * x + 0.1, x)
    a = g.astype(np.float64)
    wg = np.zeros(steps)
    for t in range(steps - 1, -1, -1):
        on = t < T
        wg[t] = np.sum(np.where(on, a * 0.5 * np.sin(xs[t]), 0.0))
        a = np.where(on, a * (0.5 * np.cos(xs[t]) * w[t] + 0.4), a)
    return x, a, wg


def kepler_reference(np, m, e, steps, g, tol):
    """kepler in double precision over the given items: out, dL/dm, dL/de."""
    m = m.astype(np.float64)
    e = e.astype(np.float64)
    x, d = m.copy(), np.ones_like(m)
    k = np.zeros(m.shape, dtype=np.int64)
    xs = []
    for it in range(steps):
        on = np.abs(d) > tol
        if not on.any():
            break
        xs.append(x.copy())
        xn = m + e * np.sin(x)
        d = np.where(on, xn - x, d)
        x = np.where(on, xn, x)
        k += on
    a, am, ae = g.astype(np.float64), np.zeros_like(m), np.zeros_like(m)
    for it in range(len(xs) - 1, -1, -1):
        on = it < k
        am = np.where(on, am + a, am)
        ae = np.where(on, ae + a * np.sin(xs[it]), ae)
        a = np.where(on, a * e * np.cos(xs[it]), a)
    return x, am + a, ae


def maxrel(np, got, ref):
    """workload.h's measure: max |got - ref| / max |ref| (at least 1e-30); NaN wins."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30)
    d = np.abs(got - ref)
    return float("nan") if np.isnan(d).any() else float(np.max(d)) / scale


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--steps", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--check", type=int, default=4096)
    ap.add_argument("--only", default="loop,ragged,ckpt,huge,divergent,kepler",
                    help="comma-separated parts: loop, ragged, ckpt (loop_ckptK), huge (kern's "
                    "alone), divergent, kepler")
    ap.add_argument("--ckpt", type=int, default=32, help="loop_ckptK's segment length K")
    ap.add_argument("--compare", metavar="DIR")
    ap.add_argument("--dump", metavar="DIR")
    ap.add_argument("--cpu", action="store_true", help="run on JAX's CPU backend if it has no GPU")
    o = ap.parse_args()
    if o.n < 1 or o.steps < 2 or o.reps < 1 or o.warmup < 0 or o.check < 0 or o.ckpt < 2:
        ap.error("sizes must be positive")
    parts = o.only.split(",")
    names = ("loop", "ragged", "ckpt", "huge", "divergent", "kepler")
    if not parts or any(p not in names for p in parts):
        ap.error(f"--only {o.only}: a comma-separated list of {', '.join(names)}")

    try:
        import numpy as np
        import jax
        import jax.numpy as jnp
        from jax import lax
    except Exception as e:  # ImportError, or a broken installation
        skip(f"cannot import JAX ({type(e).__name__}: {e})")
    try:
        backend = jax.default_backend()
        dev = jax.devices()[0]
    except Exception as e:
        skip(f"JAX has no usable device ({type(e).__name__}: {e})")
    if backend != "gpu" and not o.cpu:
        skip(f"JAX's default backend is {backend!r}, not a GPU (--cpu to run there anyway)")
    print(
        f"# jax: {jax.__version__} on {backend} ({getattr(dev, 'device_kind', dev)}); "
        f"n {o.n}, steps {o.steps}, reps {o.reps}, warmup {o.warmup}",
        flush=True,
    )

    def step(x, wt):
        return 0.5 * jnp.sin(x) * wt + 0.4 * x + 0.1

    def loop_fwd(x0, w):
        x, _ = lax.scan(lambda x, wt: (step(x, wt), None), x0, w)
        return x

    def loop_ckpt_fwd(x0, w):
        k = o.ckpt
        m = w.shape[0] // k * k

        @jax.checkpoint
        def segment(x, ws):
            x, _ = lax.scan(lambda x, wt: (step(x, wt), None), x, ws)
            return x, None

        x, _ = lax.scan(segment, x0, w[:m].reshape(m // k, k))
        if m < w.shape[0]:
            x, _ = lax.scan(lambda x, wt: (step(x, wt), None), x, w[m:])
        return x

    def ragged_fwd(x0, w, count):
        def body(x, tw):
            t, wt = tw
            return jnp.where(t < count, step(x, wt), x), None

        x, _ = lax.scan(body, x0, (jnp.arange(w.shape[0], dtype=jnp.int32), w))
        return x

    KEPLER_TOL = 1e-6  # workload.h GB_KEPLER_TOL

    def kepler_fwd(x0, e):
        """lax.while_loop: until every item has converged, or len(w) iterations"""
        tol = jnp.float32(KEPLER_TOL)

        def cond(c):
            k, x, d = c
            return (k < o.steps) & jnp.any(jnp.abs(d) > tol)

        def body(c):
            k, x, d = c
            on = jnp.abs(d) > tol
            xn = x0 + e * jnp.sin(x)
            return k + 1, jnp.where(on, xn, x), jnp.where(on, xn - x, d)

        _, x, _ = lax.while_loop(cond, body, (jnp.int32(0), x0, jnp.ones_like(x0)))
        return x

    def kepler_scan(x0, w):
        """len(w) masked iterations (reverse mode goes through lax.scan)"""
        e = jnp.float32(0.6) * w[jnp.arange(x0.shape[0]) % w.shape[0]]
        tol = jnp.float32(KEPLER_TOL)

        def body(c, _):
            x, d = c
            on = jnp.abs(d) > tol
            xn = x0 + e * jnp.sin(x)
            return (jnp.where(on, xn, x), jnp.where(on, xn - x, d)), None

        (x, _), _ = lax.scan(body, (x0, jnp.ones_like(x0)), None, length=w.shape[0])
        return x

    x0, w, g, count, dcount, e, gsub, stride = make_inputs(np, o.n, o.steps, o.check)
    failed = False
    ckpt_name = f"loop_ckpt{o.ckpt}"
    work = [("loop", "loop"), (ckpt_name, "ckpt"), ("ragged", "ragged"),
            ("divergent", "divergent"), ("kepler", "kepler")]
    for name, part in work:
        if part not in parts:
            continue
        ragged = name in ("ragged", "divergent")
        counts = dcount if name == "divergent" else count
        base = "loop" if name == ckpt_name else name  # the baseline's results to compare with
        if name == ckpt_name:
            fwd = jax.jit(loop_ckpt_fwd)
            grad = jax.jit(
                jax.grad(lambda x0, w, g: jnp.sum(loop_ckpt_fwd(x0, w) * g), argnums=(0, 1))
            )
            args = (jnp.asarray(x0), jnp.asarray(w))
            print(f"# jax {name}: scan of {o.steps // o.ckpt} segments of {o.ckpt} steps, each "
                  f"jax.checkpoint-ed, then {o.steps % o.ckpt} steps stored", flush=True)
        elif ragged:
            fwd = jax.jit(ragged_fwd)
            grad = jax.jit(
                jax.grad(lambda x0, w, c, g: jnp.sum(ragged_fwd(x0, w, c) * g), argnums=(0, 1))
            )
            args = (jnp.asarray(x0), jnp.asarray(w), jnp.asarray(counts))
        elif name == "kepler":
            kfwd = jax.jit(kepler_fwd)
            je = jnp.asarray(e)
            fwd = lambda x0, w: kfwd(x0, je)  # noqa: E731 (the same arguments as the gradient)
            grad = jax.jit(jax.grad(lambda x0, w, g: jnp.sum(kepler_scan(x0, w) * g), argnums=(0, 1)))
            args = (jnp.asarray(x0), jnp.asarray(w))
            print(f"# jax {name}: forward lax.while_loop (masked per item); gradient through a "
                  f"lax.scan of {o.steps} masked iterations (the cap)", flush=True)
        else:
            fwd = jax.jit(loop_fwd)
            grad = jax.jit(jax.grad(lambda x0, w, g: jnp.sum(loop_fwd(x0, w) * g), argnums=(0, 1)))
            args = (jnp.asarray(x0), jnp.asarray(w))
        jg, jgsub = jnp.asarray(g), jnp.asarray(gsub)

        def timed(f, *a):
            t0 = time.perf_counter()
            r = jax.block_until_ready(f(*a))
            return r, (time.perf_counter() - t0) * 1e3

        out, ms_f = timed(fwd, *args)
        (gx0, gw), ms_g = timed(grad, *args, jgsub)
        print(f"jax {name} compile_ms {ms_f:.1f}", flush=True)  # the forward's first call
        print(f"jax {name} grad_compile_ms {ms_g:.1f}", flush=True)
        try:  # what XLA allocates for the gradient besides its arguments and results
            mem = grad.lower(*args, jgsub).compile().memory_analysis()
            print(f"jax {name} temp_bytes {int(mem.temp_size_in_bytes)}", flush=True)
        except Exception as err:
            print(f"# jax {name}: no memory analysis ({type(err).__name__}: {err})", flush=True)

        # the check: g kept on every stride-th item, against double precision
        sub = np.arange(0, o.n, stride)
        if name == "kepler":
            rout, rx0g, reg = kepler_reference(np, x0[sub], e[sub], o.steps, gsub[sub], KEPLER_TOL)
            rwg = 0.6 * np.bincount(sub % o.steps, weights=reg, minlength=o.steps)
        else:
            T = counts[sub] if ragged else np.full(sub.shape, o.steps)
            rout, rx0g, rwg = reference(np, x0[sub], w, T, gsub[sub])
        e_out = maxrel(np, np.asarray(out)[sub], rout)
        e_x0g = maxrel(np, np.asarray(gx0)[sub], rx0g)
        e_wg = maxrel(np, np.asarray(gw), rwg)
        # (not `e`: that is kepler's eccentricities, which a later workload still reads)
        worst = (max(e_out, e_x0g, e_wg) if not any(v != v for v in (e_out, e_x0g, e_wg))
                 else float("nan"))
        print(f"# jax {name}: check on {sub.size} of {o.n} items (every {stride}-th), w.grad from those items")
        for metric, v in [("out", e_out), ("x0grad", e_x0g), ("wgrad", e_wg), ("maxrel", worst)]:
            print(f"jax {name} check_{metric} {v:.3g}")
        ok = worst <= CHECK_TOL
        print(f"jax {name} check {'ok' if ok else 'FAILED'}", flush=True)
        if not ok:
            print(f"jax_bench.py: CHECK FAILED: {name}: largest error {worst:.3g}", file=sys.stderr)
            failed = True

        tf, tg = [], []
        for r in range(o.warmup + o.reps):
            _, ms = timed(fwd, *args)
            if r >= o.warmup:
                tf.append(ms)
        for r in range(o.warmup + o.reps):
            res, ms = timed(grad, *args, jg)
            if r >= o.warmup:
                tg.append(ms)
        print(f"jax {name} forward_ms {float(np.median(tf)):.3f}")
        print(f"jax {name} fwdrev_ms {float(np.median(tg)):.3f}", flush=True)

        full = {"out": np.asarray(out), "x0grad": np.asarray(res[0]), "wgrad": np.asarray(res[1])}
        if o.dump:
            for k, v in full.items():
                v.astype(np.float32).tofile(f"{o.dump}/jax_{name}_{k}.f32")
        if o.compare:
            worst, have = 0.0, True
            for k, v in full.items():
                path = f"{o.compare}/baseline_{base}_{k}.f32"
                try:
                    ref = np.fromfile(path, dtype=np.float32)
                except OSError:
                    ref = None
                if ref is None or ref.size != v.size:
                    print(f"# jax {name}: no baseline results in {path} (missing, or not {v.size} floats)")
                    have = False
                    continue
                ek = maxrel(np, v, ref)
                print(f"jax {name} vs_baseline_{k} {ek:.3g}")
                worst = ek if (ek != ek or ek > worst) else worst
            if have:
                print(f"jax {name} vs_baseline_maxrel {worst:.3g}")
                if not worst <= AGREE_TOL:
                    print(f"jax_bench.py: {name}: JAX and the baseline differ by {worst:.3g}", file=sys.stderr)
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
