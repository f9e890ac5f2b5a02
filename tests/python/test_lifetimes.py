"""Lifetimes in the Python package (docs/python.md, Lifetimes; issue 23, "Nothing crashes
the host"): NumPy views of a buffer keep its memory after the buffer's and the context's
release; every object wrapping a C handle raises ArgumentError, naming the Python call,
once its owner is gone, and keeps working while only the Python Context object is dropped;
a tape keeps the Buffers and arrays of its records (a chain on temporaries, against f64
finite differences); shapes are checked before anything is copied; messages name what
the user did, never the C API.

CI runs these against the sanitized libkern-jit too (.ci/run): a read of freed memory is an
AddressSanitizer report there, and a crash or garbage here."""

import gc
import re
import tracemalloc
import weakref

import numpy as np
import pytest

import kern

SRC = """
kernel sq(x: f32[], y: f32[], a: f32) {
    for i in 0..len(x) {
        y[i] = a * x[i] * x[i];
    }
}

kernel step(x: f32[], y: f32[], a: f32) {
    for i in 0..len(x) {
        y[i] = sin(x[i]) * a + x[i] * x[i];
    }
}

kernel copy8(x: u8[], y: u8[]) {
    for i in 0..len(y) {
        y[i] = x[i];
    }
}

kernel rows(u: f32[,], y: f32[]) {
    for i in 0..len(y) {
        y[i] = u[0, i];
    }
}
"""

SQ = SRC[:SRC.index("kernel step")]  # sq alone: quicker to compile, for the many small cases

BIG = 4 << 20  # 16 MiB of f32: freed memory goes back to the system, and a read faults


def _no_c_names(msg):
    """A message shows no function of the C API (kern_buffer_create, kern_tape_backward)."""
    assert not re.search(r"\bkern_\w+", msg), msg


# ---- NumPy views keep the memory (bug 4) ---------------------------------------------

VIEWS = {
    "numpy()": lambda b: b.numpy(),
    "np.asarray (__array__)": lambda b: np.asarray(b),
    "np.array(copy=False)": lambda b: np.array(b, copy=False),
    "a slice of numpy()": lambda b: b.numpy()[1:],
}


def _drop_buffer(ctx, b):
    b.release()


def _drop_context(ctx, b):
    ctx.release()


def _drop_both(ctx, b):
    b.release()
    ctx.release()


def _drop_references(ctx, b):
    pass  # the caller deletes its references to both and collects


GONE = {"buffer.release()": _drop_buffer, "context.release()": _drop_context,
        "both released": _drop_both, "both collected": _drop_references}


@pytest.mark.parametrize("n", [16, BIG])
@pytest.mark.parametrize("gone", list(GONE))
@pytest.mark.parametrize("view", list(VIEWS))
def test_numpy_view_keeps_the_memory(view, gone, n):
    """A NumPy view of a buffer reads and writes its memory after the buffer, its context
    or both are released or collected; the memory is freed with the last view."""
    ctx = kern.Context(threads=1)
    want = np.arange(n, dtype=np.float32)
    b = kern.Buffer.from_array(want, context=ctx)
    v = VIEWS[view](b)
    if view == "a slice of numpy()":
        want = want[1:]
    GONE[gone](ctx, b)
    del b, ctx
    gc.collect()
    # new allocations of the same size would take freed memory
    others = [kern.Buffer.from_array(np.full(n, -1, np.float32)) for _ in range(3)]
    np.testing.assert_array_equal(v, want)
    assert v.sum(dtype=np.float64) == want.sum(dtype=np.float64)
    v[0] = 7.0
    assert v[0] == 7.0
    for o in others:
        assert o.read()[0] == -1.0
    del v
    gc.collect()


def test_numpy_views_of_a_buffer_alive_see_its_writes():
    """The view is of the buffer's memory while it lives: a launch's writes show in it."""
    mod = kern.compile(SRC)
    x = kern.Buffer.from_array(np.arange(8, dtype=np.float32))
    y = kern.Buffer.zeros(8)
    v = y.numpy()
    mod.sq(x=x, y=y, a=2.0)
    np.testing.assert_array_equal(v, 2 * np.arange(8, dtype=np.float32) ** 2)
    v[:] = 3.0
    np.testing.assert_array_equal(y.read(), np.full(8, 3.0, np.float32))


