"""The C library under the package: loading libkern-jit (KERN_LIBRARY or kern/_config.py),
the C API's constants and structures, the prototypes of the functions the package calls
(`_c`), the PyCapsule calls of the DLPack exchange, and version()."""

import ctypes
import os

try:
    from . import _config
except ImportError:  # the source tree (no _config.py): KERN_LIBRARY names the library
    _config = None


def _library_path():
    """libkern-jit's path: KERN_LIBRARY, else _config.LIBRARY, relative to this package's
    directory (meson writes it: ../../jit/ in the build tree, the way to LIBDIR after
    `meson install`, _lib/ inside a pip-installed package). Joined without resolving
    symbolic links, as meson computed it from the install paths."""
    path = os.environ.get("KERN_LIBRARY")
    if path:
        return path, "KERN_LIBRARY"
    if _config is None:
        raise ImportError("kern: no library: set KERN_LIBRARY to libkern-jit.so.0 (the package "
                          "of the build tree, PYTHONPATH=build/python, or an installed one "
                          "knows where it is)")
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, _config.LIBRARY)), "kern/_config.py"


_path, _named_by = _library_path()
# PyDLL, not CDLL: the GIL stays held during calls, because the runtime may call a DLPack
# deleter (NumPy's touches Python objects) from inside any call that retires memory.
try:
    _lib = ctypes.PyDLL(_path)
except OSError as e:
    raise ImportError(f"kern: cannot load libkern-jit {_path} (named by {_named_by}): {e}; "
                      "set KERN_LIBRARY to the library, or reinstall the package") from None

_BOOL, _I32, _U32, _I64, _F32, _F64 = 1, 2, 3, 4, 5, 6
_I8, _U8, _I16, _U16, _U64, _F16, _BF16 = 7, 8, 9, 10, 11, 12, 13
# kern_dtype -> NumPy dtype name; NumPy has no bfloat16, so a bf16 array is its bits (uint16)
_DTYPES = {_BOOL: "bool", _I32: "int32", _U32: "uint32", _I64: "int64", _F32: "float32",
           _F64: "float64", _I8: "int8", _U8: "uint8", _I16: "int16", _U16: "uint16",
           _U64: "uint64", _F16: "float16", _BF16: "uint16"}
_KERN_NAMES = {_BOOL: "bool", _I32: "i32", _U32: "u32", _I64: "i64", _F32: "f32",
               _F64: "f64", _I8: "i8", _U8: "u8", _I16: "i16", _U16: "u16", _U64: "u64",
               _F16: "f16", _BF16: "bf16"}
# the integer scalar types: kern_dtype -> (the _ArgValue field, lowest, highest)
_INT_SCALARS = {_I32: ("i32", -2**31, 2**31 - 1), _U32: ("u32", 0, 2**32 - 1),
                _I64: ("i64", -2**63, 2**63 - 1), _I8: ("i8", -2**7, 2**7 - 1),
                _U8: ("u8", 0, 2**8 - 1), _I16: ("i16", -2**15, 2**15 - 1),
                _U16: ("u16", 0, 2**16 - 1), _U64: ("u64", 0, 2**64 - 1)}
_ARG_BUFFER, _ARG_SCALAR = 1, 2
_MAX_DIMS = 4


class _Options(ctypes.Structure):
    """kern_context_options (include/kern.h), field for field."""
    _fields_ = [("backend", ctypes.c_int), ("debug", ctypes.c_bool), ("threads", ctypes.c_int),
                ("ad_stack_size", ctypes.c_int64), ("device", ctypes.c_int),
                ("validation", ctypes.c_int), ("staging", ctypes.c_bool),
                ("ad_memory_budget", ctypes.c_int64), ("ad_strategy", ctypes.c_int),
                ("fast_math", ctypes.c_bool), ("no_checks", ctypes.c_bool),
                ("promote_f64", ctypes.c_bool), ("no_cache", ctypes.c_bool),
                ("cache_dir", ctypes.c_char_p)]


class _AdstackInfo(ctypes.Structure):
    """kern_adstack_info (include/kern.h), field for field."""
    _fields_ = [("heap_bytes", ctypes.c_int64), ("heap_allocs", ctypes.c_int64),
                ("last_stride", ctypes.c_int64), ("last_slots", ctypes.c_int64),
                ("last_count", ctypes.c_int), ("last_strategy", ctypes.c_int),
                ("last_store_all_bytes", ctypes.c_int64), ("last_needed_bytes", ctypes.c_int64),
                ("last_budget", ctypes.c_int64), ("last_recompute", ctypes.c_double)]


class _ParamInfo(ctypes.Structure):
    """kern_param_info (include/kern.h), field for field."""
    _fields_ = [("name", ctypes.c_char_p), ("is_array", ctypes.c_bool), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("nograd", ctypes.c_bool),
                ("type_name", ctypes.c_char_p), ("ntail", ctypes.c_int),
                ("tail", ctypes.c_int64 * 2)]


