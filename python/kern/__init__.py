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

The package's modules, one room each:

    _library.py    loading libkern-jit; the C API's constants, structures, prototypes (_c)
    _errors.py     Error and its subclasses, CopyWarning; a failed status to an exception
    _views.py      vector, matrix and struct parameters: their NumPy dtypes, structured arrays
    _context.py    Context, context(), synchronize(); _Made, the handle of what is made on one
    _buffer.py     Buffer and its NumPy view; DLPack export and import; extent checks before
                   copies; any array-like to a NumPy array
    _tape.py       Tape
    _binding.py    a call's arguments: binding, scalar checks, copies written back
    _module.py     Module, Kernel, compile(), load()
    _gradcheck.py  gradcheck()
    _graph.py      Graph: calls captured into a C graph, replayed
    _bridge.py     a kernel as a function of its inputs (kern.torch, kern.jax share it)
    torch.py       kern.torch: kernels as torch.autograd.Functions (imported on demand)
    jax.py         kern.jax: kernels as jax.custom_vjp functions (imported on demand)
"""

# Names of the single-file package that stay (re-exported, hence the noqa): its imports
# (kern.ctypes, ...) and the private names that tests and debugging reach for (kern._c).
import ctypes  # noqa: F401
import os  # noqa: F401
import threading  # noqa: F401
import warnings  # noqa: F401
import weakref  # noqa: F401

from ._buffer import Buffer
from ._context import Context, context, synchronize
from ._errors import (ArgumentError, CallbackError, CompileError, CopyWarning, DeviceError, Error,
                      FormatError, InternalError, IOError, NotFoundError, OutOfMemoryError,
                      UnsupportedError, _check)  # noqa: F401
from ._gradcheck import gradcheck
from ._graph import Graph
from ._library import _c, _lib, _package_version, version  # noqa: F401
from ._module import Kernel, Module, compile, load
from ._tape import Tape

__all__ = [
    "Context", "Module", "Kernel", "Buffer", "Tape", "Graph", "Error", "ArgumentError",
    "NotFoundError", "IOError", "FormatError", "CompileError", "UnsupportedError",
    "DeviceError", "OutOfMemoryError", "InternalError", "CallbackError", "CopyWarning", "context",
    "compile", "load", "gradcheck", "synchronize", "version",
]

__version__ = _package_version()

# kern.Context, not kern._context.Context, in reprs, tracebacks and help(), as before
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