@pytest.mark.parametrize("gone", ["tape.reset()", "tape.release()", "context.release()",
                                  "adjoint.release()"])
def test_adjoint_view_keeps_the_memory(gone):
    """tape.adjoint(x).numpy() is a view of the tape's adjoint: it stays valid after the tape
    frees the adjoint (reset, release) or the context goes; the adjoint Buffer itself raises."""
    ctx = kern.Context(threads=1)
    mod = kern.compile(SQ, context=ctx)
    x = np.arange(1, BIG + 1, dtype=np.float32) / np.float32(BIG)
    y = np.zeros(BIG, np.float32)
    tape = kern.Tape(context=ctx)
    with tape:
        mod.sq(x=x, y=y, a=1.5)
    tape.backward(seeds=[(y, np.ones(BIG, np.float32))])
    adj = tape.adjoint(x)
    v = adj.numpy()
    want = tape.grad(x)
    np.testing.assert_allclose(want, 3.0 * x, rtol=1e-6)
    {"tape.reset()": tape.reset, "tape.release()": tape.release, "context.release()": ctx.release,
     "adjoint.release()": adj.release}[gone]()
    with pytest.raises(kern.ArgumentError) as info:
        adj.read()
    _no_c_names(str(info.value))
    assert re.match(r"Buffer.read: the (adjoint is gone|adjoint was released|buffer's context "
                    r"was released)", str(info.value)), str(info.value)
    del tape, ctx, mod
    gc.collect()
    others = [kern.Buffer.from_array(np.full(BIG, -1, np.float32)) for _ in range(2)]
    np.testing.assert_array_equal(v, want)
    del v, others
    gc.collect()


def test_tape_results_are_copies():
    """Tape.grad and Tape.tangent return arrays of their own (nothing to keep alive)."""
    mod = kern.compile(SRC)
    x = np.arange(4, dtype=np.float32)
    y = np.zeros(4, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=1.0)
    tape.backward(seeds=[(y, np.ones(4, np.float32))])
    g = tape.grad(x)
    assert g.flags.owndata
    tape.release()
    np.testing.assert_array_equal(g, 2 * x)
    ft = kern.Tape(forward=True)
    ft.set_tangent(x, np.ones(4, np.float32))
    with ft:
        mod.sq(x=x, y=y, a=1.0)
    t = ft.tangent(y)
    assert t.flags.owndata
    ft.release()
    np.testing.assert_array_equal(t, 2 * x)


# ---- every object once its owner is gone (bug 5) ---------------------------------------

class World:
    """One context with one of each object, all used once."""

    def __init__(self):
        self.ctx = kern.Context(threads=1)
        self.mod = kern.compile(SQ, context=self.ctx)
        self.kernel = self.mod.sq
        self.x = np.arange(4, dtype=np.float32)
        self.y = np.zeros(4, np.float32)
        self.buffer = kern.Buffer.from_array(self.x, context=self.ctx)
        self.tape = kern.Tape(context=self.ctx)
        with self.tape:
            self.mod.sq(x=self.x, y=self.y, a=2.0)
        self.tape.backward(seeds=[(self.y, np.ones(4, np.float32))])
        self.adjoint = self.tape.adjoint(self.x)
        self.ftape = kern.Tape(context=self.ctx, forward=True)
        self.ftape.set_tangent(self.x, np.ones(4, np.float32))
        with self.ftape:
            self.mod.sq(x=self.x, y=self.y, a=2.0)


def _with(tape):
    with tape:
        pass


