"""Parameters of vector, matrix and struct types: _View parses the declared type that the
C API gives (kern_param_info.type_name: "vec3[]", "mat3[,]", "P{pos:vec3,mass:f32}[]", a
by-value "vec3") into the NumPy dtype of one element (a structured dtype for a struct,
a subarray dtype such as ('<f4', (3,)) for a vector or matrix), and turns a structured
array whose dtype matches the struct into a view of its components without a copy."""

from ._errors import ArgumentError
from ._library import _DTYPES, _KERN_NAMES, _np

_SCALARS = {name: code for code, name in _KERN_NAMES.items()}


def _aggregate(name):
    """(component scalar name, shape) of a vector, matrix or quaternion type name, or None."""
    base, comp = name, "f32"
    if name.startswith("d") and name[1:4] in ("vec", "mat", "qua"):
        base, comp = name[1:], "f64"
    elif name.startswith("ivec"):
        base, comp = name[1:], "i32"
    if base == "quat":
        return comp, (4,)
    if base[:3] in ("vec", "mat") and base[3:] in ("2", "3", "4"):
        n = int(base[3:])
        return comp, ((n,) if base[:3] == "vec" else (n, n))
    return None


def _scalar_dtype(name):
    code = _SCALARS.get(name)
    if code is None or code not in _DTYPES:
        raise ArgumentError("kern: no NumPy dtype for the type '%s'" % name)
    return _np().dtype(_DTYPES[code]).newbyteorder("<")


class _Parser:
    """type := NAME ['{' NAME ':' type (',' NAME ':' type)* '}'] ['[' ','* ']']"""

    def __init__(self, text):
        self.s, self.i = text, 0

    def name(self):
        j = self.i
        while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] == "_"):
            self.i += 1
        if j == self.i:
            raise ArgumentError("kern: cannot read the parameter type '%s'" % self.s)
        return self.s[j:self.i]

    def eat(self, c):
        if self.s.startswith(c, self.i):
            self.i += 1
            return True
        return False

    def element(self):
        """The NumPy dtype of one value of the type at the cursor, and its struct name."""
        np = _np()
        name = self.name()
        if self.eat("{"):
            fields = []
            while True:
                f = self.name()
                if not self.eat(":"):
                    raise ArgumentError("kern: cannot read the parameter type '%s'" % self.s)
                fields.append((f, self.element()[0]))
                if self.eat("}"):
                    return np.dtype(fields), name
                if not self.eat(","):
                    raise ArgumentError("kern: cannot read the parameter type '%s'" % self.s)
        agg = _aggregate(name)
        if agg is not None:
            return np.dtype((_scalar_dtype(agg[0]), agg[1])), None
        return _scalar_dtype(name), None

    def rank(self):
        if not self.eat("["):
            return 0
        r = 1
        while self.eat(","):
            r += 1
        if not self.eat("]") or self.i != len(self.s):
            raise ArgumentError("kern: cannot read the parameter type '%s'" % self.s)
        return r


class _View:
    """A parameter declared with a vector, matrix or struct type: type_name as declared,
    dtype (one element: structured for a struct, a subarray dtype otherwise), rank (the
    declared array rank; 0 passed by value), tail (the trailing extents in memory)."""

    def __init__(self, type_name, tail):
        ps = _Parser(type_name)
        self.type_name = type_name
        self.dtype, self.struct = ps.element()
        self.rank = ps.rank()
        self.tail = tuple(tail)

    def shape_text(self):
        """The shape that a caller's array has: '(N, M, 3, 3)', '(3,)'; a struct's both ways,
        '(N,) of its structured dtype, or (N, 7) of float32'."""
        outer = ["N", "M", "K", "L"][:self.rank]
        flat = _tuple_text(outer + [str(t) for t in self.tail])
        if self.struct is None:
            return flat
        whole = _tuple_text(outer) + " of" if outer else "a record (0-d array) of"
        return "%s its structured dtype, or %s of %s" % (whole, flat, _component(self.dtype))

    def components(self, where, v):
        """The component array (a view, no copy) of v, a structured array of this struct's
        dtype; ArgumentError naming the first difference otherwise."""
        np = _np()
        why = _dtype_mismatch(self.dtype, v.dtype, "")
        if why:
            raise ArgumentError("%s: the structured dtype %s does not match the struct %s: %s "
                                "(kernel.param_dtype() gives the dtype: %s)" %
                                (where, _show(v.dtype), self.struct, why, _show(self.dtype)))
        return v.view(np.dtype((_component(self.dtype), self.tail)))


def _tuple_text(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _leaf(dt):
    return dt.base if dt.shape else dt


def _leaves(dt):
    """The scalar dtypes of dt's leaves, in order."""
    if dt.names is None:
        return [_leaf(dt)]
    return [x for n in dt.names for x in _leaves(dt.fields[n][0])]


def _component(dt):
    """The scalar dtype a struct (or vector) is stored as in memory (common/types.h,
    ty_storage_leaf): its first float leaf's, else its first leaf's. A struct of f32 and
    i32 fields is an array of f32 words whose integer words hold the integers' bits, so a
    structured array is viewed, never converted."""
    leaves = _leaves(dt)
    floats = [x for x in leaves if x.kind == "f"]
    return floats[0] if floats else leaves[0]


def _dtype_mismatch(want, got, path):
    """Why the structured dtype got differs from want (names in order, offsets, field types,
    size), or None."""
    if got.names is None:
        return "%sis %s, not a struct" % (("field '%s' " % path) if path else "it ", got)
    if tuple(got.names) != tuple(want.names):
        missing = [n for n in want.names if n not in got.names]
        extra = [n for n in got.names if n not in want.names]
        if missing:
            return "field '%s%s' is missing" % (path, missing[0])
        if extra:
            return "field '%s%s' is not in the struct" % (path, extra[0])
        return "the fields are in another order (%s, not %s)" % (
            ", ".join(got.names), ", ".join(want.names))
    for n in want.names:
        wt, wo = want.fields[n][:2]
        gt, go = got.fields[n][:2]
        if go != wo:
            return "field '%s%s' is at offset %d, not %d" % (path, n, go, wo)
        if wt.names is not None:
            why = _dtype_mismatch(wt, gt, path + n + ".")
            if why:
                return why
        elif gt.names is not None or gt.shape != wt.shape or _leaf(gt) != _leaf(wt):
            return "field '%s%s' is %s, not %s" % (path, n, _show(gt), _show(wt))
    if got.itemsize != want.itemsize:
        return "its size is %d bytes, not %d" % (got.itemsize, want.itemsize)
    return None


def _show(dt):
    if dt.names is None:
        return str(dt.base) + (str(dt.shape) if dt.shape else "")
    return "[%s]" % ", ".join("('%s', %s)" % (n, _show(dt.fields[n][0])) for n in dt.names)
