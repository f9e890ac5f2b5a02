"""gradcheck(): a kernel's K.grad against central finite differences in f64, with the meaning
of `kernc gradcheck` (docs/cli.md, gradcheck; cli/gradcheck.c is the command line's engine).

The kernel's source is compiled a second time with every f32 retyped to f64 (the context
option promote_f64, as the command line does); the loss is L = sum over the differentiable
array parameters p of w_p . (p after K); the analytic dL/dx comes from a tape (K, then
K.grad on the state K left) in both precisions; the numeric one from the f64 K run at
x + h and x - h, h = eps * max(1, |x|), as sum_p w_p . (p+ - p-) / ((x + h) - (x - h));
the relative error is |g - d| / max(|g|, |d|, 1e-3); the elements checked are all of
them up to max_checks, else that many evenly spaced (the command line's rule)."""

import math
import warnings

from ._buffer import _to_host
from ._errors import ArgumentError, CopyWarning, UnsupportedError
from ._library import _DTYPES, _np
from ._tape import Tape

_FLOOR = 1e-3  # cli/gradcheck.h, GRADCHECK_FLOOR


def relerr(a, f):
    """The relative error of an analytic value a against a finite difference f, as both
    front ends measure it (gradcheck_relerr): |a - f| / max(|a|, |f|, 1e-3); 0 when both
    are the same infinity or both NaN, inf when only one is not finite."""
    if math.isnan(a) and math.isnan(f):
        return 0.0
    if math.isinf(a) and a == f:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(f)):
        return math.inf
    return abs(a - f) / max(abs(a), abs(f), _FLOOR)


def sample(total, max_checks):
    """The flat indices checked among total elements (cli/gradcheck.c, check_elements): all
    of them up to max_checks, else max_checks evenly spaced, the c-th shifted by c mod the
    spacing inside its gap, so that a spacing that is a multiple of a vector's or struct's
    size still reaches every component."""
    n = min(total, max_checks)
    if n == 0:
        return []
    gap = total // n
    return [int(float(c) * float(total) / float(n)) + c % gap for c in range(n)]


def _weights(seed, shapes):
    """Random weights in [-1, 1], rounded to f32, from splitmix64 (the command line's
    generator; it draws the unbound inputs first, so its weights for a seed differ)."""
    np = _np()
    s = seed & (2**64 - 1)
    m = 2**64 - 1
    out = {}
    for name, shape in shapes:
        n = int(np.prod(shape)) if shape else 1
        w = np.empty(n)
        for i in range(n):
            s = (s + 0x9e3779b97f4a7c15) & m
            z = s
            z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & m
            z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & m
            z ^= z >> 31
            w[i] = float(np.float32(2 * ((z >> 11) * 2.0**-53) - 1))
        out[name] = w.reshape(shape)
    return out


def _promoted(kernel):
    """K of the kernel's source compiled with every f32 as f64, on a context of its own."""
    from ._context import Context
    from ._module import compile as _compile
    src = getattr(kernel.module, "_source", None)
    if src is None:
        raise UnsupportedError("gradcheck: kernel '%s' comes from a module without source "
                               "(kern.load): gradcheck compiles the source again in f64; "
                               "kern.compile the .kern file" % kernel.name)
    ctx = Context(kernel.module.context.device, _promote_f64=True)
    return _compile(src[0], context=ctx, name=src[1]).kernel(kernel.name), ctx


def gradcheck(kernel, eps=1e-6, rtol=1e-6, rtol_f32=1e-2, seed=1, max_checks=200,
              weights=None, **args):
    """Checks kernel.grad against central finite differences in f64, with the meaning of
    `kernc gradcheck` (docs/cli.md): the same loss, step, relative error, tolerances,
    sample of elements and f64 retyping. Every parameter is given (arrays are copied: the
    caller's are not changed); weights: {name: the w_p of array p} (P.grad=W.npy of the
    command line), the others random from seed. Returns a dict: 'ok' (both precisions
    within their tolerance, the primal arrays unchanged by K.grad, an element compared),
    'worst' and 'where' (f64: the relative error and "x[3]: K.grad ..., finite difference
    ..."), 'worst_f32' and 'where_f32', 'checked' (elements), 'rtol', 'rtol_f32',
    'primal_written' (an array K.grad changed, or None). Raises Error for a runtime
    failure. Unlike the command line it makes up no inputs, does not check K.jvp, and does
    not recognise a non-smooth point (a step across a loop's changed trip count fails)."""
    np = _np()
    eps = 1e-6 if eps is None else eps  # None: the default, as before
    rtol = 1e-6 if rtol is None else rtol
    rtol_f32 = 1e-2 if rtol_f32 is None else rtol_f32
    if not (eps > 0) or int(max_checks) < 1:
        raise ArgumentError("gradcheck: eps and max_checks must be positive")
    params = kernel.params
    base = {}
    for p in params:
        if p.name not in args:
            raise ArgumentError("gradcheck: missing argument '%s'" % p.name)
        v = _to_host(args[p.name]) if p.is_array else args[p.name]
        if p.is_array and p.view is not None and getattr(v.dtype, "names", None) is not None:
            v = p.view.components("gradcheck, parameter '%s'" % p.name, v)
        base[p.name] = np.array(v, dtype=_DTYPES[p.dtype], copy=True) if p.is_array else v
    unknown = sorted(set(args) - {p.name for p in params})
    if unknown:
        raise ArgumentError("gradcheck: kernel '%s' has no parameter named '%s' (it has: %s)"
                            % (kernel.name, unknown[0], ", ".join(p.name for p in params)))
    diff = [p for p in params if p.is_array and p.differentiable]
    if not diff:
        raise ArgumentError("gradcheck: kernel '%s' has no differentiable array parameter" %
                            kernel.name)
    w = _weights(seed, [(p.name, base[p.name].shape) for p in diff])
    for name, given in (weights or {}).items():
        if name not in w:
            raise ArgumentError("gradcheck: weights for '%s', which is not a differentiable "
                                "array parameter (%s)" % (name, ", ".join(w)))
        given = np.asarray(_to_host(given), dtype=np.float64)
        if given.shape != w[name].shape:
            raise ArgumentError("gradcheck: the weights of '%s' have shape %s, the array %s"
                                % (name, given.shape, w[name].shape))
        w[name] = given
    k64, ctx64 = _promoted(kernel)
    try:
        return _check(kernel, k64, base, diff, w, eps, rtol, rtol_f32, int(max_checks))
    finally:
        ctx64.release()


