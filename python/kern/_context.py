"""Contexts: Context (a device and everything made on it, its stream ordering with
PyTorch), _Made (what the objects made on a context share: their handle and its end),
the default context of each device (context()) and synchronize()."""

import ctypes
import re
import threading
import weakref

from ._errors import _ERRORS, ArgumentError, Error, _check, _python_words
from ._library import _BACKENDS, _AdstackInfo, _c, _Options

def _parse_device(device):
    """"cuda:1" -> ("cuda", 1); "cuda" -> ("cuda", None): the backend's default device.
    ArgumentError for a name the runtime has no device for, or a bad number."""
    if not isinstance(device, str):
        raise ArgumentError("a device is a string such as 'cpu', 'cuda', 'cuda:1' or "
                            "'vulkan:0', not %s" % type(device).__name__)
    name, colon, number = device.partition(":")
    if name not in _BACKENDS:
        raise ArgumentError("unknown device %r (%s); NAME:N picks device N of a backend"
                            % (device, ", ".join(_BACKENDS)))
    if not colon:
        return name, None
    if re.fullmatch(r"-[0-9]+", number):
        raise ArgumentError("device %r: the device number must be 0 or more (%s:0 is the "
                            "first)" % (device, name))
    if not re.fullmatch(r"0|[1-9][0-9]{0,8}", number):
        raise ArgumentError("device %r: %r is not a device number (%s:0, %s:1, ...)"
                            % (device, number, name, name))
    return name, int(number)


class Context:
    """A device and everything made on it: `Context("cpu")`, `Context("cuda")` (device 0),
    `Context("cuda:1")` (device 1), `Context("vulkan")` (the most capable Vulkan device, or
    $KERN_VULKAN_DEVICE), `Context("vulkan:N")`. `device` is the backend's name ("cuda")
    and `index` the device's number; several contexts, one per GPU, may be used from
    different threads at once (docs/python.md, "Several GPUs"). Options: threads (CPU
    workers, 0 = all), checks (bounds, division and shift checks in JIT code, on by
    default), debug (a debug build: the checks and scalar CPU code), ad_stack_size
    (adstack capacity of unbounded loops), ad_memory_budget (bytes a gradient launch's
    adstacks may take, 0 = 3/4 of the device's free memory), ad_strategy ("auto", "store",
    "slots" or "recompute"; docs/autodiff.md), fast_math (True: the GPU's fast
    approximations of f32 sin, exp, log, pow, ... instead of kern's accuracy table,
    docs/reference.md; None: $KERN_FAST_MATH) and cache (the compile cache of
    docs/runtime.md: False off, True on, a str its directory; None: $KERN_CACHE,
    $KERN_CACHE_DIR, else on in ~/.cache/kern). A context is used by one thread at a time.

    sync (GPUs): True (the default) makes every call wait for the producers' work before and
    for its own kernels after, so any consumer sees the results. sync=False orders by
    streams instead, without waiting: DLPack producers make kern's CUDA stream wait for
    their work (__dlpack__(stream=...)), and after a call PyTorch's current stream waits
    for kern's; other consumers must call synchronize() before reading results.

    checks are on by default, as in `kernc` and the C API: an index out of bounds, a
    division by zero or a bad shift raises DeviceError with the .kern line instead of
    corrupting memory. Checked code keeps the SIMD and GPU code paths (docs/runtime.md says
    what the checks cost); Context(checks=False) leaves them out."""

    _AD_STRATEGIES = {"auto": 0, "store": 1, "slots": 2, "recompute": 3}

    def __init__(self, device="cpu", threads=0, debug=False, ad_stack_size=0, sync=True,
                 ad_memory_budget=0, ad_strategy=None, fast_math=None, checks=True,
                 cache=None, _promote_f64=False):
        self.sync = bool(sync)
        self._torch_stream = None
        self._graph = None  # the kern.Graph capturing this context's launches
        name, index = _parse_device(device)
        opts = _c["ctx_defaults"]()  # the runtime's defaults and its environment
        opts.backend, opts.debug = _BACKENDS[name], bool(debug)
        opts.no_checks = not checks and not debug
        if index is not None:
            opts.device = index
        opts.threads, opts.ad_stack_size = int(threads), int(ad_stack_size)
        opts.ad_memory_budget = int(ad_memory_budget)
        opts.promote_f64 = bool(_promote_f64)  # kern.gradcheck's f64 reference
        if fast_math is not None:  # None: $KERN_FAST_MATH, else kern's accuracy table
            opts.fast_math = bool(fast_math)
        if ad_strategy is not None:  # None: $KERN_AD_STRATEGY, else auto
            if ad_strategy not in self._AD_STRATEGIES:
                raise ArgumentError("unknown ad_strategy %r (%s)" % (
                    ad_strategy, ", ".join(self._AD_STRATEGIES)))
            opts.ad_strategy = self._AD_STRATEGIES[ad_strategy]
        if cache is not None:  # None: $KERN_CACHE, $KERN_CACHE_DIR
            if not isinstance(cache, (bool, str)):
                raise ArgumentError("cache must be True, False or a directory (a str), not %r"
                                    % (cache,))
            opts.no_cache = cache is False
            if isinstance(cache, str):
                opts.cache_dir = cache.encode()
        p = ctypes.c_void_p()
        status = _c["ctx_create"](ctypes.byref(opts), ctypes.byref(p))
        self._ptr = p.value
        self.device = name  # the backend: "cpu", "cuda", "vulkan"
        self.index = index  # the device's number (the runtime's once created)
        # what was made on it (modules, buffers, tapes): they forget their handles when it is
        # released, and each keeps the context alive (a strong reference) while it lives
        self._objects = weakref.WeakSet()
        if status != 0:
            msg = _c["last_error"](self._ptr).decode() if self._ptr else "out of memory"
            self.release()
            raise _ERRORS.get(status, Error)("kern.Context(%r): %s" % (device,
                                                                       _python_words(msg)))
        self.index = _c["device_index"](self._ptr)

    @property
    def device_name(self):
        return _c["device_name"](self._live("Context.device_name")).decode()

    def adstack_info(self):
        """How the last gradient launch kept its adstacks (docs/autodiff.md): a dict with
        strategy ("store", "slots", "recompute"; None before any), needed_bytes,
        store_all_bytes, budget (None: the device's memory, not measured), slots, stride,
        heap_bytes and recompute (the expected time against storing all)."""
        info = _AdstackInfo()
        p = self._live("Context.adstack_info")
        _check(_c["adstack_info"](p, ctypes.byref(info)), p, "Context.adstack_info")
        names = {v: k for k, v in self._AD_STRATEGIES.items() if v}
        return {"strategy": names.get(info.last_strategy), "needed_bytes": info.last_needed_bytes,
                "store_all_bytes": info.last_store_all_bytes,
                "budget": None if info.last_budget >= 2**63 - 1 else info.last_budget,
                "slots": info.last_slots, "stride": info.last_stride,
                "heap_bytes": info.heap_bytes, "recompute": info.last_recompute}

    def synchronize(self):
        """Waits for every launch of the context (and reports a device error)."""
        _check(_c["sync"](self._live("Context.synchronize")), self._ptr, "Context.synchronize")

    @property
    def cuda_stream(self):
        """The CUstream kern's CUDA work goes to, as an int (None off CUDA)."""
        p = self._live("Context.cuda_stream")
        return _c["cuda_stream"](p) if self.device == "cuda" else None

    def _torch_device(self):
        import torch
        return torch.device("cuda", self.index)

    def _kern_stream(self):
        import torch
        if self._torch_stream is None:
            self._torch_stream = torch.cuda.ExternalStream(self.cuda_stream,
                                                           device=self._torch_device())
        return self._torch_stream

    def _before_torch_call(self):
        """PyTorch CUDA tensors used in place: their pending work first (kern's stream waits
        for PyTorch's current one on the context's GPU; sync=True waits on the host)."""
        import torch
        current = torch.cuda.current_stream(self._torch_device())
        if self.sync:
            current.synchronize()
        else:
            self._kern_stream().wait_stream(current)

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
            torch.cuda.current_stream(self._torch_device()).wait_stream(ks)

    def release(self):
        """Frees the context with its modules, buffers and tapes (also at garbage collection,
        which cannot come while one of them lives: each keeps its context). Their methods
        raise ArgumentError after it; NumPy and DLPack views of its buffers stay valid."""
        if getattr(self, "_ptr", None):
            for o in list(self._objects):
                o._forget()
            self._objects = weakref.WeakSet()
            _c["ctx_release"](self._ptr)
            self._ptr = None

    def __del__(self):
        self.release()

    def _live(self, what="kern.Context"):
        """The handle; ArgumentError naming what (the Python call) once released."""
        if not self._ptr:
            raise ArgumentError("%s: the context was released" % what)
        return self._ptr

    def _where(self):
        """"cuda:1", "vulkan:0"; the CPU (and a device not chosen yet) by its name alone."""
        if self.device == "cpu" or self.index is None or self.index < 0:
            return self.device
        return "%s:%d" % (self.device, self.index)

    def __repr__(self):
        return "kern.Context(%r)" % self._where()


