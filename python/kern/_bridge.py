"""What kern.torch and kern.jax share: a kernel seen as a function (_Op). Its array
parameters that the kernel writes are its outputs, the others its inputs; scalars pass
through. A call's arguments are bound by name (_Op.bind), outputs not given are made with
the shapes the op was told (_Op.shape_of), and the gradient kernel K.grad is called with
K's parameters then one adjoint per differentiable parameter (_Op.grad_kernel)."""

from ._errors import ArgumentError, NotFoundError
from ._library import _KERN_NAMES

_MISSING = object()


class _Op:
    def __init__(self, kernel, shapes, what):
        self.kernel = kernel
        self.what = what  # "kern.torch.function", for messages
        self.name = kernel.name
        params = kernel.params
        self.params = params
        self.outputs = [i for i, p in enumerate(params) if p.is_array and p.written]
        self.inputs = [i for i, p in enumerate(params) if p.is_array and not p.written]
        self.shapes = {}
        for name, spec in dict(shapes or {}).items():
            p = kernel.param(name)  # ArgumentError naming the parameters there are
            i = params.index(p)
            if i not in self.outputs:
                raise ArgumentError("%s: kernel '%s', parameter '%s' is not an output (the "
                                    "kernel never writes it), so it takes no shape; the outputs "
                                    "are %s" % (what, self.name, p.name, self._names(self.outputs)))
            if not (callable(spec) or isinstance(spec, (str, tuple, list))):
                raise ArgumentError("%s: kernel '%s', output '%s': a shape is a tuple, the name "
                                    "of a parameter whose array has the same shape, or a "
                                    "function of the arguments; got %s" %
                                    (what, self.name, p.name, type(spec).__name__))
            if isinstance(spec, str) and (spec not in kernel._index or
                                          not params[kernel._index[spec]].is_array):
                raise ArgumentError("%s: kernel '%s', output '%s' shaped like '%s': the kernel "
                                    "has no array parameter of that name" %
                                    (what, self.name, p.name, spec))
            self.shapes[i] = spec
        self._grad = None

    def _names(self, idx):
        return ", ".join("'%s'" % self.params[i].name for i in idx) or "none"

    def bind(self, args, kwargs):
        """The arguments by parameter: a list with _MISSING for each output to make.
        Positional arguments skip the outputs that shapes= makes."""
        params = self.params
        n = len(params)
        # by position: the parameters in order, but for the outputs made with a shape
        positional = [i for i in range(n) if i not in self.shapes]
        if len(args) > len(positional):
            raise ArgumentError("%s: kernel '%s' takes %d arguments by position (%s), got %d" %
                                (self.what, self.name, len(positional),
                                 self._names(positional), len(args)))
        values = [_MISSING] * n
        for i, v in zip(positional, args):
            values[i] = v
        for k, v in kwargs.items():
            i = self.kernel._index.get(k)
            if i is None:
                raise ArgumentError("%s: kernel '%s' has no parameter named '%s' (it has: %s)" %
                                    (self.what, self.name, k, ", ".join(p.name for p in params)))
            if values[i] is not _MISSING:
                raise ArgumentError("%s: kernel '%s': parameter '%s' is given twice" %
                                    (self.what, self.name, params[i].name))
            values[i] = v
        missing = [i for i, v in enumerate(values) if v is _MISSING and
                   (i not in self.outputs or i not in self.shapes)]
        if missing:
            outs = [i for i in missing if i in self.outputs]
            raise ArgumentError("%s: kernel '%s': missing argument%s %s%s" % (
                self.what, self.name, "s" if len(missing) > 1 else "", self._names(missing),
                "" if not outs else " (an output is given, as its initial value, or made "
                "with a shape: shapes={'%s': ...})" % params[outs[0]].name))
        return values

    def shape_of(self, i, values):
        """The shape of output i, not given in values."""
        spec = self.shapes[i]
        if isinstance(spec, str):
            like = values[self.kernel._index[spec]]
            if like is _MISSING:
                raise ArgumentError("%s: kernel '%s', output '%s' is shaped like '%s', which "
                                    "is not given" % (self.what, self.name, self.params[i].name,
                                                      spec))
            return tuple(like.shape)
        if callable(spec):
            named = {p.name: v for p, v in zip(self.params, values) if v is not _MISSING}
            spec = spec(**named)
        try:
            return tuple(int(s) for s in spec)
        except (TypeError, ValueError):
            raise ArgumentError("%s: kernel '%s', output '%s': the shape %r is not a tuple of "
                                "integers" % (self.what, self.name, self.params[i].name,
                                              spec)) from None

    def grad_kernel(self):
        """K.grad (compiled on first use); NotFoundError saying why when there is none."""
        if self._grad is None:
            try:
                self._grad = self.kernel.module._kernel(self.name + ".grad", self.what)
            except NotFoundError as e:
                raise NotFoundError("%s: kernel '%s' has no gradient kernel: %s" %
                                    (self.what, self.name, e)) from None
        return self._grad

    def kern_type(self, i):
        return _KERN_NAMES[self.params[i].dtype]
