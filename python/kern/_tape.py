"""The tape: Tape (records kernel calls inside `with tape:` and host steps with their own
backward, and runs their gradients in reverse; or, as Tape(forward=True), runs the calls'
forward-mode kernels K.jvp and keeps their tangents) and _current_tape, the innermost tape
of this thread."""

import ctypes
import threading
import warnings
import weakref

from ._buffer import Buffer, _dlpack_import, _dtype_code, _host_memory, _to_host
from ._context import _Made, context as _default_context
from ._errors import ArgumentError, Error, NotFoundError, _check
from ._library import _c, _np
from ._views import _dtype_mismatch, _show

_tls = threading.local()

# kern_tape_backward_fn and free_user (kern.h): each tape makes one of each, bound to it
_BACKWARD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_KERN_ERR_CALLBACK = 10


def _current_tape():
    stack = getattr(_tls, "tapes", None)
    return stack[-1] if stack else None



class Tape(_Made):
    """Records kernel calls made inside `with tape:` and runs their gradients (K.grad) in
    reverse: reverse mode over a sequence of launches, like wp.Tape.

        with kern.Tape() as tape:
            mod.step(x=x, y=y, t=0)
        tape.backward(seeds=[(y, dL_dy)])
        tape.grad(x)                  # dL/dx, an array like x

    tape.zero() zeroes the adjoints and keeps the records, so backward can run again with
    other seeds; tape.reset() drops the records for a new recording (Warp's meanings).

    The tape keeps what its records use (kern Buffers, arrays and the kern buffers made for
    them, modules) until tape.reset() or tape.release(), so that temporaries of a chain of
    calls live until backward, and one array is one primal with one adjoint. It keeps no
    copies: a recorded call must not overwrite what an earlier recorded call read. After
    tape.release() or its context's release, its methods raise ArgumentError.

    Tape(forward=True) is a forward tape: each call inside `with tape:` runs the kernel's
    forward-mode kernel K.jvp instead (K's work, and the tangents carried through it):

        tape = kern.Tape(forward=True)
        tape.set_tangent(x, v)        # the tangent of x (others start at zero)
        tape.set_scalar_tangent("dt", 1.0)  # every later call's differentiable 'dt'
        with tape:
            mod.step(x=x, y=y, dt=0.1)
        tape.tangent(y)               # J v, an array like y

    It has no backward pass, adjoints or host steps."""

    _noun = "tape"

    def __init__(self, context=None, forward=False):
        ctx = context or _default_context()
        self.forward = bool(forward)
        self._buffers = {}  # id(array) -> (array, Buffer): the array's primal buffer
        self._keep = {}  # id -> what the records use: kern Buffers and modules
        self._seeds = {}  # id(primal Buffer) -> (primal, seed Buffer): adjoints that backward set
        self._tangents = {}  # id(primal Buffer) -> (primal, the tangent Buffer set for it)
        self._scalar_tans = {}  # a forward tape's scalar tangents, by parameter name
        self._steps = {}  # host steps: key -> (backward, arrays), until the C record is freed
        self._next_step = 1
        self._error = None  # the exception a host step raised during backward
        self._running = False  # backward is running (a host step's backward may be called)
        self._ran = False  # backward has run over the records (until zero() or reset())
        self._kernels = []  # per record: its Kernel, None for a host step (scalar_grad's names)
        self._zero_kept = False  # zero() kept records that no backward ran over: warn once
        self._borrowed = weakref.WeakSet()  # adjoints lent out by adjoint(), forgotten with them
        ref = weakref.ref(self)  # the C callbacks must not keep the tape alive
        self._c_backward = _BACKWARD_FN(lambda tape, key: _run_step(ref, key))
        self._c_free = _FREE_FN(lambda key: _free_step(ref, key))
        p = ctypes.c_void_p()
        create = _c["tape_create_forward" if self.forward else "tape_create"]
        _check(create(ctx._live("kern.Tape"), ctypes.byref(p)), ctx._ptr, "kern.Tape")
        self._made(ctx, p.value)

    def __enter__(self):
        self._live("with tape")
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

    def _buffer_of(self, v, what):
        """The primal buffer of v (a Buffer, or an array the records used); NotFoundError,
        as the runtime says for a buffer without an adjoint, for an array they did not."""
        if isinstance(v, Buffer):
            return v
        b = self._cached(v)
        if b is None:
            raise NotFoundError("%s: the array has no %s on this tape (no call recorded since "
                                "the tape was made or reset used it)"
                                % (what, "tangent" if self.forward else "adjoint"))
        return b

    def _record(self, kernel, bound):
        what = "kernel '%s' on the tape" % kernel.name
        t = self._live(what)
        self._warn_zero_kept(what)
        if kernel.module.context is not self.context:
            raise ArgumentError("%s: the kernel runs on another context" % what)
        # the records' modules and Buffers live as long as the records (temporaries too)
        self._keep[id(kernel.module)] = kernel.module
        for b in bound.buffers:
            self._keep[id(b)] = b
        n = len(kernel.params)
        if self.forward:
            tans = (ctypes.c_double * max(n, 1))(*[
                self._scalar_tans.get(p.name, 0.0) if not p.is_array else 0.0
                for p in kernel.params])
            _check(_c["tape_launch_jvp"](t, kernel._ptr, bound.c_args, n, tans),
                   self.context._ptr, what)
        else:
            _check(_c["tape_launch"](t, kernel._ptr, bound.c_args, n), self.context._ptr, what)
        self._kernels.append(kernel)

    def set_tangent(self, primal, tangent):
        """A forward tape: the tangent of primal (a kern Buffer, or an array used in place as
        the calls will use it: NumPy on the CPU, DLPack tensors) for the calls after this,
        as a copy of tangent (an array of primal's shape). Arrays whose tangent is not set
        start at zero."""
        t = self._live("Tape.set_tangent")
        if not self.forward:
            raise ArgumentError("Tape.set_tangent: a reverse tape has no tangents "
                                "(kern.Tape(forward=True) makes a forward tape)")
        b = self._step_buffer(primal, None, "Tape.set_tangent: the array")
        g = self._copy_like(primal, b, tangent, "Tape.set_tangent: a tangent")
        _check(_c["tape_set_tan"](t, b._live("Tape.set_tangent"), g._live("Tape.set_tangent")),
               self.context._ptr, "Tape.set_tangent")
        self._tangents[id(b)] = (b, g)  # the tape uses both until replaced or released

    def _copy_like(self, primal, b, value, what):
        """A new Buffer holding value (a seed or tangent) as primal's buffer b holds primal:
        its dtype and shape (a structured value of primal's structured dtype as components)."""
        np = _np()
        structured = getattr(value, "dtype", None) is not None and \
            getattr(value.dtype, "names", None) is not None
        shape = getattr(value, "shape", None)
        if shape is not None and not structured and tuple(shape) != b.shape:
            raise ArgumentError("%s of shape %s for an array of shape %s"  # before any copy
                                % (what, tuple(shape), b.shape))
        value = _to_host(value)
        if isinstance(value, np.ndarray) and value.dtype.names is not None:
            value = _components(primal, value, b, what)
        value = np.asarray(value)
        if value.shape != b.shape:
            raise ArgumentError("%s of shape %s for an array of shape %s"
                                % (what, value.shape, b.shape))
        return Buffer.from_array(value.astype(b.numpy_dtype, copy=False), self.context)

    def set_scalar_tangent(self, name, value):
        """A forward tape: the tangent of the scalar parameter called name in every later
        call whose kernel has a differentiable scalar parameter of that name (until set
        again; None or 0 for none). Scalar tangents apply per call: a step called five
        times with dt's tangent set carries it five times."""
        self._live("Tape.set_scalar_tangent")
        if not self.forward:
            raise ArgumentError("Tape.set_scalar_tangent: a reverse tape has no tangents")
        if value is None:
            self._scalar_tans.pop(name, None)
        else:
            self._scalar_tans[name] = float(value)

    def tangent(self, primal):
        """A forward tape: the tangent of primal after the calls so far, as a NumPy array
        (a copy); for a structured array, an array of its structured dtype."""
        t = self._live("Tape.tangent", forward_only=True)
        b = self._buffer_of(primal, "Tape.tangent")
        g = ctypes.c_void_p()
        _check(_c["tape_tan"](t, b._live("Tape.tangent"), ctypes.byref(g)), self.context._ptr,
               "Tape.tangent")
        return _read_borrowed(self.context, g.value, b, primal, "Tape.tangent")

    def record_func(self, backward, arrays):
        """Records a step that is not a kern kernel (NumPy, a library, PyTorch) with its own
        backward, as wp.Tape.record_func: backward() (no arguments) runs during
        tape.backward() at this record's place, newest first among the kernel calls.
        arrays: the kern Buffers and arrays (NumPy, tensors; used in place) whose adjoints
        it reads or writes: inside it tape.grad(a) reads one, tape.adjoint(a) is one in
        place (`+=` on its .numpy() on the CPU), and those not yet on the tape start at
        zero. It should turn the adjoints after the step into those before it: x's += ...
        for an input, an overwritten output's set to zero. The tape keeps backward and
        the arrays until it is cleared or released; an exception in backward propagates
        out of tape.backward()."""
        t = self._live("Tape.record_func", forward_only=False)
        self._warn_zero_kept("Tape.record_func")
        if not callable(backward):
            raise ArgumentError("Tape.record_func: backward is not callable (%s)"
                                % type(backward).__name__)
        if isinstance(arrays, Buffer) or hasattr(arrays, "__dlpack__") or \
                hasattr(arrays, "__array_interface__"):
            arrays = [arrays]
        arrays = list(arrays)
        bufs = [self._step_buffer(a, i) for i, a in enumerate(arrays)]
        ptrs = (ctypes.c_void_p * max(len(bufs), 1))(*[b._live("Tape.record_func: array %d"
                                                               % i) for i, b in enumerate(bufs)])
        key = self._next_step
        self._next_step += 1
        self._steps[key] = (backward, arrays, bufs)  # freed by _free_step, even on failure
        _check(_c["tape_record_func"](t, ctypes.cast(self._c_backward, ctypes.c_void_p),
                                      key, ctypes.cast(self._c_free, ctypes.c_void_p), ptrs,
                                      len(bufs)), self.context._ptr, "Tape.record_func")
        self._kernels.append(None)

    def _step_buffer(self, v, i, what=None):
        """The kern buffer of a host step's array i (or of what: a tangent's primal): a
        Buffer, the one a recorded call used, or the array's memory wrapped in place (the
        tape keeps it)."""
        what = what or "Tape.record_func: array %d" % i
        if isinstance(v, Buffer):
            if v.context is not self.context:
                raise ArgumentError("%s belongs to another context" % what)
            return v
        b = self._cached(v)
        if b is not None:
            return b
        np = _np()
        if isinstance(v, np.ndarray) and self.context.device == "cpu" and \
                v.flags.c_contiguous and v.flags.writeable and 1 <= v.ndim <= 4:
            dims = (ctypes.c_int64 * v.ndim)(*v.shape)
            out = ctypes.c_void_p()
            _check(_c["buf_wrap"](self.context._live(what), _dtype_code(v.dtype), v.ndim, dims,
                                  v.ctypes.data, None, None, ctypes.byref(out)),
                   self.context._ptr, what)
            b = Buffer(self.context, out.value, _dtype_code(v.dtype), v.shape, owner=v)
        elif self.context.device != "cpu" and _host_memory(v):
            raise ArgumentError("%s is host memory, which a %s context cannot use in place; "
                                "give a kern.Buffer (kern.Buffer.from_array(array, context=...))"
                                % (what, self.context.device))
        else:
            b, why = _dlpack_import(self.context, v)
            if b is None:
                raise ArgumentError("%s cannot be used in place (%s); give a kern.Buffer"
                                    % (what, why))
        self._remember(v, b)
        return b

    def _live(self, what, forward_only=None):
        """The handle; ArgumentError naming what (the Python call) once it is gone, or when
        what is for the other mode (forward_only True or False) than the tape's, in the
        runtime's words (tape.c, refuse_mode)."""
        t = super()._live(what)
        if forward_only is not None and forward_only != self.forward:
            raise ArgumentError(
                "%s: the tape is a forward tape (kern.Tape(forward=True)): it has tangents "
                "(tape.set_tangent, tape.tangent), no adjoints, host steps or backward pass"
                % what if self.forward else
                "%s: the tape is a reverse tape (kern.Tape()): it has adjoints (tape.grad, "
                "tape.adjoint), no tangents" % what)
        return t

    def backward(self, seeds=None):
        """Runs the gradient kernels, newest call first. seeds: (output array, dL/d(output))
        pairs (a list; or a dict where the arrays are hashable, as Buffers and tensors are),
        written into the outputs' adjoints first; other adjoints start at zero."""
        t = self._live("Tape.backward")
        if self.forward:
            raise ArgumentError("Tape.backward: a forward tape (kern.Tape(forward=True)) has no "
                                "backward pass; tape.tangent(array) reads its tangents")
        if self.context._graph is not None:
            raise ArgumentError("Tape.backward: the context is capturing a kern.Graph (capture "
                                "the gradient kernels' calls themselves, mod['K.grad'](...))")
        if self._running:
            raise ArgumentError("Tape.backward: the tape is running its backward pass (a host "
                                "step's backward cannot run backward its own tape)")
        pairs = []
        for primal, seed in (seeds.items() if isinstance(seeds, dict) else (seeds or ())):
            b = self._buffer_of(primal, "Tape.backward: a seed's array")
            pairs.append((b, self._copy_like(primal, b, seed, "Tape.backward: a seed")))
        self._zero_kept = False  # the records are used as kept
        if self._ran:  # before the seeds replace the adjoints
            raise ArgumentError("Tape.backward: the tape has run backward already; tape.zero() "
                                "zeroes the adjoints for another backward pass, tape.reset() "
                                "starts a new recording")
        for b, g in pairs:
            _check(_c["tape_set_grad"](t, b._live("Tape.backward: a seed's array"),
                                       g._live("Tape.backward")),
                   self.context._ptr, "Tape.backward")
            self._seeds[id(b)] = (b, g)  # the tape's adjoint of b until replaced or released
        self._error = None
        self._running = self._ran = True
        try:
            status = _c["tape_backward"](t)
        finally:
            self._running = False
        err, self._error = self._error, None
        try:
            _check(status, self.context._ptr, "Tape.backward")
            return
        except Error as e:
            if err is None:
                raise
            failed = e
        # a host step raised: its exception, chained to the error naming the record
        if err.__cause__ is None and err.__context__ is None:
            err.__cause__ = failed
        raise err

    def grad(self, primal):
        """dL/d(primal) after backward, as a NumPy array (a copy); for a structured array
        (a struct parameter's), an array of its structured dtype."""
        t = self._live("Tape.grad", forward_only=False)
        b = self._buffer_of(primal, "Tape.grad")
        g = ctypes.c_void_p()
        _check(_c["tape_grad"](t, b._live("Tape.grad"), ctypes.byref(g)), self.context._ptr,
               "Tape.grad")
        return _read_borrowed(self.context, g.value, b, primal, "Tape.grad")

    def adjoint(self, primal):
        """The adjoint of primal as a kern.Buffer, in place: .numpy() views it on the CPU
        (`tape.adjoint(x).numpy()[:] += ...` inside a record_func backward), .write() and
        DLPack (torch.from_dlpack) elsewhere. The tape owns it: its methods raise
        ArgumentError after tape.reset() or tape.release(); views of it made before stay
        valid."""
        t = self._live("Tape.adjoint", forward_only=False)
        b = self._buffer_of(primal, "Tape.adjoint")
        g = ctypes.c_void_p()
        _check(_c["tape_grad"](t, b._live("Tape.adjoint"), ctypes.byref(g)), self.context._ptr,
               "Tape.adjoint")
        return _Borrowed(self, g.value, b._code, b.shape)

    def scalar_grad(self, record, param):
        """dL/d(the scalar parameter param) of record `record` (0-based, in call order; a
        negative one counts from the end), after backward: param is the parameter's name
        ('a') or its index in the kernel's parameters."""
        what = "Tape.scalar_grad"
        t = self._live(what, forward_only=False)
        n = len(self._kernels)
        if isinstance(record, bool) or not isinstance(record, int):
            raise ArgumentError("%s: the record is an index (0 to %d), not %s"
                                % (what, n - 1, type(record).__name__))
        if not -n <= record < n:
            raise ArgumentError("%s: record %d is out of range (the tape has %d record%s)"
                                % (what, record, n, "" if n == 1 else "s"))
        record %= n
        kernel = self._kernels[record]
        if isinstance(param, str):
            if kernel is None:
                raise ArgumentError("%s: record %d is a host step (Tape.record_func), which has "
                                    "no scalar parameters" % (what, record))
            param = kernel._index.get(param, kernel._index.get(param.replace("__", "."),
                                                               param))
            if isinstance(param, str):
                raise ArgumentError("%s: kernel '%s' of record %d has no parameter named '%s' "
                                    "(it has: %s)" % (what, kernel.name, record, param,
                                                      ", ".join(p.name for p in kernel.params)))
        elif isinstance(param, bool) or not isinstance(param, int):
            raise ArgumentError("%s: the parameter is a name or an index, not %s"
                                % (what, type(param).__name__))
        out = ctypes.c_double()
        _check(_c["tape_scalar_grad"](t, record, param, ctypes.byref(out)),
               self.context._ptr, what)
        return out.value

    @property
    def records(self):
        return _c["tape_count"](self._live("Tape.records"))

    @property
    def saved_bytes(self):
        """The bytes of the copies the tape keeps: what a recorded call overwrote of an
        earlier recorded call's reads, put back during backward (kern_tape_saved_bytes)."""
        return _c["tape_saved_bytes"](self._live("Tape.saved_bytes"))

    def zero(self):
        """Zeroes the adjoints (the seeds' and the tape's own, and the scalar adjoints) and
        keeps the records, so that backward can run again with other seeds (Warp's
        Tape.zero). New calls cannot be recorded after a backward pass until reset(); a tape
        whose backward put overwritten elements back (saved_bytes was not 0) cannot run
        backward again. On a forward tape: zeroes the tangents (those set too)."""
        t = self._live("Tape.zero")
        if self._running:
            raise ArgumentError("Tape.zero: the tape is running its backward pass (a host "
                                "step's backward cannot zero its own tape)")
        _check(_c["tape_zero"](t), self.context._ptr, "Tape.zero")
        self._zero_kept = self._kernels != [] and not self._ran and not self.forward
        self._ran = False

    def _warn_zero_kept(self, what):
        """A call recorded after zero() kept records: before this version zero() dropped
        them, so code written for that meaning would now add to them; said once."""
        if self._zero_kept:
            self._zero_kept = False
            warnings.warn(FutureWarning(
                "%s: tape.zero() keeps the records (Warp's meaning; it dropped them before), "
                "so this call is added to %d earlier record(s); tape.reset() drops them"
                % (what, len(self._kernels))), stacklevel=4)

    def reset(self):
        """Drops the records (and the host steps' callables, the Buffers, arrays and
        modules the records used) and the adjoints: a new recording starts (Warp's
        Tape.reset). The seeds stay the adjoints of their arrays, zeroed; on a forward tape
        the tangents it made go (those set with set_tangent stay, as they are now)."""
        t = self._live("Tape.reset")
        _check(_c["tape_clear"](t), self.context._ptr, "Tape.reset")
        self._ran = self._zero_kept = False
        self._kernels = []
        self._forget_borrowed()
        self._keep = {}
        # the runtime keeps the adjoints and tangents set by the user (seeds, set_tangent)
        # with their primals: those stay alive, the seeds zeroed as a new adjoint is
        kept = {id(e[0]) for e in list(self._seeds.values()) + list(self._tangents.values())}
        self._buffers = {k: e for k, e in self._buffers.items() if id(e[1]) in kept}
        for b, g in self._seeds.values():
            g.write(_np().zeros(g.shape, g.numpy_dtype))

    def release(self):
        """Frees the tape, its records and adjoints (also at garbage collection), and drops
        what it kept. Its methods raise ArgumentError after it."""
        if self._running:
            raise ArgumentError("Tape.release: the tape is running its backward pass (a host "
                                "step's backward cannot release its own tape)")
        self._release_with(_c["tape_destroy"])

    def _gone_now(self, why):
        super()._gone_now(why)
        self._forget_borrowed()
        self._buffers = {}
        self._keep = {}
        self._seeds = {}
        self._tangents = {}
        self._steps = {}
        self._kernels = []

    def _forget_borrowed(self):
        for b in list(self._borrowed):
            b._gone_now("the adjoint is gone: the tape freed it (tape.reset(), tape.release() "
                        "or its context's release)")
        self._borrowed = weakref.WeakSet()


