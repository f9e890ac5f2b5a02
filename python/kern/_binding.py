"""A call's arguments: _Bound binds a kernel's parameters to the values given (used in
place, wrapped, or copied with a CopyWarning), checks and sets scalars (_set_scalar), and
writes copies back after the call (_write_back)."""

import ctypes
import warnings

from ._buffer import Buffer, _dlpack_import, _to_host
from ._errors import ArgumentError, CopyWarning, _check
from ._library import (_ARG_BUFFER, _ARG_SCALAR, _BOOL, _DTYPES, _F32, _INT_SCALARS,
                       _KERN_NAMES, _Arg, _c, _np)
from ._tape import _current_tape

_MISSING = object()
try:
    import numpy as _NP
except ImportError:  # NumPy is needed for arrays; kern Buffers work without it
    _NP = None


def _is_tensor_like(obj):
    return hasattr(obj, "__dlpack__") or hasattr(obj, "__array_interface__") or \
        hasattr(obj, "__array__")


class _Bound:
    """One call's arguments: kern_arg array, buffers made for it, copies to write back."""

    def __init__(self, kernel, args, kwargs):
        self.kernel = kernel
        ctx = kernel.module.context
        params = kernel.params
        n = len(params)
        if len(args) > n:
            raise ArgumentError("kernel '%s' takes %d arguments, got %d" %
                                (kernel.name, n, len(args)))
        values = list(args) + [_MISSING] * (n - len(args))
        index = kernel._index
        for k, v in kwargs.items():
            i = index.get(k)
            if i is None:
                i = index.get(k.replace("__", "."))  # x__grad= for the parameter x.grad
                if i is None:
                    raise ArgumentError("kernel '%s' has no parameter named '%s' (it has: %s)" %
                                        (kernel.name, k, ", ".join(p.name for p in params)))
            if values[i] is not _MISSING:
                raise ArgumentError("kernel '%s': parameter '%s' is given twice" %
                                    (kernel.name, params[i].name))
            values[i] = v
        missing = [p.name for p, v in zip(params, values) if v is _MISSING]
        if missing:
            raise ArgumentError("kernel '%s': missing argument%s %s" %
                                (kernel.name, "s" if len(missing) > 1 else "",
                                 ", ".join("'%s'" % m for m in missing)))
        self.c_args = c_args = (_Arg * max(n, 1))()
        self.temps = []      # Buffers made for this call only
        self.raw = []        # kern buffers wrapped for this call only (no Python object)
        self.copy_back = []  # (temporary buffer, the caller's array)
        self.tape = _current_tape()
        self.used_torch = False
        self.cuda_torch = []  # PyTorch CUDA tensors wrapped in place
        for i, p in enumerate(params):
            v = values[i]
            a = c_args[i]
            if p.is_array:
                a.kind = _ARG_BUFFER
                a.u.buffer = self._buffer(ctx, p, v)
            else:
                a.kind = _ARG_SCALAR
                a.dtype = p.dtype
                _set_scalar(kernel, p, a, v)

    def _wrap(self, ctx, p, v, ptr, shape):
        """Wraps the host memory of a live array for this call (the call keeps v alive; on a
        tape, the tape keeps it)."""
        out = ctypes.c_void_p()
        dims = (ctypes.c_int64 * p.rank)(*shape)
        _check(_c["buf_wrap"](ctx._ptr, p.dtype, p.rank, dims, ptr, None, None,
                              ctypes.byref(out)), ctx._ptr)
        if self.tape is None:
            self.raw.append(out.value)
            return out.value
        b = Buffer(ctx, out.value, p.dtype, shape, owner=v)
        self.tape._remember(v, b)
        return out.value

    def _buffer(self, ctx, p, v):
        """The kern buffer (a pointer) that parameter p gets for the value v."""
        kernel = self.kernel
        if type(v).__module__ == "torch":
            self.used_torch = True
            if ctx.device == "cuda" and getattr(v, "is_cuda", False):
                self.cuda_torch.append(v)  # ordered and recorded once per call
        if isinstance(v, Buffer):
            if v.context is not ctx:
                raise ArgumentError("kernel '%s', parameter '%s': the buffer belongs to another "
                                    "context" % (kernel.name, p.name))
            return v._live()
        tape = self.tape
        if tape is not None:
            b = tape._cached(v)
            if b is not None:
                return b._live()
        why = None
        if ctx.device == "cpu":
            # the fast paths: host memory of the right dtype and layout, used in place
            t = type(v)
            if _NP is not None and t is _NP.ndarray:
                if v.dtype == p.np_dtype and v.ndim == p.rank:
                    if not v.flags.c_contiguous:
                        why = "the array is not C-contiguous"
                    elif not v.flags.writeable and p.written:
                        why = "the array is read-only, and the kernel may write it"
                    else:
                        return self._wrap(ctx, p, v, v.__array_interface__["data"][0], v.shape)
            elif t.__module__ == "torch" and t.__name__ in ("Tensor", "Parameter"):
                if str(v.dtype) == p.torch_dtype and v.dim() == p.rank and \
                        v.device.type == "cpu" and v.is_contiguous() and not v.requires_grad:
                    return self._wrap(ctx, p, v, v.data_ptr(), tuple(v.shape))
        elif ctx.device == "cuda" and type(v).__module__ == "torch" and \
                type(v).__name__ in ("Tensor", "Parameter"):
            # PyTorch CUDA tensors: the device pointer itself; the streams are ordered once
            # per call (Kernel.__call__), and torch's allocator told about kern's stream
            if str(v.dtype) == p.torch_dtype and v.dim() == p.rank and v.is_cuda and \
                    v.device.index == 0 and v.is_contiguous() and not v.requires_grad:
                return self._wrap(ctx, p, v, v.data_ptr(), tuple(v.shape))
        if not _is_tensor_like(v):
            raise ArgumentError("kernel '%s', parameter '%s': expected an array (%s[%s]), got %s"
                                % (kernel.name, p.name, _KERN_NAMES[p.dtype],
                                   "," * (p.rank - 1), type(v).__name__))
        shape = getattr(v, "shape", None)
        dtype = _dtype_name(v)
        if dtype != _DTYPES[p.dtype]:
            why = "its dtype is %s, the parameter is %s" % (dtype, _KERN_NAMES[p.dtype])
        elif shape is not None and len(shape) != p.rank:
            raise ArgumentError("kernel '%s', parameter '%s': an array of rank %d, expected %s "
                                "(rank %d)" % (kernel.name, p.name, len(shape),
                                               _KERN_NAMES[p.dtype] + "[" + "," * (p.rank - 1)
                                               + "]", p.rank))
        if why is None:
            b, why = _dlpack_import(ctx, v)
            if b is not None:
                if tape is not None:
                    tape._remember(v, b)  # the tape keeps it: one array, one primal
                else:
                    self.temps.append(b)  # released after the call (freed after its launch)
                return b._live()
        np = _np()
        host = _to_host(v)
        if not np.can_cast(host.dtype, p.np_dtype, casting="same_kind"):
            raise ArgumentError("kernel '%s', parameter '%s': an array of %s cannot be converted "
                                "to %s without losing its meaning (kern converts only within a "
                                "kind, and up: bool to integers to floats)" %
                                (kernel.name, p.name, host.dtype, _KERN_NAMES[p.dtype]))
        if host.ndim != p.rank:
            raise ArgumentError("kernel '%s', parameter '%s': an array of rank %d, expected "
                                "rank %d" % (kernel.name, p.name, host.ndim, p.rank))
        # a copy, said once per place (warnings' default filter), written back after the call
        warnings.warn(CopyWarning("kernel '%s', parameter '%s': copied, not used in place (%s)"
                                  % (kernel.name, p.name, why)), stacklevel=4)
        a = np.ascontiguousarray(host, dtype=_DTYPES[p.dtype])
        b = Buffer._create(ctx, a.shape, p.dtype, a)
        self.temps.append(b)
        self.copy_back.append((b, v))
        if tape is not None:
            tape._remember(v, b)
            tape._keep.append(b)
            self.temps.pop()
        return b._live()

    def finish(self):
        for b, orig in self.copy_back:
            _write_back(orig, b.read())
        for b in self.temps:
            b.release()
        release = _c["buf_release"]
        for ptr in self.raw:
            release(ptr)


