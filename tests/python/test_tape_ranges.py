"""A recorded call that overwrites what an earlier recorded call read (Warp's tape
overwrite case): the tape copies the elements first and puts them back during backward,
so the gradient matches an f64 NumPy reference; time-indexed steps copy nothing."""

import numpy as np
import pytest

import kern

SRC = """
kernel sq(x: f32[], y: f32[]) {
    for i in 0..len(x) {
        y[i] = x[i] * x[i];
    }
}
kernel neg(src: f32[], dst: f32[]) {
    for i in 0..len(src) {
        dst[i] = -src[i];
    }
}
kernel mul(x: f32[], y: f32[], z: f32[]) {
    for i in 0..len(x) {
        z[i] = x[i] * y[i];
    }
}
kernel step(x: f32[,], t: i32) {
    for i in 0..shape(x, 1) {
        x[t + 1, i] = x[t, i] * x[t, i];
    }
}
"""


@pytest.fixture(scope="module")
def mod():
    return kern.compile(SRC)


def test_overwritten_input_against_numpy(mod):
    a0 = np.array([1.0, 2.0, 3.0], np.float32)
    a = a0.copy()
    c = np.array([0.5, -1.5, 2.5], np.float32)
    b = np.zeros(3, np.float32)
    z = np.zeros(3, np.float32)
    w = np.array([1.0, 0.5, -2.0], np.float32)
    with kern.Tape() as tape:
        mod.sq(x=a, y=b)      # b = a^2 reads a
        mod.neg(src=c, dst=a)  # overwrites a
        mod.mul(x=a, y=b, z=z)  # z = -c a0^2
    assert tape.saved_bytes == 3 * 4
    tape.backward(seeds=[(z, w)])
    assert tape.saved_bytes == 0
    A0, C, W = a0.astype(np.float64), c.astype(np.float64), w.astype(np.float64)
    gb = W * -C                 # mul.grad: dL/db with a = -c
    ga = gb * 2 * A0            # sq.grad with a as sq read it: [2, 4, 6] * gb
    gc = -(W * A0 ** 2)         # neg.grad of mul's dL/da
    np.testing.assert_allclose(tape.grad(a), ga, rtol=1e-6)
    np.testing.assert_allclose(tape.grad(c), gc, rtol=1e-6)
    np.testing.assert_array_equal(a, a0)  # after backward: what sq read


def test_warp_overwrite_case(mod):
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.zeros(3, np.float32)
    c = np.array([-1.0, -2.0, -3.0], np.float32)
    with kern.Tape() as tape:
        mod.sq(x=a, y=b)
        mod.neg(src=c, dst=a)  # a = [1, 2, 3] again, then read as -a by nothing
        mod.neg(src=b, dst=a)  # a = -b: overwritten twice, saved once per launch
    tape.backward(seeds=[(b, np.ones(3, np.float32))])
    # L = sum(b) with b = a0^2 (the later writes of a reach no loss): 2 a0
    np.testing.assert_allclose(tape.grad(a), [2.0, 4.0, 6.0], rtol=1e-6)


def test_time_indexed_steps_copy_nothing(mod):
    x = np.zeros((5, 4), np.float32)
    x[0] = [0.5, 0.9, 1.1, -0.7]
    with kern.Tape() as tape:
        for t in range(4):
            mod.step(x=x, t=t)
            assert tape.saved_bytes == 0
    tape.backward(seeds=[(x, np.vstack([np.zeros((4, 4)), np.ones((1, 4))]).astype(np.float32))])
    x0 = x[0].astype(np.float64)
    np.testing.assert_allclose(tape.grad(x)[0], 16 * x0 ** 15, rtol=1e-4)