# class -> {member: a call of it}; every public member of the class is here (checked below)
CALLS = {
    "Context": {
        "device_name": lambda w: w.ctx.device_name,
        "synchronize": lambda w: w.ctx.synchronize(),
        "adstack_info": lambda w: w.ctx.adstack_info(),
        "cuda_stream": lambda w: w.ctx.cuda_stream,
        "__enter__ of kern.Tape(context=)": lambda w: kern.Tape(context=w.ctx),
        "Buffer.zeros(context=)": lambda w: kern.Buffer.zeros(4, context=w.ctx),
        "Buffer.from_array(context=)": lambda w: kern.Buffer.from_array(w.x, context=w.ctx),
        "compile(context=)": lambda w: kern.compile(SQ, context=w.ctx),
        "load(context=)": lambda w: kern.load("/nonexistent.so", context=w.ctx),
    },
    "Buffer": {
        "numpy": lambda w: w.buffer.numpy(),
        "__array__": lambda w: np.asarray(w.buffer),
        "__dlpack__": lambda w: w.buffer.__dlpack__(),
        "__dlpack_device__": lambda w: w.buffer.__dlpack_device__(),
        "np.from_dlpack": lambda w: np.from_dlpack(w.buffer),
        "read": lambda w: w.buffer.read(),
        "write": lambda w: w.buffer.write(w.x),
        "copy_from": lambda w: w.buffer.copy_from(w.buffer),
        "to": lambda w: w.buffer.to(w.ctx),
        "as an argument": lambda w: w.mod.sq(x=w.buffer, y=w.y, a=1.0),
    },
    "Module": {
        "kernel": lambda w: w.mod.kernel("sq"),
        "__getitem__": lambda w: w.mod["sq"],
        "__getattr__": lambda w: w.mod.sq,
    },
    "Kernel": {
        "__call__": lambda w: w.kernel(x=w.x, y=w.y, a=1.0),
        "jvp": lambda w: w.kernel.jvp,
    },
    "Tape": {
        "__enter__": lambda w: _with(w.tape),
        "backward": lambda w: w.tape.backward(),
        "grad": lambda w: w.tape.grad(w.x),
        "adjoint": lambda w: w.tape.adjoint(w.x),
        "scalar_grad": lambda w: w.tape.scalar_grad(0, 2),
        "records": lambda w: w.tape.records,
        "saved_bytes": lambda w: w.tape.saved_bytes,
        "zero": lambda w: w.tape.zero(),
        "reset": lambda w: w.tape.reset(),
        "record_func": lambda w: w.tape.record_func(lambda: None, [w.x]),
        "set_tangent": lambda w: w.tape.set_tangent(w.x, w.x),
        "set_scalar_tangent": lambda w: w.tape.set_scalar_tangent("a", 1.0),
        "tangent": lambda w: w.tape.tangent(w.x),
    },
    "forward Tape": {
        "__enter__": lambda w: _with(w.ftape),
        "set_tangent": lambda w: w.ftape.set_tangent(w.x, w.x),
        "set_scalar_tangent": lambda w: w.ftape.set_scalar_tangent("a", 1.0),
        "tangent": lambda w: w.ftape.tangent(w.y),
        "records": lambda w: w.ftape.records,
        "saved_bytes": lambda w: w.ftape.saved_bytes,
        "zero": lambda w: w.ftape.zero(),
        "reset": lambda w: w.ftape.reset(),
        "backward": lambda w: w.ftape.backward(),
        "grad": lambda w: w.ftape.grad(w.x),
        "adjoint": lambda w: w.ftape.adjoint(w.x),
        "scalar_grad": lambda w: w.ftape.scalar_grad(0, 2),
        "record_func": lambda w: w.ftape.record_func(lambda: None, [w.x]),
    },
    "adjoint Buffer": {
        "numpy": lambda w: w.adjoint.numpy(),
        "__array__": lambda w: np.asarray(w.adjoint),
        "__dlpack__": lambda w: w.adjoint.__dlpack__(),
        "__dlpack_device__": lambda w: w.adjoint.__dlpack_device__(),
        "read": lambda w: w.adjoint.read(),
        "write": lambda w: w.adjoint.write(w.x),
        "as an argument": lambda w: w.mod.sq(x=w.adjoint, y=w.y, a=1.0),
    },
}