def _dtype_name(v):
    d = getattr(v, "dtype", None)
    if d is None:
        return _np().asarray(v).dtype.name
    return str(d).replace("torch.", "").replace("bool_", "bool")


def _write_back(orig, data):
    np = _np()
    if isinstance(orig, np.ndarray):
        if orig.flags.writeable:
            np.copyto(orig, data.astype(orig.dtype, copy=False))
    elif hasattr(orig, "copy_"):
        import torch
        with torch.no_grad():
            orig.copy_(torch.from_numpy(np.ascontiguousarray(data)).to(orig.dtype))


def _set_scalar(kernel, p, a, v):
    where = "kernel '%s', parameter '%s'" % (kernel.name, p.name)
    if hasattr(v, "shape") and getattr(v, "shape", None) not in ((), None):
        raise ArgumentError("%s: expected a scalar %s, got an array" %
                            (where, _KERN_NAMES[p.dtype]))
    if hasattr(v, "item"):
        v = v.item()
    if p.dtype == _BOOL:
        if not isinstance(v, bool):
            raise ArgumentError("%s: expected a bool, got %s" % (where, type(v).__name__))
        a.u.b = v
    elif p.dtype in _INT_SCALARS:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ArgumentError("%s: expected an integer (%s), got %s" %
                                (where, _KERN_NAMES[p.dtype], type(v).__name__))
        field, lo, hi = _INT_SCALARS[p.dtype]
        if not lo <= v <= hi:
            raise ArgumentError("%s: %d is out of range for %s" % (where, v,
                                                                   _KERN_NAMES[p.dtype]))
        setattr(a.u, field, v)
    else:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ArgumentError("%s: expected a number (%s), got %s" %
                                (where, _KERN_NAMES[p.dtype], type(v).__name__))
        if p.dtype == _F32:
            import math
            if math.isfinite(v) and abs(v) > 3.4028234663852886e38:
                raise ArgumentError("%s: %r is out of range for f32" % (where, v))
            a.u.f32 = v
        else:
            a.u.f64 = v
