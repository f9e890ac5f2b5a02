"""kern kernels as differentiable JAX functions: `kern.jax.function(kernel, shapes)` is a
jax.custom_vjp function whose forward runs the kernel K and whose backward runs K.grad
(docs/python.md, "JAX").

    import kern, kern.jax
    mod = kern.compile("examples/simulate.kern")
    simulate = kern.jax.function(mod.simulate, shapes={"out": "x0"})
    out = simulate(x0, w, steps=16)                 # x0, w: JAX arrays
    jax.grad(lambda x0, w: simulate(x0, w, steps=16).sum(), (0, 1))(x0, w)

Called on concrete arrays (eagerly, and under jax.grad where JAX hands the rule concrete
values) the kernel uses JAX's memory in place through DLPack, and its outputs are kern
Buffers lent to JAX through DLPack: no copies through the host (an array the kernel updates
starts as a copy made on the device by a kern kernel: JAX's own memory is never written).
Under tracing (jax.jit) it runs through jax.pure_callback, whose arrays are host (NumPy)
arrays: on a CUDA context they are copied to kern buffers and back. Imported on demand
(`import kern.jax`)."""

import jax as _jax
import numpy as _np

from ._bridge import _MISSING, _Op
from ._buffer import Buffer
from ._errors import ArgumentError
from ._library import _DTYPES, _KERN_NAMES
from ._module import compile as _kern_compile

__all__ = ["function", "Function"]

try:
    from jax.core import Tracer as _Tracer
except ImportError:  # a JAX without jax.core.Tracer: recognised by name below
    _Tracer = ()


def _traced(x):
    return isinstance(x, _Tracer) or "Tracer" in type(x).__name__


def _platform(x):
    try:
        devs = x.devices()
    except AttributeError:
        devs = {x.device()}
    return {d.platform for d in devs}


_copies = {}  # (id(context), kern type, rank) -> the copy kernel (a Module's)


def _device_copy(ctx, p, a):
    """A kern Buffer holding a copy of the JAX array a (parameter p's dtype and rank), made
    on the device by a kernel: JAX's memory is only read (a DLPack consumer must not
    write a buffer JAX owns), and nothing passes through the host."""
    t, r = _KERN_NAMES[p.dtype], p.rank
    key = (id(ctx), t, r)
    k = _copies.get(key)
    if k is None or k.module.context is not ctx or not k.module._ptr:
        idx = ", ".join("i%d" % d for d in range(r))
        loops = "".join("%sfor i%d in 0..shape(src, %d) {\n" % ("    " * (d + 1), d, d)
                        for d in range(r))
        src = "kernel copy(src: %s[%s], dst: %s[%s]) {\n%s%sdst[%s] = src[%s];\n%s}\n" % (
            t, "," * (r - 1), t, "," * (r - 1), loops, "    " * (r + 1), idx, idx,
            "".join("    " * (d + 1) + "}\n" for d in reversed(range(r))))
        k = _copies[key] = _kern_compile(src, context=ctx, name="<kern.jax copy>").copy
    b = Buffer.zeros(tuple(a.shape), _DTYPES[p.dtype], context=ctx)
    k._run([a, b], {}, None)
    return b


def _from_buffer(b):
    """A kern Buffer as a JAX array, through DLPack (JAX copies only what it cannot view)."""
    try:
        return _jax.dlpack.from_dlpack(b)
    except (TypeError, AttributeError):  # an older JAX: a capsule
        return _jax.dlpack.from_dlpack(b.__dlpack__())