def _as(base, params, f64):
    """Copies of the inputs; f32 arrays in f64 for the promoted kernel."""
    np = _np()
    out = {}
    for p in params:
        v = base[p.name]
        if isinstance(v, np.ndarray):
            v = v.astype(np.float64) if f64 and v.dtype == np.float32 else v.copy()
        out[p.name] = v
    return out


def _call(kernel, vals, tape=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CopyWarning)
        if tape is None:
            kernel(**vals)
        else:
            with tape:
                kernel(**vals)


def _analytic(kernel, base, diff, w, f64):
    """dL/d(input) of the differentiable arrays from a tape, and the first primal array
    that K.grad changed (None when none)."""
    np = _np()
    vals = _as(base, kernel.params, f64)
    tape = Tape(kernel.module.context)
    try:
        _call(kernel, vals, tape)
        after = {k: v.copy() for k, v in vals.items() if isinstance(v, np.ndarray)}
        dt = np.float64 if f64 else None
        tape.backward(seeds=[(vals[p.name], w[p.name].astype(dt or _DTYPES[p.dtype]))
                             for p in diff])
        grads = {p.name: tape.grad(vals[p.name]).astype(np.float64) for p in diff}
    finally:
        tape.release()
    written = next((k for k, v in after.items()
                    if not np.array_equal(v, vals[k], equal_nan=v.dtype.kind == "f")), None)
    return grads, written


def _describe(name, shape, e):
    idx = []
    for n in reversed(shape):
        idx.append(e % n)
        e //= n
    return "%s[%s]" % (name, ", ".join(str(i) for i in reversed(idx)))


def _check(kernel, k64, base, diff, w, eps, rtol, rtol_f32, max_checks):
    np = _np()
    g32, written32 = _analytic(kernel, base, diff, w, False)
    g64, written64 = _analytic(k64, base, diff, w, True)
    sizes = [base[p.name].size for p in diff]
    checks = sample(sum(sizes), max_checks)
    worst = {64: (-1.0, None), 32: (-1.0, None)}
    b64 = _as(base, k64.params, True)
    for flat in checks:
        q = 0
        while flat >= sizes[q]:
            flat -= sizes[q]
            q += 1
        p = diff[q]
        x = float(b64[p.name].flat[flat])
        h = eps * max(1.0, abs(x))
        outs = []
        for xs in (x + h, x - h):
            vals = _as(b64, k64.params, True)
            vals[p.name].flat[flat] = xs
            _call(k64, vals)
            outs.append(vals)
        s = 0.0
        for r in diff:
            plus, minus = outs[0][r.name], outs[1][r.name]
            both_nan = np.isnan(plus) & np.isnan(minus)  # unaffected
            s += float(np.sum(np.where(both_nan, 0.0, w[r.name] * (plus - minus))))
        fd = s / ((x + h) - (x - h))
        for bits, g in ((64, g64), (32, g32)):
            a = float(g[p.name].flat[flat])
            err = relerr(a, fd)
            if err > worst[bits][0]:
                worst[bits] = (err, "%s: K.grad %.9g, finite difference %.9g"
                               % (_describe(p.name, base[p.name].shape, flat), a, fd))
    written = written64 or written32
    ok = worst[64][0] <= rtol and worst[32][0] <= rtol_f32 and written is None and \
        len(checks) > 0
    return {"ok": bool(ok), "worst": worst[64][0], "where": worst[64][1],
            "worst_f32": worst[32][0], "where_f32": worst[32][1], "checked": len(checks),
            "rtol": rtol, "rtol_f32": rtol_f32, "primal_written": written}