# what keeps working once the owner is gone: the Python-side description, and release()
KEEPS = {
    "Context": {"device": lambda w: w.ctx.device, "index": lambda w: w.ctx.index,
                "sync": lambda w: w.ctx.sync,
                "release": lambda w: w.ctx.release(), "repr": lambda w: repr(w.ctx)},
    "Buffer": {"shape": lambda w: w.buffer.shape, "dtype": lambda w: w.buffer.dtype,
               "nbytes": lambda w: w.buffer.nbytes, "numpy_dtype": lambda w: w.buffer.numpy_dtype,
               "kern_dtype": lambda w: w.buffer.kern_dtype, "ndim": lambda w: w.buffer.ndim,
               "len": lambda w: len(w.buffer),
               "context": lambda w: w.buffer.context, "release": lambda w: w.buffer.release(),
               "repr": lambda w: repr(w.buffer)},
    "Module": {"kernels": lambda w: w.mod.kernels, "context": lambda w: w.mod.context,
               "release": lambda w: w.mod.release()},
    "Kernel": {"name": lambda w: w.kernel.name, "params": lambda w: w.kernel.params,
               "param": lambda w: w.kernel.param("x"),
               "param_dtype": lambda w: w.kernel.param_dtype("x"),
               "module": lambda w: w.kernel.module, "repr": lambda w: repr(w.kernel)},
    "Tape": {"context": lambda w: w.tape.context, "forward": lambda w: w.tape.forward,
             "release": lambda w: w.tape.release()},
    "forward Tape": {"context": lambda w: w.ftape.context, "forward": lambda w: w.ftape.forward,
                     "release": lambda w: w.ftape.release()},
    "adjoint Buffer": {"shape": lambda w: w.adjoint.shape, "release": lambda w: w.adjoint.release(),
                       "repr": lambda w: repr(w.adjoint)},
}

# class -> {a way its owner goes: what it does}
OWNERS = {
    "Context": {"its release": lambda w: w.ctx.release()},
    "Buffer": {"its release": lambda w: w.buffer.release(),
               "the context's release": lambda w: w.ctx.release()},
    "Module": {"its release": lambda w: w.mod.release(),
               "the context's release": lambda w: w.ctx.release()},
    "Kernel": {"its module's release": lambda w: w.mod.release(),
               "the context's release": lambda w: w.ctx.release()},
    "Tape": {"its release": lambda w: w.tape.release(),
             "the context's release": lambda w: w.ctx.release()},
    "forward Tape": {"its release": lambda w: w.ftape.release(),
                     "the context's release": lambda w: w.ctx.release()},
    "adjoint Buffer": {"its release": lambda w: w.adjoint.release(),
                       "the tape's reset()": lambda w: w.tape.reset(),
                       "the tape's release": lambda w: w.tape.release(),
                       "the context's release": lambda w: w.ctx.release()},
}

CASES = [(cls, owner, member) for cls in CALLS for owner in OWNERS[cls] for member in CALLS[cls]]


@pytest.mark.parametrize("cls,owner,member", CASES)
def test_every_call_raises_once_the_owner_is_gone(cls, owner, member):
    w = World()
    OWNERS[cls][owner](w)
    with pytest.raises(kern.ArgumentError) as info:
        CALLS[cls][member](w)
    msg = str(info.value)
    _no_c_names(msg)
    assert "released" in msg or "is gone" in msg, msg
    assert msg.split(":")[0] not in ("", "the call failed"), msg


@pytest.mark.parametrize("cls,owner", [(c, o) for c in OWNERS for o in OWNERS[c]])
def test_descriptions_stay_once_the_owner_is_gone(cls, owner):
    w = World()
    before = {m: f(w) for m, f in KEEPS[cls].items() if m != "release"}
    OWNERS[cls][owner](w)
    for m, f in KEEPS[cls].items():
        got = f(w)
        if m in before and m != "repr":
            assert got == before[m], m
    if "release" in KEEPS[cls]:
        KEEPS[cls]["release"](w)  # twice is fine


def test_the_tables_name_every_public_member():
    """CALLS and KEEPS cover every public method and property of each class."""
    objects = {"Context": kern.Context, "Buffer": kern.Buffer, "Module": kern.Module,
               "Kernel": kern.Kernel, "Tape": kern.Tape}
    dunders = {"__call__", "__array__", "__dlpack__", "__dlpack_device__", "__enter__",
               "__getitem__", "__getattr__"}
    for name, cls in objects.items():
        members = {m for m in dir(cls) if not m.startswith("_") or m in dunders and
                   m in vars(cls)} - {"zeros", "from_array"}
        covered = set(CALLS[name]) | set(KEEPS[name])
        assert members <= covered, (name, members - covered)
    w = World()
    for name in ("Context", "Buffer", "Module", "Kernel", "Tape"):
        obj = {"Context": w.ctx, "Buffer": w.buffer, "Module": w.mod, "Kernel": w.kernel,
               "Tape": w.tape}[name]
        attrs = {m for m in vars(obj) if not m.startswith("_")}
        assert attrs <= set(KEEPS[name]) | set(CALLS[name]), (name, attrs)


