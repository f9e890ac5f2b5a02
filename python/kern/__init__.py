"""kern from Python: compile .kern files, call their kernels on NumPy arrays and DLPack
tensors (PyTorch, JAX, CuPy) without copies, and get gradients through a tape.

    import numpy as np, kern
    mod = kern.compile("examples/simulate.kern")        # JIT, on the default CPU context
    x0 = np.linspace(-1, 1, 8, dtype=np.float32)
    w = np.full(16, 0.5, np.float32)
    out = np.zeros(8, np.float32)
    mod.simulate(x0=x0, w=w, out=out, steps=16)          # out is written in place

    with kern.Tape() as tape:
        mod.simulate(x0=x0, w=w, out=out, steps=16)
    tape.backward(seeds=[(out, np.ones(8, np.float32))])  # dL/d(out) = 1
    dx0 = tape.grad(x0)                                   # dL/d(x0), a NumPy array

The package is a thin layer over the C API of include/kern.h (libkern-jit, through
ctypes; no compiled extension). docs/python.md is the user's guide.
"""

import ctypes
import os
import threading
import warnings
import weakref

try:
    from . import _config
    _LIBRARY = _config.LIBRARY
except ImportError:  # the source tree (no _config.py): KERN_LIBRARY names the library
    _LIBRARY = None

__all__ = [
    "Context", "Module", "Kernel", "Buffer", "Tape", "Error", "ArgumentError",
    "NotFoundError", "IOError", "FormatError", "CompileError", "UnsupportedError",
    "DeviceError", "OutOfMemoryError", "InternalError", "CopyWarning", "context",
    "compile", "load", "gradcheck", "synchronize", "version",
]

# ---- the library ---------------------------------------------------------------------
#
# PyDLL, not CDLL: the GIL stays held during calls, because the runtime may call a DLPack
# deleter (NumPy's touches Python objects) from inside any call that retires memory.

_path = os.environ.get("KERN_LIBRARY", _LIBRARY)
if not _path:
    raise ImportError("kern: no library: set KERN_LIBRARY to libkern-jit.so.0 (the build tree's "
                      "package, PYTHONPATH=build/python, knows where it is)")
_lib = ctypes.PyDLL(_path)

_BOOL, _I32, _U32, _I64, _F32, _F64 = 1, 2, 3, 4, 5, 6
_DTYPES = {_BOOL: "bool", _I32: "int32", _U32: "uint32", _I64: "int64", _F32: "float32",
           _F64: "float64"}
_KERN_NAMES = {_BOOL: "bool", _I32: "i32", _U32: "u32", _I64: "i64", _F32: "f32",
               _F64: "f64"}
_BACKENDS = {"cpu": 0, "cuda": 1, "vulkan": 3}
_ARG_BUFFER, _ARG_SCALAR = 1, 2
_MAX_DIMS = 4


class _Options(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("debug", ctypes.c_bool), ("threads", ctypes.c_int),
                ("ad_stack_size", ctypes.c_int64)]


class _ParamInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("is_array", ctypes.c_bool), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("nograd", ctypes.c_bool)]


class _ArgValue(ctypes.Union):
    _fields_ = [("buffer", ctypes.c_void_p), ("b", ctypes.c_bool), ("i32", ctypes.c_int32),
                ("u32", ctypes.c_uint32), ("i64", ctypes.c_int64), ("f32", ctypes.c_float),
                ("f64", ctypes.c_double)]


class _Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("dtype", ctypes.c_int), ("u", _ArgValue)]


