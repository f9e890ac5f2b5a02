"""kern kernels as differentiable PyTorch ops: `kern.torch.function(kernel, shapes)` is a
function of tensors whose forward runs the kernel K and whose backward runs K.grad, a
torch.autograd.Function (docs/python.md, "PyTorch autograd").

    import kern, kern.torch
    mod = kern.compile("examples/simulate.kern")
    simulate = kern.torch.function(mod.simulate, shapes={"out": "x0"})
    out = simulate(x0, w, steps=16)         # x0, w: tensors (requires_grad as you like)
    out.sum().backward()                    # x0.grad, w.grad by simulate.grad

Imported on demand (`import kern.torch`): the rest of the package needs no PyTorch."""

import torch as _torch

from ._bridge import _MISSING, _Op
from ._errors import ArgumentError, UnsupportedError
from ._library import _DTYPES

__all__ = ["function", "Function"]


class Function:
    """A kernel as a PyTorch function (made by kern.torch.function). Calling it with the
    kernel's arguments (by position or name) returns the outputs: the arrays the kernel
    writes, in parameter order (one tensor, or a tuple of them)."""

    def __init__(self, kernel, shapes=None):
        ctx = kernel.module.context
        if ctx.device not in ("cpu", "cuda"):
            raise ArgumentError("kern.torch.function: kernel '%s' runs on a %s context, and "
                                "PyTorch has tensors only on the CPU and CUDA" %
                                (kernel.name, ctx.device))
        self._op = _Op(kernel, shapes, "kern.torch.function")
        if not self._op.outputs:
            raise ArgumentError("kern.torch.function: kernel '%s' writes none of its arrays, "
                                "so it has no outputs" % kernel.name)
        self.kernel = kernel
        self.device = _torch.device("cpu" if ctx.device == "cpu" else "cuda:0")

    @property
    def outputs(self):
        """The names of the outputs, in the order they are returned."""
        return [self._op.params[i].name for i in self._op.outputs]

    def __call__(self, *args, **kwargs):
        values = self._op.bind(args, kwargs)
        outs = _KernFunction.apply(self, *values)
        return outs[0] if len(outs) == 1 else outs

    def __repr__(self):
        return "kern.torch.Function(%s -> %s)" % (self.kernel.name, ", ".join(self.outputs))

    # ---- the pieces of forward and backward -------------------------------------------

    def _where(self, i):
        return "kern.torch.function: kernel '%s', parameter '%s'" % (self.kernel.name,
                                                                      self._op.params[i].name)

    def _tensor(self, i, v):
        """An input tensor as the kernel uses it in place: detached, of the parameter's
        dtype, on the context's device; contiguous (PyTorch makes a copy if it is not)."""
        p = self._op.params[i]
        if not isinstance(v, _torch.Tensor):
            raise ArgumentError("%s: expected a torch.Tensor of %s, got %s" %
                                (self._where(i), _DTYPES[p.dtype], type(v).__name__))
        if str(v.dtype) != p.torch_dtype:
            raise ArgumentError("%s (%s): a tensor of %s, expected %s (kern.torch converts "
                                "nothing: use .to(%s))" % (self._where(i), p.type_name,
                                                           str(v.dtype).replace("torch.", ""),
                                                           _DTYPES[p.dtype], p.torch_dtype))
        if v.device != self.device:
            raise ArgumentError("%s: a tensor on %s, and the kernel runs on %s" %
                                (self._where(i), v.device, self.device))
        return v.detach().contiguous()

    def _scalar(self, i, v):
        """A scalar argument as a number (a tensor of one element is read with .item())."""
        if isinstance(v, _torch.Tensor):
            if v.numel() != 1:
                raise ArgumentError("%s: expected a scalar %s, got a tensor of shape %s" %
                                    (self._where(i), self._op.kern_type(i), tuple(v.shape)))
            return v.item()
        return v

    def _launch(self, kernel, values):
        kernel._run(values, {}, None)  # never on a kern.Tape: the op is PyTorch's to differentiate

    def _forward(self, values):
        op = self._op
        if self.device.type == "cuda" and _torch.cuda.is_current_stream_capturing():
            raise UnsupportedError(
                "kern.torch.function: kernel '%s' is called while PyTorch captures a CUDA "
                "graph (torch.cuda.graph); kern's launches cannot join it: capture them with "
                "kern.Graph instead" % self.kernel.name)
        if self.kernel.module.context._graph is not None:
            raise ArgumentError("kern.torch.function: kernel '%s' is called while its context "
                                "captures a kern.Graph (capture the kernels' own calls)" %
                                self.kernel.name)
        call = []
        for i, (p, v) in enumerate(zip(op.params, values)):
            if not p.is_array:
                call.append(self._scalar(i, v))
            elif i in op.outputs:
                if v is _MISSING:
                    call.append(_torch.zeros(op.shape_of(i, values), dtype=getattr(
                        _torch, _DTYPES[p.dtype]), device=self.device))
                else:  # an array the kernel updates: a new tensor, from its initial value
                    call.append(self._tensor(i, v).clone())
            else:
                call.append(self._tensor(i, v))
        self._launch(self.kernel, call)
        return call

    def _backward(self, values, call, grads_out, needs):
        """K.grad on the arguments as K left them; the gradients of the inputs (and of the
        initial values of updated arrays, and of scalars given as tensors)."""
        op = self._op
        params = op.params
        if not any(needs):
            return [None] * len(params)
        adj = {}
        for i, p in enumerate(params):
            if not p.differentiable:
                continue
            if not p.is_array:
                adj[i] = _torch.zeros(1, dtype=getattr(_torch, _DTYPES[p.dtype]),
                                      device=self.device)
            elif i in op.outputs:
                g = grads_out[op.outputs.index(i)]
                # K.grad turns it, in place, into the adjoint before the write: a copy
                adj[i] = _torch.zeros_like(call[i]) if g is None else \
                    g.detach().to(call[i].dtype).contiguous().clone()
            else:
                adj[i] = _torch.zeros_like(call[i])
        self._launch(op.grad_kernel(), call + [adj[i] for i in sorted(adj)])
        out = []
        for i, (p, v) in enumerate(zip(params, values)):
            if i not in adj or not needs[i] or v is _MISSING:
                out.append(None)
            elif not p.is_array:
                out.append(adj[i].reshape(v.shape).to(v.dtype))
            else:
                out.append(adj[i])
        return out