def test_objects_keep_their_context_alive():
    """Dropping the Python Context while a buffer, module, kernel or tape refers to it
    leaves them working: each keeps it alive; the last one gone frees it."""
    w = World()
    ref = weakref.ref(w.ctx)
    del w.ctx
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(w.buffer.read(), w.x)
    np.testing.assert_array_equal(w.buffer.numpy(), w.x)
    w.kernel(x=w.buffer, y=w.y, a=3.0)
    np.testing.assert_array_equal(w.y, 3 * w.x ** 2)
    np.testing.assert_array_equal(w.tape.grad(w.x), 4 * w.x)
    np.testing.assert_array_equal(w.adjoint.numpy(), 4 * w.x)
    assert w.tape.records == 1
    np.testing.assert_array_equal(w.ftape.tangent(w.y), 4 * w.x)
    for name in ("buffer", "mod", "kernel", "tape", "adjoint", "ftape"):
        assert ref() is not None, name
        delattr(w, name)
        gc.collect()
    assert ref() is None


def test_default_context_after_its_release():
    """kern.context() after its context was released makes a new one."""
    c = kern.context()
    assert kern.context() is c
    c.release()
    d = kern.context()
    assert d is not c
    kern.Buffer.zeros(4).read()


# ---- a tape keeps what its records use (issue 22, item 4) ----------------------------

def _layers_f64(x, coeffs):
    for a in coeffs:
        x = np.sin(x) * a + x * x
    return x


def test_chain_of_temporaries_against_finite_differences():
    """Launches on temporaries made and dropped inside the recording (kern Buffers and NumPy
    arrays, created in a helper and rebound): the tape keeps them, and the gradient is the
    f64 finite differences' of a NumPy implementation."""
    ctx = kern.Context()
    mod = kern.compile(SRC, context=ctx)
    n = 64
    rng = np.random.default_rng(5)
    x0 = rng.uniform(-0.5, 0.5, n).astype(np.float32)
    w = rng.uniform(-1, 1, n).astype(np.float32)
    coeffs = [0.5, -0.3, 0.8, 0.25]

    def layer(h, a, i):
        out = kern.Buffer.zeros(n, context=ctx) if i % 2 == 0 else np.zeros(n, np.float32)
        mod.step(x=h, y=out, a=a)
        return out

    refs = []
    with kern.Tape(context=ctx) as tape:
        h = x0
        for i, a in enumerate(coeffs):
            h = layer(h, a, i)
            refs.append(weakref.ref(h))
        out = h
    del h
    gc.collect()
    # new buffers and arrays of the same size would take a dropped temporary's memory
    others = [kern.Buffer.zeros(n, context=ctx) for _ in range(8)]
    assert all(r() is not None for r in refs)  # the tape keeps them
    tape.backward(seeds=[(out, w)])
    got = tape.grad(x0).astype(np.float64)
    x, wd, eps = x0.astype(np.float64), w.astype(np.float64), 1e-6
    fd = np.empty(n)
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        fd[i] = (wd @ _layers_f64(x + e, coeffs) - wd @ _layers_f64(x - e, coeffs)) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), _layers_f64(x, coeffs), rtol=1e-5, atol=1e-6)
    # reset() drops what the records used, but for the seeded output: the runtime keeps its
    # seed as its adjoint (zeroed); release() drops everything
    del out, others
    tape.reset()
    gc.collect()
    assert all(r() is None for r in refs[:-1])
    assert refs[-1]() is not None
    with tape:
        b = kern.Buffer.zeros(n, context=ctx)
        mod.step(x=x0, y=b, a=1.0)
    ref = weakref.ref(b)
    del b
    gc.collect()
    assert ref() is not None
    tape.release()
    gc.collect()
    assert ref() is None and refs[-1]() is None


