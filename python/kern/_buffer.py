"""Buffers: Buffer (an array on a context's device), its NumPy view (_HostView: a DLPack
tensor of the runtime underneath, so the view keeps the memory), DLPack export
(__dlpack__ and the capsule destructor) and import (_dlpack_import, which wraps a
producer's memory in place), dtype codes, the extent checks made before any copy
(_check_extents), and _to_host (any array-like as a NumPy array)."""

import ctypes

from ._context import Context, _Made, context as _default_context
from ._errors import ArgumentError, _check, _python_words
from ._library import (_BF16, _DTYPES, _KERN_NAMES, _MAX_DIMS, _c, _capsule_get, _capsule_new,
                       _capsule_rename, _np)

_MAX_EXTENT = 2**31 - 1  # len() is i32 in the language (buffer.c's check_shape)
_KERN_ERR_UNSUPPORTED = 6


class Buffer(_Made):
    """An array on a context's device: made by kern (`Buffer.zeros`, `Buffer.from_array`,
    adjoints of a tape) or wrapping memory it does not own (NumPy arrays, DLPack tensors).
    `numpy()` views it without a copy on the CPU; `__dlpack__` lends it to PyTorch, JAX or
    CuPy without a copy. Both views keep the memory valid after `release()` and after the
    context's release; the buffer's own methods raise ArgumentError then.

    `dtype` is its NumPy dtype (a bf16 buffer's is uint16, its bits; `kern_dtype` says
    "bf16"), `shape` its shape, and len(buffer) its first extent, as for NumPy arrays."""

    _noun = "buffer"

    def __init__(self, ctx, ptr, dtype, shape, owner=None):
        self._code = dtype  # the kern_dtype
        self.shape = tuple(shape)
        self._owner = owner  # what keeps wrapped memory alive (the DLPack tensor owns it)
        self._made(ctx, ptr)

    @classmethod
    def zeros(cls, shape, dtype="float32", context=None):
        ctx = context or _default_context()
        shape = _shape_tuple(shape)
        code = _dtype_code(dtype)
        _check_extents(shape, code, "Buffer.zeros")
        return cls._create(ctx, shape, code, None, "Buffer.zeros")

    @classmethod
    def from_array(cls, array, context=None):
        """A buffer holding a copy of array (any array-like)."""
        ctx = context or _default_context()
        np = _np()
        shape, dtype = getattr(array, "shape", None), getattr(array, "dtype", None)
        if isinstance(dtype, np.dtype):  # checked before the copy, which may be large
            code = _dtype_code(dtype)
            if shape is not None:
                _check_extents(tuple(shape), code, "Buffer.from_array")
        a = np.ascontiguousarray(array)
        code = _dtype_code(a.dtype)
        _check_extents(a.shape, code, "Buffer.from_array")
        return cls._create(ctx, a.shape, code, a, "Buffer.from_array")

    @classmethod
    def _create(cls, ctx, shape, code, data, what):
        shape = _shape_tuple(shape)
        arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        p = ctypes.c_void_p()
        ptr = data.ctypes.data if data is not None else None
        _check(_c["buf_create"](ctx._live(what), code, len(shape), arr, ptr, ctypes.byref(p)),
               ctx._ptr, what)
        return cls(ctx, p.value, code, shape)

    @property
    def dtype(self):
        """The NumPy dtype of the buffer's elements (uint16 for bf16, its bits)."""
        return _np().dtype(_DTYPES[self._code])

    numpy_dtype = dtype  # the name before dtype was a NumPy dtype

    @property
    def kern_dtype(self):
        """The element type in kern's words: "f32", "i64", "bf16", ..."""
        return _KERN_NAMES[self._code]

    @property
    def ndim(self):
        return len(self.shape)

    def __len__(self):
        """The first extent, as len() of a NumPy array."""
        return self.shape[0]

    @property
    def nbytes(self):
        n = 1
        for s in self.shape:
            n *= s
        return n * self.numpy_dtype.itemsize

    def numpy(self):
        """The buffer as a NumPy array: a view of its memory on the CPU, which keeps the
        memory valid as long as it lives (after `release()` and the context's release too),
        a copy on other devices."""
        return self._numpy("Buffer.numpy")

    def _numpy(self, what):
        np = _np()
        p = self._live(what)
        if self.context.device != "cpu":
            return self._read(what)
        if self.nbytes == 0:
            return np.zeros(self.shape, self.numpy_dtype)
        # the runtime's DLPack export counts the view: a released buffer (or one of a
        # released context) is freed by the view's deleter, once the view is gone
        t = ctypes.c_void_p()
        status = _c["to_dlpack"](p, ctypes.byref(t))
        if status == _KERN_ERR_UNSUPPORTED:  # a runtime built without DLPack: the view
            return _KeepAlive(self._host_array(), self)  # keeps the Python buffer only
        _check(status, self.context._ptr, what)
        return np.asarray(_HostView(t.value, self._host_array().__array_interface__,
                                    self._owner))

    def _host_array(self):
        """A bare NumPy array over the buffer's host memory (the caller keeps it valid)."""
        np = _np()
        raw = (ctypes.c_char * self.nbytes).from_address(_c["buf_pointer"](self._ptr))
        return np.frombuffer(raw, dtype=self.numpy_dtype).reshape(self.shape)

    def __array__(self, dtype=None, copy=None):
        a = self._read("Buffer.__array__") if copy else self._numpy("Buffer.__array__")
        return a if dtype is None else a.astype(dtype, copy=False)

    def __dlpack_device__(self):
        self._live("Buffer.__dlpack_device__")
        return (1, 0) if self.context.device == "cpu" else (2, self.context.index)

    def __dlpack__(self, stream=None):
        """A DLPack capsule viewing the buffer (the buffer's memory stays valid until the
        consumer's tensor is gone, even if the buffer or its context is released first)."""
        t = ctypes.c_void_p()
        _check(_c["to_dlpack"](self._live("Buffer.__dlpack__"), ctypes.byref(t)),
               self.context._ptr, "Buffer.__dlpack__")
        return _capsule_new(t.value, b"dltensor", _CAPSULE_DESTRUCTOR_PTR)

    def read(self):
        """A copy of the buffer as a NumPy array."""
        return self._read("Buffer.read")

    def _read(self, what):
        np = _np()
        p = self._live(what)
        out = np.empty(self.shape, self.numpy_dtype)
        _check(_c["buf_read"](p, out.ctypes.data, out.nbytes), self.context._ptr, what)
        return out

    def write(self, array):
        """Copies array (of the buffer's shape; converted to its dtype) into the buffer."""
        np = _np()
        p = self._live("Buffer.write")
        shape = getattr(array, "shape", None)
        if shape is not None and tuple(shape) != self.shape:  # before a conversion's copy
            raise ArgumentError("Buffer.write: an array of shape %s, the buffer is %s"
                                % (tuple(shape), self.shape))
        a = np.ascontiguousarray(array, dtype=self.numpy_dtype)
        if a.shape != self.shape:
            raise ArgumentError("Buffer.write: an array of shape %s, the buffer is %s"
                                % (a.shape, self.shape))
        _check(_c["buf_write"](p, a.ctypes.data, a.nbytes), self.context._ptr, "Buffer.write")

    def copy_from(self, src):
        """Copies the kern Buffer src (same dtype and shape) into this one; src may belong to
        another context, on another device (kern_buffer_copy_from: GPU to GPU directly on
        CUDA, else through host memory). Waits for the launches that write src."""
        p = self._live("Buffer.copy_from")
        if not isinstance(src, Buffer):
            raise ArgumentError("Buffer.copy_from: the source must be a kern.Buffer, not %s "
                                "(Buffer.write copies an array)" % type(src).__name__)
        _check(_c["buf_copy_from"](p, src._live("Buffer.copy_from")), self.context._ptr,
               "Buffer.copy_from")

    def to(self, context):
        """A new buffer of context (a kern.Context, or a device string for its default
        context: "cuda:1") holding a copy of this one."""
        self._live("Buffer.to")
        ctx = _default_context(context) if isinstance(context, str) else context
        if not isinstance(ctx, Context):
            raise ArgumentError("Buffer.to: expected a kern.Context or a device string, got %s"
                                % type(context).__name__)
        b = Buffer._create(ctx, self.shape, self._code, None, "Buffer.to")
        b.copy_from(self)
        return b

    def release(self):
        """Releases the buffer now; memory that launches in flight or views use is freed
        after them. Its methods raise ArgumentError after it."""
        self._release_with(_c["buf_release"])

    def _gone_now(self, why):
        super()._gone_now(why)
        self._owner = None

    def __repr__(self):
        return "kern.Buffer(%s%s, %s%s)" % (_KERN_NAMES[self._code], list(self.shape),
                                             self.context._where(),
                                             "" if self._ptr else ", released")