class _KernFunction(_torch.autograd.Function):
    """forward runs K on the tensors (outputs made here); backward runs K.grad on what
    forward saved: the inputs as given and the outputs as K left them."""

    @staticmethod
    def forward(ctx, fn, *values):
        call = fn._forward(values)
        op = fn._op
        outs = tuple(call[i] for i in op.outputs)
        ctx.fn = fn
        ctx.values = [None if v is _MISSING or isinstance(v, _torch.Tensor) else v
                      for v in values]  # tensors go through save_for_backward
        ctx.missing = [v is _MISSING for v in values]
        ctx.shapes = [tuple(v.shape) if isinstance(v, _torch.Tensor) else None for v in values]
        ctx.dtypes = [v.dtype if isinstance(v, _torch.Tensor) else None for v in values]
        saved = [call[i] for i in range(len(call)) if isinstance(call[i], _torch.Tensor)]
        ctx.save_for_backward(*saved)
        ctx.scalars = [None if isinstance(c, _torch.Tensor) else c for c in call]
        nondiff = [call[i] for i in op.outputs if not op.params[i].differentiable]
        if nondiff:
            ctx.mark_non_differentiable(*nondiff)
        return outs

    @staticmethod
    @_torch.autograd.function.once_differentiable
    def backward(ctx, *grads_out):
        fn = ctx.fn
        saved = iter(ctx.saved_tensors)
        call = [next(saved).detach() if s is None else s for s in ctx.scalars]
        values = [_MISSING if m else (_Shape(s, d) if s is not None else v)
                  for m, v, s, d in zip(ctx.missing, ctx.values, ctx.shapes, ctx.dtypes)]
        needs = list(ctx.needs_input_grad[1:])
        return (None,) + tuple(fn._backward(values, call, grads_out, needs))


class _Shape:
    """What backward needs of an argument tensor: its shape and dtype."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def function(kernel, shapes=None):
    """The kernel as a differentiable PyTorch function (a torch.autograd.Function inside).

    kernel: a Kernel of a module compiled on a "cpu" or "cuda" context. Its parameters:
    - arrays the kernel reads only: inputs, tensors of the parameter's dtype on the
      context's device, used in place (non-contiguous ones are made contiguous first);
    - arrays the kernel writes: outputs, returned in parameter order. Given in the call,
      the tensor is the array's initial value (a copy is updated, the argument is left
      alone, and its gradient is that of the initial value); not given, the output starts
      as zeros of the shape in shapes[name]: a tuple, the name of a parameter whose array
      has that shape, or a function of the arguments by name returning one;
    - scalars: numbers, passed through without gradient; a float scalar given as a
      one-element tensor that requires grad gets its gradient (read with .item()).
    backward runs K.grad on the inputs and on the outputs as K left them (saved, so an
    in-place change of either is detected by PyTorch), with the outputs' incoming
    gradients; it is once differentiable (no double backward)."""
    return Function(kernel, shapes)
