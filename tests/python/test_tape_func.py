"""Host steps on the tape (Tape.record_func): a kernel, y = A x in NumPy, a kernel, against
NumPy references; exceptions out of backward; the callable and arrays kept alive and
released with the tape's records."""

import gc
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
"""

N, M = 11, 5


@pytest.fixture(scope="module")
def mod():
    return kern.compile(SRC)


def _matvec_step(tape, a, x1, y):
    """y = A x1 on the host, recorded with its backward x1.grad += A^T y.grad."""
    y[:] = a @ x1

    def backward():
        gy = tape.grad(y)
        tape.adjoint(x1).numpy()[:] += a.T @ gy
        tape.adjoint(y).numpy()[:] = 0  # y was written, not read
    tape.record_func(backward, [x1, y])


def test_host_step_between_kernels_against_numpy(mod):
    rng = np.random.default_rng(3)
    x0 = rng.uniform(-1, 1, N).astype(np.float32)
    a = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, M).astype(np.float32)
    x1 = np.zeros(N, np.float32)
    y = np.zeros(M, np.float32)
    z = np.zeros(M, np.float32)
    a1, a2 = 1.25, -0.5
    with kern.Tape() as tape:
        mod.sq(x=x0, y=x1, a=a1)
        _matvec_step(tape, a, x1, y)
        mod.sq(x=y, y=z, a=a2)
    assert tape.records == 3
    tape.backward(seeds=[(z, w)])
    # the reference, in f64
    X0, A, W = x0.astype(np.float64), a.astype(np.float64), w.astype(np.float64)
    X1 = a1 * X0 ** 2
    Y = A @ X1
    gy = W * 2 * a2 * Y
    gx1 = A.T @ gy
    np.testing.assert_allclose(z, a2 * Y ** 2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tape.grad(x0), gx1 * 2 * a1 * X0, rtol=1e-5, atol=1e-6)
    assert tape.scalar_grad(0, 2) == pytest.approx(float(gx1 @ X0 ** 2), rel=1e-5)
    assert tape.scalar_grad(2, 2) == pytest.approx(float(W @ Y ** 2), rel=1e-5)
    with pytest.raises(kern.ArgumentError, match="record 1 is a host step"):
        tape.scalar_grad(1, 0)


def test_host_step_with_buffers(mod):
    """kern Buffers as the step's arrays; a step whose adjoints nothing else touched."""
    x = kern.Buffer.from_array(np.arange(4, dtype=np.float32))
    seen = []
    tape = kern.Tape()
    tape.record_func(lambda: seen.append(tape.grad(x)), [x])
    tape.backward()
    np.testing.assert_array_equal(seen[0], np.zeros(4, np.float32))


def test_exception_propagates_from_backward(mod):
    x = np.ones(3, np.float32)
    y = np.zeros(3, np.float32)
    calls = []

    class Diverged(Exception):
        pass

    def bad():
        raise Diverged("the solver diverged")
    with kern.Tape() as tape:
        tape.record_func(lambda: calls.append(0), [x])
        mod.sq(x=x, y=y, a=2.0)
        tape.record_func(bad, [y])
    with pytest.raises(Diverged, match="the solver diverged") as info:
        tape.backward()
    cause = info.value.__cause__
    assert isinstance(cause, kern.CallbackError)
    assert str(cause) == ("Tape.backward: record 2 (host callback) failed: Diverged: the "
                          "solver diverged")
    assert calls == []  # the pass stopped at the failing record
    with pytest.raises(kern.ArgumentError, match="has run backward already"):
        tape.backward()


def test_callable_kept_alive_and_released_with_the_records(mod):
    x = np.linspace(-1, 1, 6).astype(np.float32)
    y = np.zeros(6, np.float32)
    hits = []

    class Probe:
        def __call__(self):
            hits.append(1)
            tape.adjoint(x).numpy()[:] += 1.0
    probe = Probe()
    dead = weakref.ref(probe)
    with kern.Tape() as tape:
        tape.record_func(probe, [x])
        tape.record_func(lambda: hits.append(2), [])  # a lambda nothing else refers to
        mod.sq(x=x, y=y, a=3.0)
    del probe
    gc.collect()
    assert dead() is not None  # the tape keeps it
    tape.backward(seeds=[(y, np.ones(6, np.float32))])
    assert hits == [2, 1]
    np.testing.assert_allclose(tape.grad(x), 6.0 * x + 1.0, rtol=1e-6)
    tape.zero()
    gc.collect()
    assert dead() is not None  # zero() keeps the records
    tape.reset()
    gc.collect()
    assert dead() is None  # gone with its record
    assert tape._steps == {}


def test_record_func_errors(mod):
    tape = kern.Tape()
    with pytest.raises(kern.ArgumentError, match="not callable"):
        tape.record_func(3, [])
    other = kern.Context("cpu")
    b = kern.Buffer.zeros(4, context=other)
    with pytest.raises(kern.ArgumentError, match="another context"):
        tape.record_func(lambda: None, [b])
    mine = kern.Buffer.zeros(4)
    tape.record_func(lambda: None, [mine])
    tape.backward()
    with pytest.raises(kern.ArgumentError, match="has run backward"):
        tape.record_func(lambda: None, [mine])
    assert tape._steps.keys() == {1}  # the refused step was freed at once
    tape.release()
    assert tape._steps == {}


def test_backward_cannot_record_on_its_own_tape(mod):
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    seen = []

    def meddle():
        with pytest.raises(kern.ArgumentError, match="running its backward pass"):
            tape.zero()
        with pytest.raises(kern.ArgumentError, match="running its backward pass"):
            tape.reset()
        with pytest.raises(kern.ArgumentError, match="Tape.release: the tape is running its "
                                                     "backward pass"):
            tape.release()
        with tape:
            with pytest.raises(kern.ArgumentError, match="running its backward pass"):
                mod.sq(x=x, y=y, a=1.0)
        seen.append(True)
    with kern.Tape() as tape:
        tape.record_func(meddle, [x])
    tape.backward()
    assert seen == [True]