def _run_step(ref, key):
    """kern_tape_backward_fn: calls a host step's backward; an exception is kept for
    Tape.backward to raise, and fails the pass with its text."""
    tape = ref()
    try:
        tape._steps[key][0]()
        return 0
    except BaseException as e:  # noqa: B036 - nothing may unwind through the C frames
        if tape is None:
            return _KERN_ERR_CALLBACK
        tape._error = e
        text = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
        return _c["tape_error"](tape._ptr, _KERN_ERR_CALLBACK, text.encode(errors="replace"))


def _free_step(ref, key):
    """free_user: the C record is gone; so are the step's callable and arrays."""
    tape = ref()
    if tape is not None:
        tape._steps.pop(key, None)


class _Borrowed(Buffer):
    """A buffer the tape owns, lent out (tape.adjoint): releasing it only forgets it, and
    the tape forgets it when it frees the buffer. It keeps the tape alive."""

    def __init__(self, tape, ptr, dtype, shape):
        super().__init__(tape.context, ptr, dtype, shape)
        self._tape = tape
        tape._borrowed.add(self)

    def release(self):
        self._gone_now("the adjoint was released")


def _structured(a):
    np = _np()
    return isinstance(a, np.ndarray) and a.dtype.names is not None


def _read_borrowed(ctx, ptr, b, primal, what):
    """A copy of the tape's buffer ptr (an adjoint or tangent of b, primal's buffer) as NumPy:
    for a structured array, in its structured dtype."""
    adj = Buffer(ctx, ptr, b._code, b.shape)
    try:
        out = adj._read(what)
        if _structured(primal):  # a struct array's adjoint in its structured dtype
            return out.view(primal.dtype).reshape(primal.shape)
        return out
    finally:
        adj._ptr = None  # the tape owns it (or the seed buffer does)


def _components(primal, seed, b, what):
    """A structured seed of a structured primal's dtype as its components (shape b.shape)."""
    why = _dtype_mismatch(primal.dtype, seed.dtype, "") if _structured(primal) else \
        "the array is not structured"
    if why:
        raise ArgumentError("%s of the structured dtype %s for an array of %s: %s"
                            % (what, _show(seed.dtype), _show(primal.dtype), why))
    return _np().ascontiguousarray(seed).view(b.numpy_dtype).reshape(b.shape)
