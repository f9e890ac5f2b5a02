"""Graphs: Graph captures a context's kernel calls (`with kern.Graph(ctx) as g:`) into a C
graph (kern_graph_begin/end, docs/runtime.md) that replays them with `g.launch()`."""

import ctypes

from ._context import _Made, context as _default_context
from ._errors import ArgumentError, _check
from ._library import _c


class Graph(_Made):
    """Kernel calls captured once and replayed many times (the C API's kern_graph):

        with kern.Graph(ctx) as g:        # the calls are checked and recorded, not run
            mod.step(x=x, y=y, a=0.5)
            mod["step.grad"](x, y, 0.5, gx, gy, ga)
        for _ in range(100):
            g.launch()                    # runs them in order, on the same arrays

    A call captures its arrays by identity and its scalars by value; the graph keeps the
    arrays (NumPy arrays, tensors, kern Buffers) and the modules alive until its release.
    Arrays must be used in place: a call whose argument would be copied is refused.
    Calls on a kern.Tape and Tape.backward cannot be captured. On CUDA a replay is one CUDA
    graph launch; on the CPU and Vulkan the launches are submitted in order."""

    _noun = "graph"

    def __init__(self, context=None):
        ctx = context or _default_context()
        self._keep = []  # what the captured calls use: their arguments, modules, kernels
        self._torch = []  # PyTorch CUDA tensors among them: ordered at each replay
        self._state = "new"  # "capturing", "captured"
        self.context = ctx
        ctx._live("kern.Graph")

    def __enter__(self):
        ctx = self.context
        if self._state != "new":
            raise ArgumentError("kern.Graph: a graph captures once (make a new kern.Graph)")
        if ctx._graph is not None:
            raise ArgumentError("kern.Graph: the context is already capturing a graph")
        _check(_c["graph_begin"](ctx._live("kern.Graph")), ctx._ptr, "kern.Graph")
        ctx._graph = self
        self._state = "capturing"
        return self

    def __exit__(self, exc_type, exc, tb):
        ctx = self.context
        ctx._graph = None
        self._state = "captured"
        p = ctypes.c_void_p()
        if not ctx._ptr:  # released inside the capture
            self._gone = "the graph's context was released"
            return False
        status = _c["graph_end"](ctx._ptr, ctypes.byref(p))
        if p.value:
            self._made(ctx, p.value)
        if exc_type is None:
            _check(status, ctx._ptr, "kern.Graph")
        elif p.value:  # the capture failed: no graph
            self.release()
            self._gone = "its capture raised %s" % exc_type.__name__
        return False

    def _capture(self, kernel, bound):
        """A call made while capturing: refused if it copies an argument; else its
        arguments are kept alive with the graph."""
        if bound.copy_back:
            b, v = bound.copy_back[0]
            raise ArgumentError("kernel '%s': an argument (%s) would be copied, and a call "
                                "captured into a kern.Graph must use its arrays in place"
                                % (kernel.name, type(v).__name__))
        self._keep.append((kernel.module, bound.values))
        self._torch.extend(bound.cuda_torch)

    @property
    def launches(self):
        """The number of kernel launches captured."""
        return _c["graph_count"](self._live("Graph.launches"))

    def launch(self):
        """Replays the captured launches in order, after the work submitted before (and,
        for PyTorch CUDA tensors, after PyTorch's current stream, as a call is)."""
        if self._state != "captured":
            raise ArgumentError("Graph.launch: the graph is %s" % (
                "still capturing (launch it after the with block)"
                if self._state == "capturing" else "not captured yet (with graph: ...)"))
        p = self._live("Graph.launch")
        ctx = self.context
        if self._torch:
            ctx._before_torch_call()
        _check(_c["graph_launch"](p), ctx._ptr, "Graph.launch")
        if ctx.device != "cpu":
            ctx._after_call(bool(self._torch), self._torch)

    def release(self):
        """Waits for the replays, then frees the graph and what it kept (also at garbage
        collection); launch() raises ArgumentError after it."""
        self._release_with(_c["graph_release"])
        self._keep = []
        self._torch = []

    def __repr__(self):
        return "kern.Graph(%s, %s)" % (self.context.device, self._state)
