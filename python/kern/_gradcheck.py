"""gradcheck(): a kernel's K.grad against central finite differences (the meaning of
`kernc gradcheck`)."""

import warnings

from ._buffer import _to_host
from ._errors import ArgumentError, CopyWarning
from ._library import _DTYPES, _F64, _np
from ._tape import Tape

def gradcheck(kernel, eps=None, rtol=None, seed=1, max_checks=64, **args):
    """Checks kernel.grad against central finite differences, with the command line's
    meaning (docs/cli.md, gradcheck): L = sum over the differentiable array parameters p of
    w_p * (p after the kernel), random weights; the analytic dL/dx from a tape (the kernel,
    then its gradient on the state it left); the numeric one from the kernel run on x +/-
    eps. Arrays are NumPy arrays (copied: the caller's are not changed). Returns a dict
    with 'ok', 'worst' (relative error) and 'where'; raises Error for a runtime failure.
    Unlike kernc gradcheck it runs the kernel in its own precision (f32 kernels with
    eps 1e-2 and rtol 1e-2 by default, f64 with 1e-6 and 1e-6)."""
    np = _np()
    rng = np.random.default_rng(seed)
    params = kernel.params
    base = {}
    for p in params:
        if p.name not in args:
            raise ArgumentError("gradcheck: missing argument '%s'" % p.name)
        v = _to_host(args[p.name]) if p.is_array else args[p.name]
        if p.is_array and p.view is not None and v.dtype.names is not None:
            v = p.view.components("gradcheck, parameter '%s'" % p.name, v)
        base[p.name] = np.array(v, dtype=_DTYPES[p.dtype], copy=True) if p.is_array else v
    diff = [p for p in params if p.is_array and p.differentiable]
    if not diff:
        raise ArgumentError("gradcheck: kernel '%s' has no differentiable array parameter" %
                            kernel.name)
    f64 = all(p.dtype == _F64 for p in diff)
    eps = eps if eps is not None else (1e-6 if f64 else 1e-2)
    rtol = rtol if rtol is not None else (1e-6 if f64 else 1e-2)
    weights = {p.name: rng.uniform(-1, 1, base[p.name].shape) for p in diff}

    def run(values):
        vals = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v)
                for k, v in values.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CopyWarning)
            kernel(**vals)
        return vals

    def loss(vals):
        return sum(float(np.sum(weights[p.name] * vals[p.name].astype(np.float64)))
                   for p in diff)

    vals = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v)
            for k, v in base.items()}
    tape = Tape(kernel.module.context)
    with tape:
        kernel(**vals)
    tape.backward(seeds=[(vals[p.name], weights[p.name].astype(_DTYPES[p.dtype])) for p in diff])
    # the adjoint of an input is dL/d(input before the kernel)
    grads = {p.name: tape.grad(vals[p.name]).astype(np.float64) for p in diff}
    tape.release()
    worst, where = 0.0, None
    checks = []
    for p in diff:
        n = base[p.name].size
        idx = rng.choice(n, size=min(n, max_checks), replace=False) if n else []
        checks += [(p, int(i)) for i in idx]
    for p, i in checks:
        hi = dict(base)
        lo = dict(base)
        hi[p.name] = base[p.name].copy()
        lo[p.name] = base[p.name].copy()
        hi[p.name].flat[i] += eps
        lo[p.name].flat[i] -= eps
        num = (loss(run(hi)) - loss(run(lo))) / (2 * eps)
        ana = grads[p.name].flat[i]
        err = abs(num - ana) / max(1.0, abs(num), abs(ana))
        if err > worst:
            worst, where = err, "%s[%d]: K.grad %.9g, finite difference %.9g" % (p.name, i, ana,
                                                                                 num)
    return {"ok": worst <= rtol, "worst": worst, "where": where, "checked": len(checks),
            "rtol": rtol}
