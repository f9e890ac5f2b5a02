"""Modules and kernels: compile() and load() make a Module; its Kernels are called with
their parameters (_Param, a parameter's signature), directly or on the current tape."""

import ctypes
import inspect
import os
import re

from ._binding import _Bound
from ._context import _Made, context as _default_context
from ._errors import ArgumentError, IOError, NotFoundError, _check
from ._library import _DTYPES, _F32, _F64, _c, _np, _ParamInfo
from ._tape import _current_tape
from ._views import _View

class _Param:
    def __init__(self, info):
        self.name = info.name.decode()
        self.is_array = bool(info.is_array)
        self.dtype = info.dtype
        self.rank = info.rank
        self.nograd = bool(info.nograd)
        self.np_dtype = _np().dtype(_DTYPES[self.dtype])
        self.torch_dtype = "torch." + _DTYPES[self.dtype]
        self.type_name = info.type_name.decode()
        self.tail = tuple(info.tail[:info.ntail])  # extents the last dimensions must have
        # a vector, matrix or struct type: its element dtype, rank as declared (0: by value)
        self.view = _View(self.type_name, self.tail) if self.tail else None

    @property
    def element_dtype(self):
        """The NumPy dtype of one element: structured for a struct, a subarray dtype such
        as ('<f4', (3,)) for a vector or matrix, the scalar dtype otherwise."""
        return self.view.dtype if self.view is not None else self.np_dtype

    @property
    def shape_text(self):
        """The shape a caller's array must have, as a message says it: '(N, 3)'."""
        if self.view is not None:
            return self.view.shape_text()
        return "(" + ", ".join(["N", "M", "K", "L"][:self.rank]) + \
            ("," if self.rank == 1 else "") + ")"

    @property
    def differentiable(self):
        return self.dtype in (_F32, _F64) and not self.nograd

    def __repr__(self):
        return "%s: %s" % (self.name, self.type_name)


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
            _check(_c["param"](ptr, i, ctypes.byref(info)), module.context._ptr, "Module.kernel")
            self.params.append(_Param(info))
            self.params[-1].written = _c["written"](ptr, i) != 0
        self._index = {p.name: i for i, p in enumerate(self.params)}

    def param(self, name):
        """The parameter called name (or its index): .name, .type_name (as declared:
        "vec3[]", "P{pos:vec3,mass:f32}[]"), .element_dtype, .rank (in memory), .tail."""
        if isinstance(name, int):
            return self.params[name]
        i = self._index.get(name, self._index.get(name.replace("__", ".")))
        if i is None:
            raise ArgumentError("kernel '%s' has no parameter named '%s' (it has: %s)" %
                                (self.name, name, ", ".join(p.name for p in self.params)))
        return self.params[i]

    def param_dtype(self, name):
        """The NumPy dtype of one element of parameter name: for a struct array the
        structured dtype of the struct's layout, so np.zeros(n, k.param_dtype("ps")) makes
        an array that the kernel uses in place; for vec3[] ('<f4', (3,)), so np.zeros(n,
        k.param_dtype("x")) has shape (n, 3)."""
        return self.param(name).element_dtype

    def __call__(self, *args, **kwargs):
        self._run(args, kwargs, _current_tape())

    def _run(self, args, kwargs, tape):
        """One call, recorded on tape (None: launched); while the context captures a graph
        (kern.Graph), recorded into the graph instead, which keeps the call's arrays."""
        ctx = self.module.context
        self.module._live("kernel '%s'" % self.name)
        graph = ctx._graph
        if graph is not None and tape is not None:
            raise ArgumentError("kernel '%s': a call on a kern.Tape cannot be captured into a "
                                "kern.Graph (capture the gradient kernels' calls themselves, "
                                "mod['%s.grad'](...))" % (self.name, self.name))
        bound = _Bound(self, args, kwargs, tape)
        try:
            if graph is not None:
                graph._capture(self, bound)
            if bound.cuda_torch:
                ctx._before_torch_call()
            if tape is not None:
                tape._record(self, bound)
            else:
                _check(_c["launch"](self._ptr, bound.c_args, len(self.params)), ctx._ptr,
                       "kernel '%s'" % self.name)
            if ctx.device != "cpu":
                ctx._after_call(bound.used_torch, bound.cuda_torch)  # results visible
        finally:
            bound.finish()

    @property
    def __signature__(self):
        """The kernel's parameters, for inspect.signature and help(): their names (x__grad
        for x.grad) and declared types."""
        return inspect.Signature([
            inspect.Parameter(p.name.replace(".", "__"), inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=p.type_name) for p in self.params])

    @property
    def jvp(self):
        """The forward-mode kernel K.jvp (mod["K.jvp"]): K's parameters, then a tangent
        `x__tan=` per differentiable parameter x (docs/reference.md, K.jvp)."""
        return self.module._kernel(self.name + ".jvp", "Kernel.jvp")

    def __repr__(self):
        return "kern.Kernel(%s(%s))" % (self.name, ", ".join(map(repr, self.params)))


