"""A call's arguments: _Bound binds a kernel's parameters to the values given (used in
place, wrapped, or copied with a CopyWarning), checks and sets scalars (_set_scalar), and
writes copies back after the call (_write_back)."""

import ctypes
import warnings

from ._buffer import Buffer, _check_extents, _dlpack_import, _host_memory, _to_host
from ._errors import ArgumentError, CopyWarning, _check
from ._library import (_ARG_BUFFER, _ARG_SCALAR, _BOOL, _DTYPES, _F32, _INT_SCALARS,
                       _KERN_NAMES, _Arg, _c, _np)

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

    def __init__(self, kernel, args, kwargs, tape):
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
        self.buffers = []    # the kern Buffers given as arguments (a tape keeps them)
        self.values = values  # what the call was given (a graph keeps them alive)
        self.tape = tape  # the tape recording the call, or None
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

    def _wrap(self, ctx, p, v, ptr, shape, key):
        """Wraps the host memory of a live array for this call (the call keeps v alive; on a
        tape, the tape keeps it, as the primal of key: the caller's object)."""
        out = ctypes.c_void_p()
        dims = (ctypes.c_int64 * p.rank)(*shape)
        where = "kernel '%s', parameter '%s'" % (self.kernel.name, p.name)
        _check(_c["buf_wrap"](ctx._live(where), p.dtype, p.rank, dims, ptr, None, None,
                              ctypes.byref(out)), ctx._ptr, where)
        if self.tape is None:
            self.raw.append(out.value)
            return out.value
        b = Buffer(ctx, out.value, p.dtype, shape, owner=v)
        self.tape._remember(key, b)
        return out.value

    def _buffer(self, ctx, p, v):
        """The kern buffer (a pointer) that parameter p gets for the value v."""
        kernel = self.kernel
        where = "kernel '%s', parameter '%s'" % (kernel.name, p.name)
        if type(v).__module__ == "torch":
            self.used_torch = True
            if ctx.device == "cuda" and getattr(v, "is_cuda", False):
                self.cuda_torch.append(v)  # ordered and recorded once per call
        if isinstance(v, Buffer):
            if v.context is not ctx:
                raise ArgumentError("kernel '%s', parameter '%s': the buffer belongs to another "
                                    "context" % (kernel.name, p.name))
            self.buffers.append(v)
            return v._live(where)
        tape = self.tape
        if tape is not None:
            b = tape._cached(v)
            if b is not None:
                return b._live(where)
        key = v  # the caller's object: one primal on a tape, written back after a copy
        if p.view is not None:
            if p.view.rank == 0 and _NP is not None and type(v).__module__ != "torch" and \
                    not (type(v) is _NP.ndarray and v.dtype == p.np_dtype and
                         v.shape == p.tail and v.flags.c_contiguous and ctx.device == "cpu"):
                # a vector, matrix or struct passed by value, not as an array that can be used
                # in place: a buffer of its own (a value: no CopyWarning)
                return self._new_buffer(ctx, p, self._value(p, v), key)._live(where)
            v = self._view_value(p, v)
            if hasattr(v, "shape"):
                self._check_shape(p, tuple(v.shape), _dtype_name(v))
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
                        return self._wrap(ctx, p, v, v.__array_interface__["data"][0], v.shape,
                                          key)
            elif t.__module__ == "torch" and t.__name__ in ("Tensor", "Parameter"):
                if str(v.dtype) == p.torch_dtype and v.dim() == p.rank and \
                        v.device.type == "cpu" and v.is_contiguous() and not v.requires_grad:
                    return self._wrap(ctx, p, v, v.data_ptr(), tuple(v.shape), key)
        elif ctx.device == "cuda" and type(v).__module__ == "torch" and \
                type(v).__name__ in ("Tensor", "Parameter"):
            # PyTorch CUDA tensors: the device pointer itself; the streams are ordered once
            # per call (Kernel.__call__), and torch's allocator told about kern's stream
            if str(v.dtype) == p.torch_dtype and v.dim() == p.rank and v.is_cuda and \
                    v.device.index == ctx.index and v.is_contiguous() and not v.requires_grad:
                return self._wrap(ctx, p, v, v.data_ptr(), tuple(v.shape), key)
        if not _is_tensor_like(v):
            raise ArgumentError("kernel '%s', parameter '%s': expected an array (%s), got %s"
                                % (kernel.name, p.name, _declared(p), type(v).__name__))
        shape = getattr(v, "shape", None)
        dtype = _dtype_name(v)
        if shape is not None:
            self._check_shape(p, tuple(shape), dtype)
        if dtype != _DTYPES[p.dtype]:
            why = "its dtype is %s, the parameter is %s" % (dtype, _KERN_NAMES[p.dtype] if
                                                             p.view is None else _declared(p))
        if why is None and ctx.device != "cpu" and _host_memory(v):
            # a GPU context cannot use host memory in place: the copy is the only way
            why = "host memory on a %s context: copied to the device and back (a kern.Buffer " \
                  "stays on the device)" % ctx.device
        if why is None:
            b, why = _dlpack_import(ctx, v)
            if b is not None:
                if tape is not None:
                    tape._remember(key, b)  # the tape keeps it: one array, one primal
                else:
                    self.temps.append(b)  # released after the call (freed after its launch)
                return b._live(where)
        np = _np()
        host = _to_host(v)
        if not np.can_cast(host.dtype, p.np_dtype, casting="same_kind"):
            raise ArgumentError("kernel '%s', parameter '%s': an array of %s cannot be converted "
                                "to %s without losing its meaning (kern converts only within a "
                                "kind, and up: bool to integers to floats)" %
                                (kernel.name, p.name, host.dtype, _KERN_NAMES[p.dtype]))
        self._check_shape(p, host.shape, host.dtype)
        # a copy, said once per place (warnings' default filter), written back after the call
        warnings.warn(CopyWarning("kernel '%s', parameter '%s': copied, not used in place (%s)"
                                  % (kernel.name, p.name, why)), stacklevel=4)
        b = self._new_buffer(ctx, p, np.ascontiguousarray(host, dtype=_DTYPES[p.dtype]), key)
        self.copy_back.append((b, v))  # v: a structured array's component view writes it
        return b._live(where)

    def _new_buffer(self, ctx, p, a, key):
        """A buffer holding a copy of the NumPy array a, for this call or (on a tape) the
        tape's life, as the primal of key."""
        b = Buffer._create(ctx, a.shape, p.dtype, a, "kernel '%s', parameter '%s'"
                           % (self.kernel.name, p.name))
        if self.tape is not None:
            self.tape._remember(key, b)
        else:
            self.temps.append(b)
        return b

    def _check_shape(self, p, shape, dtype):
        """The rank, and the trailing extents of a vector, matrix or struct parameter; every
        extent as the runtime will check it (before a copy, which may be large)."""
        n = len(p.tail)
        if p.view is None and len(shape) != p.rank:
            raise ArgumentError("kernel '%s', parameter '%s': an array of rank %d, expected %s "
                                "(rank %d)" % (self.kernel.name, p.name, len(shape), p.type_name,
                                               p.rank))
        if len(shape) != p.rank or (n and tuple(shape[len(shape) - n:]) != p.tail):
            raise ArgumentError("kernel '%s', parameter '%s' (%s): expected an array of shape "
                                "%s, got %s of shape %s" %
                                (self.kernel.name, p.name, p.type_name,
                                 p.shape_text + ("" if p.view and p.view.struct else
                                                 " of " + _DTYPES[p.dtype]),
                                 dtype, tuple(shape)))
        _check_extents(tuple(int(s) for s in shape), p.dtype,
                       "kernel '%s', parameter '%s'" % (self.kernel.name, p.name))

    def _where(self, p):
        return "kernel '%s', parameter '%s' (%s)" % (self.kernel.name, p.name, p.type_name)

    def _view_value(self, p, v):
        """A structured array of the struct's dtype as its components (a view: used in
        place); other values as they are."""
        np = _NP
        if np is not None and isinstance(v, np.ndarray) and v.dtype.names is not None:
            if p.view.struct is None:
                raise ArgumentError("%s: a structured array binds only to a struct parameter; "
                                    "expected an array of shape %s of %s" %
                                    (self._where(p), p.shape_text, _DTYPES[p.dtype]))
            return p.view.components(self._where(p), v)
        return v

    def _value(self, p, v):
        """A vector, matrix or struct passed by value (numbers in a tuple, a list or an
        array; a record of the struct's dtype) as a new C-contiguous array."""
        np = _NP
        want = p.shape_text if p.view.struct else "%s numbers of shape %s" % (_DTYPES[p.dtype],
                                                                               p.shape_text)
        if isinstance(v, np.void) or (isinstance(v, np.ndarray) and v.dtype.names is not None):
            v = self._view_value(p, np.asarray(v))
        elif isinstance(v, Buffer) or not (_is_tensor_like(v) or isinstance(v, (list, tuple))):
            raise ArgumentError("%s: expected %s, got %s" % (self._where(p), want,
                                                             type(v).__name__))
        try:
            a = np.asarray(_to_host(v))
        except (TypeError, ValueError) as e:
            raise ArgumentError("%s: expected %s (%s)" % (self._where(p), want, e)) from None
        if a.shape != p.tail or a.dtype.kind not in "biuf" or \
                not np.can_cast(a.dtype, p.np_dtype, casting="same_kind"):
            raise ArgumentError("%s: expected %s, got %s of shape %s" %
                                (self._where(p), want, a.dtype, a.shape))
        return np.ascontiguousarray(a, dtype=p.np_dtype)

    def finish(self):
        for b, orig in self.copy_back:
            _write_back(orig, b.read())
        for b in self.temps:
            b.release()
        release = _c["buf_release"]
        for ptr in self.raw:
            release(ptr)


def _declared(p):
    """The declared type; for a vector, matrix or struct type also its memory's."""
    if p.view is None:
        return p.type_name
    return "%s, in memory %s[%s]" % (p.type_name, _KERN_NAMES[p.dtype], "," * (p.rank - 1))


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