def test_a_seeded_adjoint_starts_at_zero_after_reset():
    """A seed stays the adjoint of its array (the runtime keeps it) across tape.reset(), zeroed
    like a new adjoint: a second recording's gradient owes nothing to the first's seed."""
    mod = kern.compile(SRC)
    x = np.arange(1, 5, dtype=np.float32)
    y = np.zeros(4, np.float32)
    z = np.zeros(4, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=1.0)
    tape.backward(seeds=[(y, np.full(4, 100, np.float32))])
    tape.reset()
    with tape:
        mod.sq(x=x, y=y, a=1.0)
        mod.sq(x=x, y=z, a=1.0)
    tape.backward(seeds=[(z, np.ones(4, np.float32))])
    np.testing.assert_array_equal(tape.grad(x), 2 * x)


# ---- shapes before copies (issue 23) -----------------------------------------------------

def _peak(f):
    """f's ArgumentError and the most memory traced while it ran (NumPy's arrays count)."""
    gc.collect()
    tracemalloc.start()
    try:
        with pytest.raises(kern.ArgumentError) as info:
            f()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return str(info.value), peak


TOO_LONG = {
    "f32 argument": lambda m: m.sq(x=np.broadcast_to(np.float32(1), (2**31,)),
                                   y=np.zeros(4, np.float32), a=1.0),
    "u8 argument": lambda m: m.copy8(x=np.broadcast_to(np.uint8(1), (2**31,)),
                                     y=np.zeros(4, np.uint8)),
    "f64 for an f32 argument": lambda m: m.sq(x=np.broadcast_to(np.float64(1), (2**31,)),
                                              y=np.zeros(4, np.float32), a=1.0),
    "rank 2 argument": lambda m: m.rows(u=np.broadcast_to(np.float32(1), (2, 2**31)),
                                        y=np.zeros(4, np.float32)),
    "Buffer.from_array": lambda m: kern.Buffer.from_array(np.broadcast_to(np.uint8(1),
                                                                          (2**31,))),
    "Buffer.zeros": lambda m: kern.Buffer.zeros((2**31,), "uint8"),
}


@pytest.mark.parametrize("case", list(TOO_LONG))
def test_extents_are_checked_before_a_copy(case):
    """An array longer than len() can count (2**31 elements), broadcast from one element,
    is refused by the extent check, not after a copy of gigabytes (a MemoryError under a
    memory limit)."""
    mod = kern.compile(SRC)
    msg, peak = _peak(lambda: TOO_LONG[case](mod))
    assert "extent 2147483648 of dimension" in msg and "is too large" in msg, msg
    assert peak < 64 << 20, "%s: %d bytes traced before the refusal" % (case, peak)
    _no_c_names(msg)


def test_shapes_of_writes_and_seeds_are_checked_before_a_copy():
    mod = kern.compile(SRC)
    b = kern.Buffer.zeros(4, "uint8")
    msg, peak = _peak(lambda: b.write(np.broadcast_to(np.float64(1), (2**30,))))
    assert msg.startswith("Buffer.write: an array of shape (1073741824,)"), msg
    assert peak < 64 << 20
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    with kern.Tape() as tape:
        mod.sq(x=x, y=y, a=1.0)
    msg, peak = _peak(lambda: tape.backward(seeds=[(y, np.broadcast_to(np.float64(1),
                                                                         (2**30,)))]))
    assert msg.startswith("Tape.backward: a seed of shape (1073741824,)"), msg
    assert peak < 64 << 20


# ---- messages name the Python call, not the C API (issue 23) ----------------------------

def _raises(f, cls=kern.Error):
    with pytest.raises(cls) as info:
        f()
    return str(info.value)