def _fn(name, res, *args):
    f = getattr(_lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_MISSING = object()
try:
    import numpy as _NP
except ImportError:  # NumPy is needed for arrays; kern Buffers work without it
    _NP = None
_vp, _int, _st = ctypes.c_void_p, ctypes.c_int, ctypes.c_int
_pvp = ctypes.POINTER(ctypes.c_void_p)
_i64p = ctypes.POINTER(ctypes.c_int64)
_c = {
    "version": _fn("kern_version", _int, ctypes.POINTER(ctypes.c_char_p)),
    "ctx_create": _fn("kern_context_create", _st, ctypes.POINTER(_Options), _pvp),
    "ctx_release": _fn("kern_context_release", None, _vp),
    "last_error": _fn("kern_context_last_error", ctypes.c_char_p, _vp),
    "device_name": _fn("kern_context_device_name", ctypes.c_char_p, _vp),
    "cuda_stream": _fn("kern_context_cuda_stream", _vp, _vp),
    "sync": _fn("kern_sync", _st, _vp),
    "buf_create": _fn("kern_buffer_create", _st, _vp, _int, _int, _i64p, _vp, _pvp),
    "buf_wrap": _fn("kern_buffer_wrap", _st, _vp, _int, _int, _i64p, _vp, _vp, _vp, _pvp),
    "buf_read": _fn("kern_buffer_read", _st, _vp, _vp, ctypes.c_size_t),
    "buf_write": _fn("kern_buffer_write", _st, _vp, _vp, ctypes.c_size_t),
    "buf_release": _fn("kern_buffer_release", None, _vp),
    "buf_pointer": _fn("kern_buffer_pointer", _vp, _vp),
    "from_dlpack": _fn("kern_buffer_from_dlpack", _st, _vp, _vp, _pvp),
    "to_dlpack": _fn("kern_buffer_to_dlpack", _st, _vp, _pvp),
    "mod_load": _fn("kern_module_load_file", _st, _vp, ctypes.c_char_p, _pvp),
    "mod_source": _fn("kern_module_from_source", _st, _vp, ctypes.c_char_p, ctypes.c_size_t,
                      ctypes.c_char_p, _pvp),
    "mod_file": _fn("kern_module_from_file_source", _st, _vp, ctypes.c_char_p, _pvp),
    "mod_release": _fn("kern_module_release", None, _vp),
    "mod_count": _fn("kern_module_kernel_count", _int, _vp),
    "mod_name": _fn("kern_module_kernel_name", ctypes.c_char_p, _vp, _int),
    "find": _fn("kern_kernel_find", _st, _vp, ctypes.c_char_p, _pvp),
    "nparams": _fn("kern_kernel_param_count", _int, _vp),
    "param": _fn("kern_kernel_param", _st, _vp, _int, ctypes.POINTER(_ParamInfo)),
    "written": _fn("kern_kernel_param_written", _int, _vp, _int),
    "launch": _fn("kern_launch", _st, _vp, ctypes.POINTER(_Arg), _int),
    "tape_create": _fn("kern_tape_create", _st, _vp, _pvp),
    "tape_destroy": _fn("kern_tape_destroy", None, _vp),
    "tape_set_grad": _fn("kern_tape_set_grad", _st, _vp, _vp, _vp),
    "tape_grad": _fn("kern_tape_grad", _st, _vp, _vp, _pvp),
    "tape_launch": _fn("kern_tape_launch", _st, _vp, _vp, ctypes.POINTER(_Arg), _int),
    "tape_backward": _fn("kern_tape_backward", _st, _vp),
    "tape_scalar_grad": _fn("kern_tape_scalar_grad", _st, _vp, _int, _int,
                            ctypes.POINTER(ctypes.c_double)),
    "tape_clear": _fn("kern_tape_clear", _st, _vp),
    "tape_count": _fn("kern_tape_record_count", _int, _vp),
}

_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype, _capsule_get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_rename = ctypes.pythonapi.PyCapsule_SetName
_capsule_rename.restype, _capsule_rename.argtypes = ctypes.c_int, [ctypes.py_object,
                                                                    ctypes.c_char_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p,
                                                                  ctypes.c_char_p,
                                                                  ctypes.c_void_p]


def version():
    """The library's version string ("0.1.0")."""
    s = ctypes.c_char_p()
    _c["version"](ctypes.byref(s))
    return s.value.decode()


# ---- errors --------------------------------------------------------------------------

class Error(Exception):
    """A failed call of the runtime: the message is the runtime's (kernel, parameter, .kern
    line); `status` is the kern_status name."""

    status = "KERN_ERR"


class ArgumentError(Error, ValueError):
    status = "KERN_ERR_ARGUMENT"


class NotFoundError(Error, LookupError):
    status = "KERN_ERR_NOT_FOUND"


class IOError(Error, OSError):  # noqa: A001 - the runtime's name
    status = "KERN_ERR_IO"


class FormatError(Error, ValueError):
    status = "KERN_ERR_FORMAT"


class CompileError(Error, SyntaxError):
    status = "KERN_ERR_COMPILE"


class UnsupportedError(Error, NotImplementedError):
    status = "KERN_ERR_UNSUPPORTED"


class DeviceError(Error, RuntimeError):
    status = "KERN_ERR_DEVICE"


class OutOfMemoryError(Error, MemoryError):
    status = "KERN_ERR_OUT_OF_MEMORY"


class InternalError(Error, RuntimeError):
    status = "KERN_ERR_INTERNAL"


class CopyWarning(UserWarning):
    """An argument could not be used in place and was copied (wrong dtype, not contiguous,
    read-only, another device); the message names the kernel and the parameter."""


_ERRORS = {1: ArgumentError, 2: NotFoundError, 3: IOError, 4: FormatError, 5: CompileError,
           6: UnsupportedError, 7: DeviceError, 8: OutOfMemoryError, 9: InternalError}


def _check(status, ctx_ptr, what=None):
    if status == 0:
        return
    msg = _c["last_error"](ctx_ptr).decode(errors="replace") if ctx_ptr else ""
    if not msg:
        msg = what or "the call failed"
    # the C API's name for the adstack option, in Python's words
    msg = msg.replace("kern_context_options.ad_stack_size = ", "kern.Context(ad_stack_size=")
    if "kern.Context(ad_stack_size=" in msg:
        import re
        msg = re.sub(r"kern\.Context\(ad_stack_size=(\d+)", r"kern.Context(ad_stack_size=\1)", msg)
    raise _ERRORS.get(status, Error)(msg)


# ---- contexts ------------------------------------------------------------------------

class Context:
    """A device and everything made on it: `Context("cpu")`, `Context("cuda")` (device 0),
    `Context("vulkan")`. Options: threads (CPU workers, 0 = all), debug (bounds, division
    and shift checks in JIT code), ad_stack_size (adstack capacity of unbounded loops).
    A context is used by one thread at a time.

    sync (GPUs): True (the default) makes every call wait for the producers' work before and
    for its own kernels after, so any consumer sees the results. sync=False orders by
    streams instead, without waiting: DLPack producers make kern's CUDA stream wait for
    their work (__dlpack__(stream=...)), and after a call PyTorch's current stream waits
    for kern's; other consumers must call synchronize() before reading results.

    debug is on by default, as `kernc run` checks bounds by default: an index out of
    bounds, a division by zero or a bad shift raises DeviceError with the .kern line
    instead of corrupting memory. Context(debug=False) compiles without the checks (faster:
    for code that is known to be right)."""

    def __init__(self, device="cpu", threads=0, debug=True, ad_stack_size=0, sync=True):
        self.sync = bool(sync)
        self._torch_stream = None
        if device not in _BACKENDS:
            raise ArgumentError("unknown device %r (cpu, cuda, vulkan)" % (device,))
        opts = _Options(_BACKENDS[device], bool(debug), int(threads), int(ad_stack_size))
        p = ctypes.c_void_p()
        status = _c["ctx_create"](ctypes.byref(opts), ctypes.byref(p))
        self._ptr = p.value
        self.device = device
        self._objects = weakref.WeakSet()  # modules and buffers, released before the context
        if status != 0:
            msg = _c["last_error"](self._ptr).decode() if self._ptr else "out of memory"
            self.release()
            raise _ERRORS.get(status, Error)(msg)

    @property
    def device_name(self):
        return _c["device_name"](self._ptr).decode()

    def synchronize(self):
        """Waits for every launch of the context (and reports a device error)."""
        _check(_c["sync"](self._ptr), self._ptr)

    @property
    def cuda_stream(self):
        """The CUstream kern's CUDA work goes to, as an int (None off CUDA)."""
        return _c["cuda_stream"](self._live()) if self.device == "cuda" else None

    def _kern_stream(self):
        import torch
        if self._torch_stream is None:
            self._torch_stream = torch.cuda.ExternalStream(self.cuda_stream)
        return self._torch_stream

    def _before_torch_call(self):
        """PyTorch CUDA tensors used in place: their pending work first (kern's stream waits
        for PyTorch's current one; sync=True waits on the host)."""
        import torch
        if self.sync:
            torch.cuda.current_stream().synchronize()
        else:
            self._kern_stream().wait_stream(torch.cuda.current_stream())

    def _after_call(self, used_torch, cuda_torch=()):
        """A GPU call's end: wait (sync=True) or order PyTorch's stream after kern's, and
        keep PyTorch's allocator from reusing the tensors' memory before kern is done."""
        if self.sync:
            self.synchronize()
        elif used_torch:
            import torch
            ks = self._kern_stream()
            for v in cuda_torch:
                v.record_stream(ks)
            torch.cuda.current_stream().wait_stream(ks)

    def release(self):
        """Frees the context with its modules and buffers (also at garbage collection)."""
        if getattr(self, "_ptr", None):
            for o in list(self._objects):
                o._forget()
            self._objects = weakref.WeakSet()
            _c["ctx_release"](self._ptr)
            self._ptr = None

    def __del__(self):
        self.release()

    def _live(self):
        if not self._ptr:
            raise ArgumentError("the context was released")
        return self._ptr

    def __repr__(self):
        return "kern.Context(%r)" % self.device


_default = {}
_default_lock = threading.Lock()


def context(device="cpu"):
    """The default context of a device, created on first use."""
    with _default_lock:
        if device not in _default:
            _default[device] = Context(device)
        return _default[device]


def synchronize(device="cpu"):
    context(device).synchronize()


# ---- buffers -------------------------------------------------------------------------

def _np():
    import numpy
    return numpy


class Buffer:
    """An array on a context's device: made by kern (`Buffer.zeros`, `Buffer.from_array`,
    adjoints of a tape) or wrapping memory it does not own (NumPy arrays, DLPack tensors).
    `numpy()` views it without a copy on the CPU; `__dlpack__` lends it to PyTorch, JAX or
    CuPy without a copy."""

    def __init__(self, ctx, ptr, dtype, shape, owner=None):
        self.context = ctx
        self._ptr = ptr
        self.dtype = dtype
        self.shape = tuple(shape)
        self._owner = owner  # what keeps wrapped memory alive (the DLPack tensor owns it)
        ctx._objects.add(self)

    @classmethod
    def zeros(cls, shape, dtype="float32", context=None):
        ctx = context or globals()["context"]()
        return cls._create(ctx, shape, _dtype_code(dtype), None)

    @classmethod
    def from_array(cls, array, context=None):
        """A buffer holding a copy of array (any array-like)."""
        ctx = context or globals()["context"]()
        np = _np()
        a = np.ascontiguousarray(array)
        code = _dtype_code(a.dtype)
        return cls._create(ctx, a.shape, code, a)

    @classmethod
    def _create(cls, ctx, shape, code, data):
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        p = ctypes.c_void_p()
        ptr = data.ctypes.data if data is not None else None
        _check(_c["buf_create"](ctx._live(), code, len(shape), arr, ptr, ctypes.byref(p)),
               ctx._ptr)
        return cls(ctx, p.value, code, shape)

    @property
    def numpy_dtype(self):
        return _np().dtype(_DTYPES[self.dtype])

    @property
    def nbytes(self):
        n = 1
        for s in self.shape:
            n *= s
        return n * self.numpy_dtype.itemsize

    def _live(self):
        if not self._ptr:
            raise ArgumentError("the buffer was released")
        return self._ptr

    def numpy(self):
        """The buffer as a NumPy array: a view of its memory on the CPU (valid while the
        buffer lives; it keeps the buffer alive), a copy on other devices."""
        np = _np()
        if self.context.device == "cpu":
            p = _c["buf_pointer"](self._live())
            if not p or self.nbytes == 0:
                return np.zeros(self.shape, self.numpy_dtype)
            raw = (ctypes.c_char * self.nbytes).from_address(p)
            view = np.frombuffer(raw, dtype=self.numpy_dtype).reshape(self.shape)
            return _KeepAlive(view, self)
        out = np.empty(self.shape, self.numpy_dtype)
        _check(_c["buf_read"](self._live(), out.ctypes.data, out.nbytes), self.context._ptr)
        return out

    def __array__(self, dtype=None):
        a = _np().asarray(self.numpy())
        return a if dtype is None else a.astype(dtype)

    def __dlpack_device__(self):
        return (1, 0) if self.context.device == "cpu" else (2, 0)

    def __dlpack__(self, stream=None):
        """A DLPack capsule viewing the buffer (the buffer's memory stays valid until the
        consumer's tensor is gone, even if the buffer is released first)."""
        t = ctypes.c_void_p()
        _check(_c["to_dlpack"](self._live(), ctypes.byref(t)), self.context._ptr)
        return _capsule_new(t.value, b"dltensor", _CAPSULE_DESTRUCTOR_PTR)

    def read(self):
        np = _np()
        out = np.empty(self.shape, self.numpy_dtype)
        _check(_c["buf_read"](self._live(), out.ctypes.data, out.nbytes), self.context._ptr)
        return out

    def write(self, array):
        np = _np()
        a = np.ascontiguousarray(array, dtype=self.numpy_dtype)
        if a.shape != self.shape:
            raise ArgumentError("Buffer.write: shape %s, the buffer is %s" % (a.shape, self.shape))
        _check(_c["buf_write"](self._live(), a.ctypes.data, a.nbytes), self.context._ptr)

    def release(self):
        """Releases the buffer now; memory that launches in flight use is freed after them."""
        if self._ptr and self.context._ptr:
            _c["buf_release"](self._ptr)
        self._ptr = None
        self._owner = None

    def _forget(self):  # the context is going: it frees the buffer itself
        self._ptr = None
        self._owner = None

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return "kern.Buffer(%s%s, %s)" % (_KERN_NAMES[self.dtype], list(self.shape),
                                           self.context.device)


class _KeepAlive:
    """Hands out a NumPy view that keeps its buffer alive (as the view's base)."""

    def __new__(cls, view, owner):
        np = _np()

        class _Base:
            pass
        base = _Base()
        base.__array_interface__ = dict(view.__array_interface__)
        base.owner = owner
        return np.asarray(base)


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
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_DESTRUCTOR
def _capsule_destructor(capsule):
    if _raw_is_valid(capsule, b"dltensor"):
        p = _raw_get(capsule, b"dltensor")
        mt = _DLManagedTensor.from_address(p)
        if mt.deleter:
            _DELETER(mt.deleter)(p)


_CAPSULE_DESTRUCTOR_PTR = ctypes.cast(_capsule_destructor, ctypes.c_void_p)


def _dtype_code(dtype):
    np = _np()
    name = np.dtype(dtype).name if not isinstance(dtype, int) else _DTYPES[dtype]
    for code, n in _DTYPES.items():
        if n == name:
            return code
    raise ArgumentError("dtype %s is not a kern dtype (bool, int32, uint32, int64, float32, "
                        "float64)" % name)


# ---- arguments ------------------------------------------------------------------------

def _is_tensor_like(obj):
    return hasattr(obj, "__dlpack__") or hasattr(obj, "__array_interface__") or \
        hasattr(obj, "__array__")


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
    status = _c["from_dlpack"](ctx._live(), p, ctypes.byref(out))
    if status != 0:
        return None, _c["last_error"](ctx._ptr).decode()
    _capsule_rename(cap, b"used_dltensor")  # the buffer owns the tensor now
    code = _DLPACK_DTYPES_FROM(obj)
    return Buffer(ctx, out.value, code, tuple(int(s) for s in obj.shape), owner=cap), None


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


def _to_host(v):
    np = _np()
    if hasattr(v, "detach"):
        v = v.detach()
    if hasattr(v, "cpu") and not isinstance(v, np.ndarray):
        v = v.cpu()
    if hasattr(v, "numpy") and not isinstance(v, np.ndarray):
        return v.numpy()
    return np.asarray(v)


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
    elif p.dtype in (_I32, _U32, _I64):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ArgumentError("%s: expected an integer (%s), got %s" %
                                (where, _KERN_NAMES[p.dtype], type(v).__name__))
        lo, hi = {_I32: (-2**31, 2**31 - 1), _U32: (0, 2**32 - 1),
                  _I64: (-2**63, 2**63 - 1)}[p.dtype]
        if not lo <= v <= hi:
            raise ArgumentError("%s: %d is out of range for %s" % (where, v,
                                                                   _KERN_NAMES[p.dtype]))
        if p.dtype == _I32:
            a.u.i32 = v
        elif p.dtype == _U32:
            a.u.u32 = v
        else:
            a.u.i64 = v
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


# ---- modules and kernels ---------------------------------------------------------------

class _Param:
    def __init__(self, info):
        self.name = info.name.decode()
        self.is_array = bool(info.is_array)
        self.dtype = info.dtype
        self.rank = info.rank
        self.nograd = bool(info.nograd)
        self.np_dtype = _np().dtype(_DTYPES[self.dtype])
        self.torch_dtype = "torch." + _DTYPES[self.dtype]

    @property
    def differentiable(self):
        return self.dtype in (_F32, _F64) and not self.nograd

    def __repr__(self):
        t = _KERN_NAMES[self.dtype] + ("[" + "," * (self.rank - 1) + "]" if self.is_array else "")
        return "%s: %s" % (self.name, t)


class Kernel:
    """A kernel of a module, called with its parameters by position or keyword
    (`x__grad=` for the parameter `x.grad`). Arrays: NumPy arrays and DLPack tensors are
    used in place when their dtype, layout and device allow, else copied (with a
    CopyWarning) and written back; scalars: Python numbers, checked against the type."""

    def __init__(self, module, ptr, name):
        self.module = module
        self._ptr = ptr
        self.name = name
        n = _c["nparams"](ptr)
        self.params = []
        for i in range(n):
            info = _ParamInfo()
            _check(_c["param"](ptr, i, ctypes.byref(info)), module.context._ptr)
            self.params.append(_Param(info))
            self.params[-1].written = _c["written"](ptr, i) != 0
        self._index = {p.name: i for i, p in enumerate(self.params)}

    def __call__(self, *args, **kwargs):
        ctx = self.module.context
        self.module._live()
        bound = _Bound(self, args, kwargs)
        tape = _current_tape()
        if bound.cuda_torch:
            ctx._before_torch_call()
        try:
            if tape is not None:
                tape._record(self, bound)
            else:
                _check(_c["launch"](self._ptr, bound.c_args, len(self.params)), ctx._ptr)
            if ctx.device != "cpu":
                ctx._after_call(bound.used_torch, bound.cuda_torch)  # results visible
        finally:
            bound.finish()

    def __repr__(self):
        return "kern.Kernel(%s(%s))" % (self.name, ", ".join(map(repr, self.params)))


class Module:
    """Kernels compiled together: `mod.simulate`, `mod["simulate.grad"]`, `mod.kernels`."""

    def __init__(self, ctx, ptr):
        self.context = ctx
        self._ptr = ptr
        self._kernels = {}
        ctx._objects.add(self)
        self.kernels = [_c["mod_name"](ptr, i).decode() for i in range(_c["mod_count"](ptr))]

    def _live(self):
        if not self._ptr:
            raise ArgumentError("the module was released")
        return self._ptr

    def kernel(self, name):
        if name not in self._kernels:
            p = ctypes.c_void_p()
            _check(_c["find"](self._live(), name.encode(), ctypes.byref(p)), self.context._ptr)
            self._kernels[name] = Kernel(self, p.value, name)
        return self._kernels[name]

    def __getitem__(self, name):
        return self.kernel(name)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.kernel(name)
        except NotFoundError as e:
            raise AttributeError(str(e)) from None

    def release(self):
        if self._ptr and self.context._ptr:
            _c["mod_release"](self._ptr)
        self._ptr = None

    def _forget(self):
        self._ptr = None

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


def compile(source, context=None, name=None):  # noqa: A001 - kern.compile
    """JIT-compiles a .kern file (a path) or source text into a Module."""
    ctx = context or globals()["context"]()
    p = ctypes.c_void_p()
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and
                                           source.endswith(".kern")):
        path = os.fspath(source)
        _check(_c["mod_file"](ctx._live(), path.encode(), ctypes.byref(p)), ctx._ptr)
    else:
        text = source.encode() if isinstance(source, str) else bytes(source)
        _check(_c["mod_source"](ctx._live(), text, len(text), (name or "<string>").encode(),
                                ctypes.byref(p)), ctx._ptr)
    return Module(ctx, p.value)