class _Made:
    """What an object made on a context (Buffer, Module, Tape) shares: its C handle _ptr,
    gone after its release or its context's (_forget), and _live, which hands the handle
    out or raises ArgumentError naming the Python call and why it is gone."""

    _noun = "object"  # the object in messages: "the buffer was released"
    _ptr = None
    _gone = None  # why _ptr is None: the message's end

    def _made(self, ctx, ptr):
        self.context = ctx  # a strong reference: the context lives while the object does
        self._ptr = ptr
        ctx._objects.add(self)  # forgotten when the context is released

    def _live(self, what):
        """The handle; ArgumentError naming what (the Python call) once it is gone."""
        if not self._ptr:
            raise ArgumentError("%s: %s" % (what, self._gone or
                                            "the %s was released" % self._noun))
        return self._ptr

    def _release_with(self, c_release):
        """release(): the handle freed by c_release, unless the context's release did."""
        if self._ptr and self.context._ptr:
            c_release(self._ptr)
        self._gone_now("the %s was released" % self._noun)

    def _forget(self):  # the context is going: it frees the object itself
        self._gone_now("the %s's context was released" % self._noun)

    def _gone_now(self, why):
        if self._ptr:
            self._gone = why
        self._ptr = None

    def __del__(self):  # release() at garbage collection
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


_default = {}
_default_lock = threading.Lock()


def context(device="cpu"):
    """The default context of a device ("cuda", "cuda:1", ...), created on first use (and
    again after a release)."""
    key = _parse_device(device)
    with _default_lock:
        if key not in _default or not _default[key]._ptr:
            _default[key] = Context(device)
        return _default[key]


def synchronize(device="cpu"):
    context(device).synchronize()