class Function:
    """A kernel as a JAX function (made by kern.jax.function). Calling it with the kernel's
    arguments (by position or name) returns the outputs: the arrays the kernel writes, in
    parameter order (one array, or a tuple of them)."""

    def __init__(self, kernel, shapes=None):
        ctx = kernel.module.context
        if ctx.device not in ("cpu", "cuda"):
            raise ArgumentError("kern.jax.function: kernel '%s' runs on a %s context; JAX "
                                "arrays live on the CPU or a CUDA GPU" % (kernel.name, ctx.device))
        self._op = _Op(kernel, shapes, "kern.jax.function")
        if not self._op.outputs:
            raise ArgumentError("kern.jax.function: kernel '%s' writes none of its arrays, so "
                                "it has no outputs" % kernel.name)
        self.kernel = kernel
        self.context = ctx

    @property
    def outputs(self):
        """The names of the outputs, in the order they are returned."""
        return [self._op.params[i].name for i in self._op.outputs]

    def __repr__(self):
        return "kern.jax.Function(%s -> %s)" % (self.kernel.name, ", ".join(self.outputs))

    def _where(self, i):
        return "kern.jax.function: kernel '%s', parameter '%s'" % (self.kernel.name,
                                                                    self._op.params[i].name)

    def __call__(self, *args, **kwargs):
        op = self._op
        params = op.params
        values = op.bind(args, kwargs)
        idx = tuple(i for i, p in enumerate(params) if p.is_array and values[i] is not _MISSING)
        arrays = []
        for i in idx:
            v, p = values[i], params[i]
            if not hasattr(v, "shape") or not hasattr(v, "dtype"):
                v = _np.asarray(v)
            if _np.dtype(v.dtype) != _np.dtype(_DTYPES[p.dtype]):
                raise ArgumentError("%s (%s): an array of %s, expected %s (kern.jax converts "
                                    "nothing)" % (self._where(i), p.type_name, v.dtype,
                                                  _DTYPES[p.dtype]))
            arrays.append(v)
        statics = [None if i in idx else v for i, v in enumerate(values)]
        for i, p in enumerate(params):
            if not p.is_array and (_traced(statics[i]) or hasattr(statics[i], "shape")):
                try:
                    statics[i] = statics[i].item()
                except Exception:  # a traced scalar has no value to pass
                    raise ArgumentError("%s: a scalar is passed by value, and a traced one has "
                                        "none (make it a static argument of jax.jit)" %
                                        self._where(i)) from None
        shaped = list(values)  # the shapes of made outputs: from arrays or shapes=
        outs = []
        for i in op.outputs:
            shape = tuple(values[i].shape) if values[i] is not _MISSING else \
                op.shape_of(i, shaped)
            outs.append(_jax.ShapeDtypeStruct(shape, _np.dtype(_DTYPES[params[i].dtype])))
        call = _Call(self, idx, statics, outs)

        @_jax.custom_vjp
        def f(*arrays):
            return call.forward(arrays)

        def f_fwd(*arrays):
            res = call.forward(arrays)
            return res, (arrays, res)

        def f_bwd(res, grads):
            return call.backward(res[0], res[1], grads)

        f.defvjp(f_fwd, f_bwd)
        res = f(*arrays)
        return res[0] if len(res) == 1 else res