def test_messages_name_the_python_call():
    mod = kern.compile(SRC)
    x = np.arange(1, 5, dtype=np.float32)
    y = np.zeros(4, np.float32)
    got = {}
    got["Buffer.zeros((-1,))"] = _raises(lambda: kern.Buffer.zeros((-1,)))
    got["Buffer.zeros(rank 5)"] = _raises(lambda: kern.Buffer.zeros((1, 1, 1, 1, 1)))
    got["Buffer.write"] = _raises(lambda: kern.Buffer.zeros(4).write(np.zeros(5)))
    t = kern.Tape()
    t.release()
    got["backward after release"] = _raises(t.backward)
    tape = kern.Tape()
    with tape:
        mod.sq(x=x, y=y, a=1.0)
    got["scalar_grad before backward"] = _raises(lambda: tape.scalar_grad(0, 2))
    got["scalar_grad of record 7"] = _raises(lambda: tape.scalar_grad(7, 2))
    got["grad of an unknown array"] = _raises(lambda: tape.grad(np.zeros(4, np.float32)))
    got["set_tangent on a reverse tape"] = _raises(lambda: tape.set_tangent(x, x))
    tape.backward(seeds=[(y, np.ones(4, np.float32))])
    got["backward twice"] = _raises(tape.backward)

    def record_after_backward():
        with tape:
            mod.sq(x=x, y=y, a=1.0)
    got["recording after backward"] = _raises(record_after_backward)
    ft = kern.Tape(forward=True)
    got["grad of a forward tape"] = _raises(lambda: ft.grad(x))
    got["record_func on a forward tape"] = _raises(lambda: ft.record_func(lambda: None, [x]))
    got["tangent of an unknown array"] = _raises(lambda: ft.tangent(x))

    def host_step_fails():
        with kern.Tape() as t2:
            mod.sq(x=x, y=y, a=1.0)
            t2.record_func(lambda: 1 / 0, [y])
        t2.backward()
    with pytest.raises(ZeroDivisionError) as info:
        host_step_fails()
    got["host step"] = str(info.value.__cause__)
    want = {
        "Buffer.zeros((-1,))": "Buffer.zeros: extent -1 of dimension 0 is negative",
        "Buffer.zeros(rank 5)": "Buffer.zeros: rank 5 is not supported (rank 1 to 4)",
        "Buffer.write": "Buffer.write: an array of shape (5,), the buffer is (4,)",
        "backward after release": "Tape.backward: the tape was released",
        "scalar_grad before backward": "Tape.scalar_grad: record 0 has no gradient yet (run "
                                       "tape.backward())",
        "scalar_grad of record 7": "Tape.scalar_grad: record 7 is out of range (the tape has 1 "
                                   "record)",
        "grad of an unknown array": "Tape.grad: the array has no adjoint on this tape",
        "set_tangent on a reverse tape": "Tape.set_tangent: a reverse tape has no tangents",
        "backward twice": "Tape.backward: the tape has run backward already; tape.zero() "
                          "zeroes the adjoints for another backward pass, tape.reset() "
                          "starts a new recording",
        "recording after backward": "kernel 'sq' on the tape: the tape has run backward; "
                                    "tape.reset() starts a new recording (tape.zero() keeps "
                                    "the records for another backward pass)",
        "grad of a forward tape": "Tape.grad: the tape is a forward tape "
                                  "(kern.Tape(forward=True)): it has tangents "
                                  "(tape.set_tangent, tape.tangent)",
        "record_func on a forward tape": "Tape.record_func: the tape is a forward tape",
        "tangent of an unknown array": "Tape.tangent: the array has no tangent on this tape",
        "host step": "Tape.backward: record 1 (host callback) failed: ZeroDivisionError",
    }
    for k, msg in got.items():
        _no_c_names(msg)
        assert msg.startswith(want[k]), (k, msg)


def test_runtime_words_become_python_words():
    """The translation of the runtime's messages: the C function a message starts with
    becomes the Python call, other C names the package's words."""
    from kern._errors import _python_words
    assert _python_words("kern_tape_grad: the tape is a forward tape (kern_tape_create_forward)",
                         "Tape.grad") == \
        "Tape.grad: the tape is a forward tape (kern.Tape(forward=True))"
    assert _python_words("kernel 'f': raise it or kern_context_options.ad_stack_size") == \
        "kernel 'f': raise it or kern.Context(ad_stack_size=N)"
    assert _python_words("(kernc), or kern_context_options.ad_stack_size = 40") == \
        "(kernc), or kern.Context(ad_stack_size=40)"
