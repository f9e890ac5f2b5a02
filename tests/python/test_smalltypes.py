"""Version 1's scalar types from Python (docs/python.md, language.md 11.4): NumPy int8,
uint8, int16, uint16, uint64 and float16 arrays bind in place; a bf16 parameter binds a
uint16 array of its bits; scalars of every new integer type, range-checked; DLPack of the
new dtypes. References are NumPy's own casts and float16 arithmetic (round to nearest even),
and bfloat16 rounding written here on the bits."""

import warnings

import numpy as np
import pytest

import kern

SRC = """
kernel ints(a: i8[], b: u8[], c: i16[], d: u16[], e: u64[], s8: i8, u8s: u8, s16: i16,
            u16s: u16, big: u64) {
    for i in 0..len(a) {
        a[i] = i8(i32(a[i]) * 3 + i32(s8));
        b[i] = u8(i32(b[i]) + i32(u8s));
        c[i] = i16(i32(c[i]) * i32(s16));
        d[i] = u16(i32(d[i]) + i32(u16s));
        e[i] = e[i] / big + e[i] % big;
    }
}
kernel halves(h: f16[], g: bf16[], x: f32[]) {
    for i in 0..len(x) {
        h[i] = h[i] * x[i];
        g[i] = g[i] * x[i];
    }
}
"""


@pytest.fixture(scope="module")
def mod():
    return kern.compile(SRC)


def bf16_bits(f):
    """float32 -> bfloat16 bits, to nearest even (NaN quieted), in NumPy."""
    u = np.asarray(f, np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), ((u >> 16) | 0x40).astype(np.uint16), r)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_integer_arrays_and_scalars_in_place(mod):
    a = np.array([1, -100, 127, 50], np.int8)
    b = np.array([0, 200, 255, 7], np.uint8)
    c = np.array([300, -300, 32767, -2], np.int16)
    d = np.array([0, 40000, 65535, 9], np.uint16)
    e = np.array([2**64 - 1, 2**63 + 5, 7, 0], np.uint64)
    ref = [x.copy() for x in (a, b, c, d, e)]
    ptrs = [x.__array_interface__["data"][0] for x in (a, b, c, d, e)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)  # every array in place
        mod.ints(a=a, b=b, c=c, d=d, e=e, s8=-7, u8s=250, s16=-3, u16s=65535, big=2**63 + 1)
    assert ptrs == [x.__array_interface__["data"][0] for x in (a, b, c, d, e)]
    np.testing.assert_array_equal(a, (ref[0].astype(np.int32) * 3 - 7).astype(np.int8))
    np.testing.assert_array_equal(b, (ref[1].astype(np.int32) + 250).astype(np.uint8))
    np.testing.assert_array_equal(c, (ref[2].astype(np.int32) * -3).astype(np.int16))
    np.testing.assert_array_equal(d, (ref[3].astype(np.int32) + 65535).astype(np.uint16))
    big = 2**63 + 1
    np.testing.assert_array_equal(e, [int(v) // big + int(v) % big for v in ref[4]])


@pytest.mark.parametrize("name,value", [("s8", 128), ("s8", -129), ("u8s", -1), ("u8s", 256),
                                        ("s16", 2**15), ("u16s", 2**16), ("big", -1),
                                        ("big", 2**64)])
def test_integer_scalars_out_of_range(mod, name, value):
    args = dict(a=np.zeros(1, np.int8), b=np.zeros(1, np.uint8), c=np.zeros(1, np.int16),
                d=np.zeros(1, np.uint16), e=np.zeros(1, np.uint64), s8=0, u8s=0, s16=0, u16s=0,
                big=1)
    args[name] = value
    with pytest.raises(kern.ArgumentError, match="out of range for"):
        mod.ints(**args)


def test_f16_and_bf16_bits(mod):
    x = np.array([1.5, -3.0, 1e-3, 70000.0, 0.1], np.float32)
    h = np.array([1.0, 2.5, 0.333, 1.0, -2.0], np.float16)
    g = bf16_bits(np.array([1.0, 2.5, 0.333, 3e38, -2.0], np.float32))
    with np.errstate(over="ignore"):  # 70000 overflows f16 to inf, 3e38 * 1.5 f32
        want_h = (h.astype(np.float32) * x).astype(np.float16)  # to nearest even
        want_g = bf16_bits(bf16_value(g) * x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)
        mod.halves(h=h, g=g, x=x)
    np.testing.assert_array_equal(h.view(np.uint16), want_h.view(np.uint16))
    np.testing.assert_array_equal(g, want_g)


def test_buffers_of_the_new_dtypes_round_trip():
    for dt in (np.int8, np.uint8, np.int16, np.uint16, np.uint64, np.float16):
        a = np.arange(6, dtype=dt).reshape(2, 3)
        b = kern.Buffer.from_array(a)
        assert b.numpy().dtype == a.dtype
        np.testing.assert_array_equal(b.numpy(), a)
        # DLPack export: NumPy reads kern's codes (kDLInt/kDLUInt 8, 16, 64, kDLFloat 16)
        np.testing.assert_array_equal(np.from_dlpack(b), a)
        b.release()


class Producer:
    """A DLPack producer that is not an ndarray, so binding goes through kern's import."""

    def __init__(self, a):
        self.a, self.shape, self.dtype = a, a.shape, a.dtype

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_import_of_the_new_dtypes(mod):
    x = np.array([2.0, 0.5], np.float32)
    h = np.array([1.5, -3.0], np.float16)
    g = np.zeros(2, np.uint16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)  # imported in place, no copy
        mod.halves(h=Producer(h), g=g, x=Producer(x))
    np.testing.assert_array_equal(h, np.array([3.0, -1.5], np.float16))


def test_a_float32_array_for_f16_is_copied_with_a_warning(mod):
    # float32 -> float16 stays within a kind: a copy, rounded, said, and written back
    x = np.array([3.0, 0.1], np.float32)
    h = np.array([1.0, 1.0], np.float32)
    g = np.zeros(2, np.uint16)
    with pytest.warns(kern.CopyWarning, match="its dtype is float32, the parameter is f16"):
        mod.halves(h=h, g=g, x=x)
    np.testing.assert_array_equal(h, np.array([3.0, 0.1], np.float16).astype(np.float32))


def test_integer_arrays_of_another_kind_are_refused(mod):
    with pytest.raises(kern.ArgumentError, match="cannot be converted to i8"):
        mod.ints(a=np.zeros(1, np.float32), b=np.zeros(1, np.uint8), c=np.zeros(1, np.int16),
                 d=np.zeros(1, np.uint16), e=np.zeros(1, np.uint64), s8=0, u8s=0, s16=0,
                 u16s=0, big=1)
