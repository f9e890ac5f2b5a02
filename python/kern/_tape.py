"""The tape: Tape (records kernel calls inside `with tape:` and runs their gradients in
reverse) and _current_tape, the innermost tape of this thread."""

import ctypes
import threading

from ._buffer import Buffer, _to_host
from ._context import context as _default_context
from ._errors import ArgumentError, _check
from ._library import _c, _np
from ._views import _dtype_mismatch, _show

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
        self.context = context or _default_context()
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
            seed = _to_host(seed)
            if isinstance(seed, np.ndarray) and seed.dtype.names is not None:
                seed = _components(primal, seed, b)
            g = Buffer.from_array(np.asarray(seed, dtype=b.numpy_dtype), self.context)
            if g.shape != b.shape:
                raise ArgumentError("Tape.backward: a seed of shape %s for an array of shape %s"
                                    % (g.shape, b.shape))
            _check(_c["tape_set_grad"](self._ptr, b._live(), g._live()), self.context._ptr)
            self._seeds.append(g)
        _check(_c["tape_backward"](self._ptr), self.context._ptr)

    def grad(self, primal):
        """dL/d(primal) after backward, as a NumPy array (a copy); for a structured array
        (a struct parameter's), an array of its structured dtype."""
        b = self._buffer_of(primal)
        g = ctypes.c_void_p()
        _check(_c["tape_grad"](self._ptr, b._live(), ctypes.byref(g)), self.context._ptr)
        adj = Buffer(self.context, g.value, b.dtype, b.shape)
        try:
            out = adj.read()
            if _structured(primal):  # a struct array's adjoint in its structured dtype
                return out.view(primal.dtype).reshape(primal.shape)
            return out
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


def _structured(a):
    np = _np()
    return isinstance(a, np.ndarray) and a.dtype.names is not None


def _components(primal, seed, b):
    """A structured seed of a structured primal's dtype as its components (shape b.shape)."""
    why = _dtype_mismatch(primal.dtype, seed.dtype, "") if _structured(primal) else \
        "the array is not structured"
    if why:
        raise ArgumentError("Tape.backward: a seed of the structured dtype %s for an array of "
                            "%s: %s" % (_show(seed.dtype), _show(primal.dtype), why))
    return _np().ascontiguousarray(seed).view(b.numpy_dtype).reshape(b.shape)