class Module(_Made):
    """Kernels compiled together: `mod.simulate`, `mod["simulate.grad"]`, `mod.kernels`.
    After `release()` or its context's release, finding or calling its kernels raises
    ArgumentError (their names and parameters stay readable)."""

    _noun = "module"
    _source = None  # (path or source bytes, name) of kern.compile: kern.gradcheck's

    def __init__(self, ctx, ptr):
        self._kernels = {}
        self._made(ctx, ptr)
        self.kernels = [_c["mod_name"](ptr, i).decode() for i in range(_c["mod_count"](ptr))]

    def kernel(self, name):
        return self._kernel(name, "Module.kernel")

    def _kernel(self, name, what):
        p = self._live(what)
        if name not in self._kernels:
            k = ctypes.c_void_p()
            _check(_c["find"](p, name.encode(), ctypes.byref(k)), self.context._ptr, what)
            self._kernels[name] = Kernel(self, k.value, name)
        return self._kernels[name]

    def __getitem__(self, name):
        return self._kernel(name, "Module[%r]" % name)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._kernel(name, "Module.%s" % name)
        except NotFoundError as e:
            raise AttributeError(str(e)) from None

    def release(self):
        """Frees the module (also at garbage collection); its kernels cannot be called
        after it."""
        self._release_with(_c["mod_release"])


_SOURCE_START = re.compile(r"\s*(//|(kernel|func|struct|const)\s)")


def _is_path(source):
    """Whether compile() reads source as a file's path (docs/python.md, kern.compile): a
    path object; a str without a newline that ends in .kern or names an existing path.
    Another str is source text when it has a newline, '{' or ';', or starts with a
    declaration's keyword or a comment; else it names a missing file."""
    if isinstance(source, os.PathLike):
        return True
    if not isinstance(source, str):
        return False
    if "\n" in source:
        return False
    if source.endswith(".kern") or os.path.exists(source):
        return True
    return not ("{" in source or ";" in source or _SOURCE_START.match(source))


class FileNotFound(NotFoundError, FileNotFoundError):
    """kern.compile or kern.load of a path that names no file: a kern.NotFoundError that
    is also Python's FileNotFoundError."""


def _read_check(path, what="kern.compile"):
    """FileNotFound or IOError, naming path, when it is no file that can be read."""
    if os.path.isdir(path):
        raise IOError("%s: '%s' is a directory, not a .kern file" % (what, path))
    if not os.path.exists(path):
        raise FileNotFound("%s: no such file '%s'%s" % (
            what, path, "" if path.endswith(".kern") or what != "kern.compile" else
            " (a str is a path unless it is source text: it has a newline, '{' or ';', or "
                "starts with 'kernel', 'func', 'struct', 'const' or '//')"))


def compile(source, context=None, name=None):  # noqa: A001 - kern.compile
    """JIT-compiles a .kern file or source text into a Module. source: a path (a path
    object, or a str ending in .kern or naming a file), or source text (a str with a
    newline, '{' or ';', or bytes); name: the file name its messages give source text."""
    ctx = context or _default_context()
    p = ctypes.c_void_p()
    if not isinstance(source, (str, bytes, bytearray, memoryview, os.PathLike)):
        raise ArgumentError("kern.compile: expected a path or source text, got %s"
                            % type(source).__name__)
    ctx._live("kern.compile")
    if _is_path(source):
        source = os.fsdecode(os.fspath(source))
        _read_check(source)
        _check(_c["mod_file"](ctx._live("kern.compile"), source.encode(), ctypes.byref(p)),
               ctx._ptr, "kern.compile")
    else:
        text = source.encode() if isinstance(source, str) else bytes(source)
        _check(_c["mod_source"](ctx._live("kern.compile"), text, len(text),
                                (name or "<string>").encode(), ctypes.byref(p)), ctx._ptr,
               "kern.compile")
        source = text
    mod = Module(ctx, p.value)
    mod._source = (source, name)  # kern.gradcheck compiles it again in f64
    return mod


def load(path, context=None):
    """Loads a module that `kernc build` made (.so for cpu, .kmod for cuda, .vkmod)."""
    ctx = context or _default_context()
    p = ctypes.c_void_p()
    ctx._live("kern.load")
    _read_check(os.fsdecode(os.fspath(path)), "kern.load")
    _check(_c["mod_load"](ctx._live("kern.load"), os.fspath(path).encode(), ctypes.byref(p)),
           ctx._ptr, "kern.load")
    return Module(ctx, p.value)