class _Call:
    """One call's forward and backward: eagerly on JAX's memory through DLPack when the
    arrays are concrete, else through jax.pure_callback on host arrays."""

    def __init__(self, fn, idx, statics, outs):
        self.fn, self.idx, self.statics, self.outs = fn, idx, statics, outs
        self.op = fn._op
        self.ctx = fn.context

    # ---- forward ----------------------------------------------------------------------

    def forward(self, arrays):
        if any(_traced(a) for a in arrays):
            return tuple(_jax.pure_callback(self._host_forward, tuple(self.outs), *arrays))
        self._check_devices(arrays)
        values = self._values(arrays)
        result = []
        for i, s in zip(self.op.outputs, self.outs):
            if values[i] is _MISSING:
                b = Buffer.zeros(s.shape, s.dtype, context=self.ctx)
                values[i] = b
            else:  # an updated array: a kern copy of the initial value, updated
                values[i] = _device_copy(self.ctx, self.op.params[i], values[i])
            result.append(values[i])
        self._launch(self.fn.kernel, values)
        return tuple(_from_buffer(r) for r in result)

    def _host_forward(self, *arrays):
        values = self._values([_np.asarray(a) for a in arrays])
        for i, s in zip(self.op.outputs, self.outs):
            values[i] = _np.zeros(s.shape, s.dtype) if values[i] is _MISSING else \
                _np.array(values[i], copy=True)
        self._launch_host(self.fn.kernel, values)
        return tuple(values[i] for i in self.op.outputs)

    # ---- backward ---------------------------------------------------------------------

    def backward(self, arrays, outs, grads):
        op = self.op
        diff = [i for i in self.idx if op.params[i].differentiable]
        if any(_traced(a) for a in tuple(arrays) + tuple(outs) + tuple(grads)):
            structs = tuple(_jax.ShapeDtypeStruct(arrays[self.idx.index(i)].shape,
                                                  _np.dtype(_DTYPES[op.params[i].dtype]))
                            for i in diff)
            got = _jax.pure_callback(self._host_backward, structs, *arrays, *outs, *grads) \
                if diff else ()
        else:
            self._check_devices(arrays)
            got = self._eager_backward(arrays, outs, grads, diff)
        got = dict(zip(diff, got))
        return tuple(got.get(i) for i in self.idx)

    def _adjoints(self, values, grads, zeros, copy):
        adj = {}
        for i, p in enumerate(self.op.params):
            if not p.differentiable:
                continue
            if not p.is_array:
                adj[i] = zeros((1,), _np.dtype(_DTYPES[p.dtype]))
            elif i in self.op.outputs:  # K.grad turns it into the adjoint before the write
                adj[i] = copy(i, grads[self.op.outputs.index(i)])
            else:
                adj[i] = zeros(tuple(values[i].shape), _np.dtype(_DTYPES[p.dtype]))
        return adj

    def _eager_backward(self, arrays, outs, grads, diff):
        values = self._values(arrays)
        for i, o in zip(self.op.outputs, outs):
            values[i] = o  # as K left them
        adj = self._adjoints(values, grads,
                             lambda s, d: Buffer.zeros(s, d, context=self.ctx),
                             lambda i, g: _device_copy(self.ctx, self.op.params[i], g))
        self._launch(self.op.grad_kernel(), values + [adj[i] for i in sorted(adj)])
        return [_from_buffer(adj[i]) for i in diff]

    def _host_backward(self, *flat):
        n, m = len(self.idx), len(self.op.outputs)
        arrays = [_np.asarray(a) for a in flat[:n]]
        outs = [_np.asarray(a) for a in flat[n:n + m]]
        grads = [_np.asarray(a) for a in flat[n + m:]]
        values = self._values(arrays)
        for i, o in zip(self.op.outputs, outs):
            values[i] = o
        adj = self._adjoints(values, grads, _np.zeros, lambda i, g: _np.array(g, copy=True))
        self._launch_host(self.op.grad_kernel(), values + [adj[i] for i in sorted(adj)])
        return tuple(adj[i] for i in self.idx if i in adj)

    # ---- the pieces -------------------------------------------------------------------

    def _values(self, arrays):
        values = list(self.statics)
        for i, a in zip(self.idx, arrays):
            values[i] = a
        for i in self.op.outputs:
            if i not in self.idx:
                values[i] = _MISSING
        return values

    def _check_devices(self, arrays):
        want = {"cpu"} if self.ctx.device == "cpu" else {"gpu", "cuda"}
        for i, a in zip(self.idx, arrays):
            if hasattr(a, "devices") or hasattr(a, "device"):
                got = _platform(a)
                if not got & want:
                    raise ArgumentError("%s: an array on %s, and the kernel runs on %s" %
                                        (self.fn._where(i), "/".join(sorted(got)),
                                         self.ctx.device))

    def _launch(self, kernel, values):
        kernel._run(values, {}, None)  # never on a kern.Tape: the op is JAX's to differentiate
        if not self.ctx.sync:
            self.ctx.synchronize()  # JAX reads the results next, unordered with kern's stream

    def _launch_host(self, kernel, values):
        """A launch on host arrays (pure_callback's): in place on the CPU; on CUDA through
        kern Buffers, the updated ones read back into the arrays."""
        if self.ctx.device == "cpu":
            self._launch(kernel, values)
            return
        bufs = [Buffer.from_array(_np.ascontiguousarray(v), context=self.ctx)
                if isinstance(v, _np.ndarray) else v for v in values]
        self._launch(kernel, bufs)
        for v, b in zip(values, bufs):
            if isinstance(b, Buffer) and v.flags.writeable:
                v[...] = b.read()


def function(kernel, shapes=None):
    """The kernel as a differentiable JAX function (jax.custom_vjp inside): its array
    parameters that it writes are outputs, the others inputs, as for kern.torch.function
    (shapes= makes outputs not given; a given one is the initial value of a copy that the
    kernel updates). Scalars are passed by value, without gradient."""
    return Function(kernel, shapes)