def load(path, context=None):
    """Loads a module that `kernc build` made (.so for cpu, .kmod for cuda, .vkmod)."""
    ctx = context or globals()["context"]()
    p = ctypes.c_void_p()
    _check(_c["mod_load"](ctx._live(), os.fspath(path).encode(), ctypes.byref(p)), ctx._ptr)
    return Module(ctx, p.value)


# ---- the tape --------------------------------------------------------------------------

_tls = threading.local()


def _current_tape():
    stack = getattr(_tls, "tapes", None)
    return stack[-1] if stack else None


class Tape:
    """Records kernel calls made inside `with tape:` and runs their gradients (K.grad) in
    reverse: reverse mode over a sequence of launches, like wp.Tape.

        with kern.Tape() as tape:
            mod.step(x=x, y=y, t=0)
        tape.backward(seeds=[(y, dL_dy)])
        tape.grad(x)                  # dL/dx, an array like x

    The arrays of the recorded calls keep their kern buffers for the tape's life, so that
    one array is one primal with one adjoint. The tape keeps no copies: a recorded call
    must not overwrite what an earlier recorded call read."""

    def __init__(self, context=None):
        self.context = context or globals()["context"]()
        p = ctypes.c_void_p()
        _check(_c["tape_create"](self.context._live(), ctypes.byref(p)), self.context._ptr)
        self._ptr = p.value
        self._buffers = {}  # id(array) -> (array, Buffer)
        self._keep = []
        self._seeds = []

    def __enter__(self):
        if not hasattr(_tls, "tapes"):
            _tls.tapes = []
        _tls.tapes.append(self)
        return self

    def __exit__(self, *exc):
        _tls.tapes.pop()
        return False

    def _cached(self, v):
        e = self._buffers.get(id(v))
        return e[1] if e is not None and e[0] is v else None

    def _remember(self, v, b):
        self._buffers[id(v)] = (v, b)

    def _buffer_of(self, v):
        if isinstance(v, Buffer):
            return v
        b = self._cached(v)
        if b is None:
            raise ArgumentError("Tape: this array was not used by a recorded call")
        return b

    def _record(self, kernel, bound):
        if kernel.module.context is not self.context:
            raise ArgumentError("Tape: kernel '%s' runs on another context" % kernel.name)
        _check(_c["tape_launch"](self._ptr, kernel._ptr, bound.c_args, len(kernel.params)),
               self.context._ptr)
        self._keep.append(kernel.module)

    def backward(self, seeds=None):
        """Runs the gradient kernels, newest call first. seeds: (output array, dL/d(output))
        pairs (a list; or a dict where the arrays are hashable, as Buffers and tensors are),
        written into the outputs' adjoints first; other adjoints start at zero."""
        np = _np()
        for primal, seed in (seeds.items() if isinstance(seeds, dict) else (seeds or ())):
            b = self._buffer_of(primal)
            g = Buffer.from_array(np.asarray(_to_host(seed), dtype=b.numpy_dtype),
                                  self.context)
            if g.shape != b.shape:
                raise ArgumentError("Tape.backward: a seed of shape %s for an array of shape %s"
                                    % (g.shape, b.shape))
            _check(_c["tape_set_grad"](self._ptr, b._live(), g._live()), self.context._ptr)
            self._seeds.append(g)
        _check(_c["tape_backward"](self._ptr), self.context._ptr)

    def grad(self, primal):
        """dL/d(primal) after backward, as a NumPy array (a copy)."""
        b = self._buffer_of(primal)
        g = ctypes.c_void_p()
        _check(_c["tape_grad"](self._ptr, b._live(), ctypes.byref(g)), self.context._ptr)
        adj = Buffer(self.context, g.value, b.dtype, b.shape)
        try:
            return adj.read()
        finally:
            adj._ptr = None  # the tape owns it (or the seed buffer does)

    def scalar_grad(self, record, param):
        """dL/d(scalar parameter `param`, a name or index) of record `record`."""
        out = ctypes.c_double()
        if isinstance(param, str):
            raise ArgumentError("Tape.scalar_grad: give the parameter's index")
        _check(_c["tape_scalar_grad"](self._ptr, record, param, ctypes.byref(out)),
               self.context._ptr)
        return out.value

    @property
    def records(self):
        return _c["tape_count"](self._ptr)

    def zero(self):
        """Forgets the records and the adjoints (a new recording starts)."""
        _check(_c["tape_clear"](self._ptr), self.context._ptr)
        self._seeds = []

    def release(self):
        if self._ptr and self.context._ptr:
            _c["tape_destroy"](self._ptr)
        self._ptr = None
        self._buffers = {}
        self._keep = []
        self._seeds = []

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


# ---- gradcheck -----------------------------------------------------------------------

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
        v = args[p.name]
        base[p.name] = np.array(_to_host(v), dtype=_DTYPES[p.dtype], copy=True) \
            if p.is_array else v
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