class _ArgValue(ctypes.Union):
    _fields_ = [("buffer", ctypes.c_void_p), ("b", ctypes.c_bool), ("i32", ctypes.c_int32),
                ("u32", ctypes.c_uint32), ("i64", ctypes.c_int64), ("f32", ctypes.c_float),
                ("f64", ctypes.c_double), ("i8", ctypes.c_int8), ("u8", ctypes.c_uint8),
                ("i16", ctypes.c_int16), ("u16", ctypes.c_uint16), ("u64", ctypes.c_uint64)]


class _Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("dtype", ctypes.c_int), ("u", _ArgValue)]


def _fn(name, res, *args):
    f = getattr(_lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_vp, _int, _st = ctypes.c_void_p, ctypes.c_int, ctypes.c_int
_pvp = ctypes.POINTER(ctypes.c_void_p)
_i64p = ctypes.POINTER(ctypes.c_int64)
_c = {
    "version": _fn("kern_version", _int, ctypes.POINTER(ctypes.c_char_p)),
    "ctx_defaults": _fn("kern_context_options_default", _Options),
    "ctx_create": _fn("kern_context_create", _st, ctypes.POINTER(_Options), _pvp),
    "ctx_release": _fn("kern_context_release", None, _vp),
    "last_error": _fn("kern_context_last_error", ctypes.c_char_p, _vp),
    "device_name": _fn("kern_context_device_name", ctypes.c_char_p, _vp),
    "cuda_stream": _fn("kern_context_cuda_stream", _vp, _vp),
    "device_index": _fn("kern_context_device_index", _int, _vp),
    "sync": _fn("kern_sync", _st, _vp),
    "adstack_info": _fn("kern_context_adstack_info", _st, _vp, ctypes.c_void_p),
    "buf_create": _fn("kern_buffer_create", _st, _vp, _int, _int, _i64p, _vp, _pvp),
    "buf_wrap": _fn("kern_buffer_wrap", _st, _vp, _int, _int, _i64p, _vp, _vp, _vp, _pvp),
    "buf_read": _fn("kern_buffer_read", _st, _vp, _vp, ctypes.c_size_t),
    "buf_write": _fn("kern_buffer_write", _st, _vp, _vp, ctypes.c_size_t),
    "buf_release": _fn("kern_buffer_release", None, _vp),
    "buf_copy_from": _fn("kern_buffer_copy_from", _st, _vp, _vp),
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
    "graph_begin": _fn("kern_graph_begin", _st, _vp),
    "graph_end": _fn("kern_graph_end", _st, _vp, _pvp),
    "graph_launch": _fn("kern_graph_launch", _st, _vp),
    "graph_count": _fn("kern_graph_launch_count", _int, _vp),
    "graph_release": _fn("kern_graph_release", None, _vp),
    "tape_create": _fn("kern_tape_create", _st, _vp, _pvp),
    "tape_destroy": _fn("kern_tape_destroy", None, _vp),
    "tape_set_grad": _fn("kern_tape_set_grad", _st, _vp, _vp, _vp),
    "tape_grad": _fn("kern_tape_grad", _st, _vp, _vp, _pvp),
    "tape_launch": _fn("kern_tape_launch", _st, _vp, _vp, ctypes.POINTER(_Arg), _int),
    "tape_backward": _fn("kern_tape_backward", _st, _vp),
    "tape_scalar_grad": _fn("kern_tape_scalar_grad", _st, _vp, _int, _int,
                            ctypes.POINTER(ctypes.c_double)),
    "tape_clear": _fn("kern_tape_clear", _st, _vp),
    "tape_zero": _fn("kern_tape_zero", _st, _vp),
    "tape_record_func": _fn("kern_tape_record_func", _st, _vp, _vp, _vp, _vp, _pvp, _int),
    "tape_error": _fn("kern_tape_error", _st, _vp, _st, ctypes.c_char_p),
    "tape_count": _fn("kern_tape_record_count", _int, _vp),
    "tape_saved_bytes": _fn("kern_tape_saved_bytes", ctypes.c_int64, _vp),
    "tape_create_forward": _fn("kern_tape_create_forward", _st, _vp, _pvp),
    "tape_set_tan": _fn("kern_tape_set_tan", _st, _vp, _vp, _vp),
    "tape_tan": _fn("kern_tape_tan", _st, _vp, _vp, _pvp),
    "tape_launch_jvp": _fn("kern_tape_launch_jvp", _st, _vp, _vp, ctypes.POINTER(_Arg), _int,
                           ctypes.POINTER(ctypes.c_double)),
}



def _backends():
    """{name: kern_backend} of the backends the runtime has a device for, from the C
    library's target registry (kern_backend_name, kern_backend_available)."""
    name = _fn("kern_backend_name", ctypes.c_char_p, _int)
    available = _fn("kern_backend_available", ctypes.c_bool, _int)
    found, b = {}, 0
    while name(b) is not None:
        if available(b):
            found[name(b).decode()] = b
        b += 1
    return found


_BACKENDS = _backends()

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


def _package_version():
    """kern.__version__: the project's version that meson wrote into _config.py, or the
    library's in the source tree (KERN_LIBRARY, no _config.py). One number: the Python
    tests check it against kern.version() and `kernc --version`."""
    return _config.VERSION if _config is not None else version()


def _np():
    import numpy
    return numpy