class _HostView:
    """The base of a NumPy view of a buffer's host memory: it holds a DLPack tensor that
    the runtime made of the buffer (kern_buffer_to_dlpack), which counts as a view of it,
    and calls the tensor's deleter when the NumPy array is gone; the runtime frees a
    released buffer with its last view, as it does for PyTorch's."""

    def __init__(self, tensor, interface, owner):
        self.__array_interface__ = interface
        self._tensor = tensor
        self._deleter = _PY_DELETER(_DLManagedTensor.from_address(tensor).deleter)
        self._owner = owner  # wrapped memory's owner (a NumPy array) lives as long

    def __del__(self):
        t, self._tensor = self._tensor, None
        if t:
            self._deleter(t)


class _KeepAlive:
    """Hands out a NumPy view that keeps its Python buffer alive (as the view's base): the
    view of a runtime built without DLPack, which a release does not wait for."""

    def __new__(cls, view, owner):
        np = _np()

        class _Base:
            pass
        base = _Base()
        base.__array_interface__ = dict(view.__array_interface__)
        base.owner = owner
        return np.asarray(base)


def _shape_tuple(shape):
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def _check_extents(shape, code, what):
    """A buffer's shape as the runtime checks it (buffer.c, check_shape), before anything
    is copied: a broadcast array of 2**31 elements is refused before its 8 GiB copy."""
    if not 1 <= len(shape) <= _MAX_DIMS:
        raise ArgumentError("%s: rank %d is not supported (rank 1 to %d)"
                            % (what, len(shape), _MAX_DIMS))
    count = 1
    for d, n in enumerate(shape):
        if n < 0:
            raise ArgumentError("%s: extent %d of dimension %d is negative" % (what, n, d))
        if n > _MAX_EXTENT:
            raise ArgumentError("%s: extent %d of dimension %d is too large (at most %d: len() "
                                "is i32)" % (what, n, d, _MAX_EXTENT))
        count *= n
    if count * _np().dtype(_DTYPES[code]).itemsize > 2**63 - 1:
        raise ArgumentError("%s: the array is too large to address" % what)


# A capsule destructor for the tensors kern exports: calls the deleter unless a consumer
# took the tensor (renamed the capsule "used_dltensor"). It receives the dying capsule as a
# raw pointer: turning it into a Python object again would revive it mid-deallocation.
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", ctypes.c_byte * 48), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_raw_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_raw_is_valid.restype, _raw_is_valid.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
_raw_get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
# the deleter is called with the GIL held, as every call of the runtime is (_library's PyDLL)
_PY_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


@_DESTRUCTOR
def _capsule_destructor(capsule):
    if _raw_is_valid(capsule, b"dltensor"):
        p = _raw_get(capsule, b"dltensor")
        mt = _DLManagedTensor.from_address(p)
        if mt.deleter:
            _PY_DELETER(mt.deleter)(p)


_CAPSULE_DESTRUCTOR_PTR = ctypes.cast(_capsule_destructor, ctypes.c_void_p)


def _dtype_code(dtype):
    if isinstance(dtype, int):
        return dtype
    if str(dtype) in ("bfloat16", "bf16"):  # a DLPack producer's (PyTorch, JAX), or by name
        return _BF16
    name = _np().dtype(dtype).name
    for code, n in _DTYPES.items():  # uint16 is u16 (a bf16 array binds its bits as well)
        if n == name:
            return code
    raise ArgumentError("dtype %s is not a kern dtype (bool, int8, uint8, int16, uint16, int32, "
                        "uint32, int64, uint64, float16, float32, float64; bf16 as uint16 bits)"
                        % name)


# ---- DLPack import -------------------------------------------------------------------

def _dlpack_import(ctx, obj):
    """Wraps a DLPack producer's memory in place; None when it cannot be (the reason)."""
    if not hasattr(obj, "__dlpack__"):
        return None, "it has no __dlpack__"
    if getattr(obj, "requires_grad", False) and hasattr(obj, "detach"):
        obj = obj.detach()  # the same memory
    cap = None
    if ctx.device == "cuda" and not ctx.sync:
        try:  # the producer makes kern's stream wait for its work (DLPack's stream argument)
            cap = obj.__dlpack__(stream=ctx.cuda_stream)
        except TypeError:
            cap = None
        except (BufferError, RuntimeError, ValueError) as e:
            return None, str(e)
    if cap is None:
        if ctx.device == "cuda":
            _cuda_ready(obj)
        try:
            cap = obj.__dlpack__()
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            return None, str(e)
    p = _capsule_get(cap, b"dltensor")
    out = ctypes.c_void_p()
    status = _c["from_dlpack"](ctx._live("a DLPack tensor used in place"), p, ctypes.byref(out))
    if status != 0:
        return None, _python_words(_c["last_error"](ctx._ptr).decode())
    _capsule_rename(cap, b"used_dltensor")  # the buffer owns the tensor now
    code = _DLPACK_DTYPES_FROM(obj)
    return Buffer(ctx, out.value, code, tuple(int(s) for s in obj.shape), owner=cap), None


def _host_memory(v):
    """Whether v's memory is the host's: a NumPy array, or a DLPack producer on kDLCPU
    (PyTorch CPU tensors) or kDLCUDAHost."""
    if isinstance(v, _np().ndarray):
        return True
    try:
        return v.__dlpack_device__()[0] in (1, 3)
    except (AttributeError, TypeError, ValueError, RuntimeError, BufferError):
        return False


def _DLPACK_DTYPES_FROM(obj):
    name = str(obj.dtype).replace("torch.", "")
    return _dtype_code(name)


def _cuda_ready(obj):
    """Work queued on the producer's stream finishes before kern's stream reads it."""
    if hasattr(obj, "block_until_ready"):
        obj.block_until_ready()
    elif type(obj).__module__.startswith("torch") and getattr(obj, "is_cuda", False):
        import torch
        torch.cuda.synchronize(obj.device)
    elif type(obj).__module__.startswith("cupy"):
        import cupy
        cupy.cuda.get_current_stream().synchronize()


def _to_host(v):
    np = _np()
    if hasattr(v, "detach"):
        v = v.detach()
    if hasattr(v, "cpu") and not isinstance(v, np.ndarray):
        v = v.cpu()
    if hasattr(v, "numpy") and not isinstance(v, np.ndarray):
        return v.numpy()
    return np.asarray(v)
