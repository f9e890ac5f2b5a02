"""Parameters of vector, matrix and struct types from Python (docs/python.md, "Vectors,
matrices and structs"): (N, 3) arrays for vec3[], (N, M, 3, 3) for mat3[,], structured
arrays for struct arrays, numbers for by-value vectors; used in place (proven by data
pointers and CopyWarning as an error), against NumPy references; gradients through a tape
against closed forms and finite differences; every error names the parameter and the
expected shape or dtype.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python"""

import warnings

import numpy as np
import pytest

import kern

try:
    import torch
except ImportError:
    torch = None

SRC = """
struct P { pos: vec3, vel: vec3, mass: f32 }
struct Q { a: P, m: mat2, s: f32 }

kernel cross3(a: vec3[], b: vec3[], c: vec3[]) {
    for i in 0..len(a) { c[i] = cross(a[i], b[i]); }
}

kernel matvec(m: mat3[,], v: vec3[,], out: vec3[,], g: vec3) {
    for i in 0..shape(m, 0), j in 0..shape(m, 1) { out[i, j] = m[i, j] * v[i, j] + g; }
}

kernel step(ps: P[], dt: f32, g: vec3) {
    for i in 0..len(ps) {
        ps[i].vel += g * dt;
        ps[i].pos += ps[i].vel * dt;
    }
}

kernel energy(ps: P[], g: vec3, e: f32[]) {
    for i in 0..len(ps) {
        e[i] = 0.5 * ps[i].mass * dot(ps[i].vel, ps[i].vel) + ps[i].mass * dot(g, ps[i].pos);
    }
}

kernel nested(qs: Q[], out: f32[], r: mat2, p: P) {
    for i in 0..len(qs) {
        out[i] = qs[i].a.vel.y * qs[i].m[1][0] + qs[i].s + r[0][1] + p.mass * p.vel.z;
    }
}
"""

P = np.dtype([("pos", "<f4", (3,)), ("vel", "<f4", (3,)), ("mass", "<f4")])


@pytest.fixture(scope="module")
def mod():
    return kern.compile(SRC, name="views.kern")


@pytest.fixture(autouse=True)
def no_copies():
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)
        yield


def particles(n, seed=0):
    rng = np.random.default_rng(seed)
    ps = np.zeros(n, P)
    ps["pos"] = rng.standard_normal((n, 3))
    ps["vel"] = rng.standard_normal((n, 3))
    ps["mass"] = rng.uniform(0.5, 2, n)
    return ps


def test_param_info_and_dtypes(mod):
    k = mod.step
    assert repr(k) == ("kern.Kernel(step(ps: P{pos:vec3,vel:vec3,mass:f32}[], dt: f32, "
                       "g: vec3))")
    assert k.param_dtype("ps") == P
    assert k.param("ps").tail == (7,) and k.param("ps").rank == 2
    assert k.param_dtype("g") == np.dtype(("<f4", (3,)))
    assert k.param("g").type_name == "vec3" and k.param("g").rank == 1
    assert k.param_dtype("dt") == np.float32 and k.param("dt").tail == ()
    assert mod.matvec.param_dtype("m") == np.dtype(("<f4", (3, 3)))
    assert np.zeros((2, 5), mod.matvec.param_dtype("m")).shape == (2, 5, 3, 3)
    assert np.zeros(4, mod.cross3.param_dtype("a")).shape == (4, 3)
    q = mod.nested.param_dtype("qs")
    assert q == np.dtype([("a", P), ("m", "<f4", (2, 2)), ("s", "<f4")])
    assert q.itemsize == 12 * 4 and q.fields["s"][1] == 44
    assert mod["step.grad"].param("ps.grad").type_name == "P{pos:vec3,vel:vec3,mass:f32}[]"
    assert mod["step.grad"].param_dtype("g__grad") == np.dtype(("<f4", (3,)))
    with pytest.raises(kern.ArgumentError, match="no parameter named 'zz'"):
        k.param_dtype("zz")


def test_cross_product_in_place(mod):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((37, 3)).astype(np.float32)
    b = rng.standard_normal((37, 3)).astype(np.float32)
    c = np.zeros((37, 3), np.float32)
    ptr = c.ctypes.data
    mod.cross3(a, b, c)
    assert c.ctypes.data == ptr
    np.testing.assert_allclose(c, np.cross(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)
    e = np.zeros((0, 3), np.float32)
    mod.cross3(e, e, e)  # an empty array


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed here")
def test_cross_product_torch_in_place(mod):
    a = torch.randn(9, 3)
    b = torch.randn(9, 3)
    c = torch.zeros(9, 3)
    ptr = c.data_ptr()
    mod.cross3(a, b, c)
    assert c.data_ptr() == ptr
    np.testing.assert_allclose(c.numpy(), np.cross(a.numpy().astype(np.float64), b.numpy()),
                               rtol=1e-5, atol=1e-5)


def test_matrices_and_a_vector_by_value(mod):
    rng = np.random.default_rng(2)
    m = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    v = rng.standard_normal((3, 4, 3)).astype(np.float32)
    want = np.einsum("nmij,nmj->nmi", m.astype(np.float64), v) + [0.5, -1, 2]
    for g in ((0.5, -1, 2), [0.5, -1.0, 2.0], np.array([0.5, -1, 2]),
              np.array([0.5, -1, 2], np.float32), torch.tensor([0.5, -1, 2]) if torch else
              (0.5, -1, 2)):
        out = np.zeros((3, 4, 3), np.float32)
        mod.matvec(m=m, v=v, out=out, g=g)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_struct_particle_update_in_place(mod):
    ps = particles(50)
    want = ps.copy()
    g = np.array([0, -9.81, 0], np.float32)
    want["vel"] += g * np.float32(0.01)
    want["pos"] += want["vel"] * np.float32(0.01)
    ptr = ps.ctypes.data
    mod.step(ps=ps, dt=0.01, g=g)
    assert ps.ctypes.data == ptr
    for f in P.names:
        np.testing.assert_allclose(ps[f], want[f], rtol=1e-6, atol=1e-6)
    # a dtype of kern's own, and the flat (N, 7) component form, bind the same way
    qs = np.zeros(3, mod.step.param_dtype("ps"))
    qs["vel"] = 1
    mod.step(ps=qs, dt=0.5, g=(0, 0, 0))
    np.testing.assert_array_equal(qs["pos"], np.full((3, 3), 0.5, np.float32))
    flat = np.zeros((3, 7), np.float32)
    flat[:, 3:6] = 1
    mod.step(ps=flat, dt=0.5, g=(0, 0, 0))
    np.testing.assert_array_equal(flat[:, :3], np.full((3, 3), 0.5, np.float32))
    mod.step(ps=np.zeros(0, P), dt=0.5, g=(0, 0, 0))  # an empty array


def test_strided_struct_array_is_copied_and_written_back(mod):
    ps = particles(10, seed=3)
    every2 = ps[::2]
    want = every2.copy()
    want["pos"] += want["vel"] * np.float32(0.5)
    with pytest.warns(kern.CopyWarning, match="parameter 'ps'.*not C-contiguous"):
        warnings.simplefilter("always", kern.CopyWarning)
        mod.step(ps=every2, dt=0.5, g=(0, 0, 0))
    np.testing.assert_allclose(ps[::2]["pos"], want["pos"], rtol=1e-6)
    np.testing.assert_array_equal(ps[1::2], particles(10, seed=3)[1::2])  # untouched


def test_nested_struct_matrix_fields_and_a_struct_by_value(mod):
    rng = np.random.default_rng(4)
    qs = np.zeros(6, mod.nested.param_dtype("qs"))
    qs["a"]["vel"] = rng.standard_normal((6, 3))
    qs["m"] = rng.standard_normal((6, 2, 2))
    qs["s"] = rng.standard_normal(6)
    out = np.zeros(6, np.float32)
    p = np.zeros((), P)
    p["mass"], p["vel"] = 2, (0, 0, 3)
    r = np.array([[0, 0.25], [0, 0]])
    want = qs["a"]["vel"][:, 1] * qs["m"][:, 1, 0] + qs["s"] + 0.25 + 6
    for pv in (p, p[()], [0, 0, 0, 0, 0, 3, 2]):  # a 0-d array, a record, its 7 numbers
        out[:] = 0
        mod.nested(qs=qs, out=out, r=r, p=pv)
        np.testing.assert_allclose(out, want, rtol=1e-5)


def energy_grads(ps, g, seed):
    """dL/d(ps), dL/dg of L = sum(seed * e) in float64, e the energy kernel's output."""
    pos, vel = ps["pos"].astype(np.float64), ps["vel"].astype(np.float64)
    mass = ps["mass"].astype(np.float64)
    d = np.zeros(len(ps), P)
    d["vel"] = (seed * mass)[:, None] * vel
    d["pos"] = (seed * mass)[:, None] * g
    d["mass"] = seed * (0.5 * np.sum(vel * vel, 1) + pos @ g)
    return d, np.sum((seed * mass)[:, None] * pos, 0)


def test_tape_gradients_of_struct_and_by_value_params(mod):
    ps = particles(12, seed=5)
    g = np.array([0.3, -1.0, 0.5], np.float32)
    e = np.zeros(12, np.float32)
    seed = np.random.default_rng(6).uniform(-1, 1, 12).astype(np.float32)
    with kern.Tape() as tape:
        mod.energy(ps=ps, g=g, e=e)
    tape.backward(seeds=[(e, seed)])
    dps, dg = tape.grad(ps), tape.grad(g)
    want_ps, want_g = energy_grads(ps, g.astype(np.float64), seed.astype(np.float64))
    assert dps.dtype == P and dps.shape == ps.shape  # the adjoint as the struct's dtype
    for f in P.names:
        np.testing.assert_allclose(dps[f], want_ps[f], rtol=1e-5, atol=1e-5)
    assert dg.shape == (3,)
    np.testing.assert_allclose(dg, want_g, rtol=1e-5, atol=1e-5)
    tape.release()


def test_structured_seeds(mod):
    ps = particles(4, seed=7)
    seed = particles(4, seed=8)
    with kern.Tape() as tape:
        mod.step(ps=ps, dt=0.5, g=(0, -1, 0))
    tape.backward(seeds=[(ps, seed)])
    d = tape.grad(ps)
    # step: vel' = vel + g dt, pos' = pos + vel' dt: dL/dvel = s_vel + dt s_pos
    np.testing.assert_allclose(d["pos"], seed["pos"], rtol=1e-6)
    np.testing.assert_allclose(d["vel"], seed["vel"] + 0.5 * seed["pos"], rtol=1e-6)
    np.testing.assert_allclose(d["mass"], seed["mass"], rtol=1e-6)
    bad = np.zeros(4, [("pos", "<f4", (3,)), ("mass", "<f4")])
    with pytest.raises(kern.ArgumentError, match="field 'vel' is missing"):
        tape.backward(seeds=[(ps, bad)])
    tape.release()


def test_gradcheck_perturbs_struct_fields_and_by_value_components(mod):
    r = kern.gradcheck(mod.energy, ps=particles(5, seed=9), g=(0.3, -1.0, 0.5),
                       e=np.zeros(5, np.float32))
    assert r["ok"], r
    assert r["checked"] == 5 * 7 + 3 + 5  # every field of every particle, g, e
    qs = np.zeros(2, mod.nested.param_dtype("qs"))
    qs["a"]["vel"], qs["m"], qs["s"] = 0.5, 1.5, 2
    r = kern.gradcheck(mod.nested, qs=qs, out=np.zeros(2, np.float32), r=np.ones((2, 2)),
                       p=[1] * 7)
    assert r["ok"], r
    assert r["checked"] == 2 * 12 + 2 + 4 + 7


def test_errors_name_the_parameter_and_the_expected_shape(mod):
    k = mod.step
    ps = particles(4)

    def call(**kw):
        args = dict(ps=ps, dt=0.5, g=(0, 0, 0))
        args.update(kw)
        k(**args)

    where = r"kernel 'step', parameter 'ps' \(P\{pos:vec3,vel:vec3,mass:f32\}\[\]\): "
    cases = [
        (dict(ps=np.zeros((4, 6), np.float32)), where + r"expected an array of shape \(N,\) "
         r"of its structured dtype, or \(N, 7\) of float32, got float32 of shape \(4, 6\)"),
        (dict(ps=np.zeros(28, np.float32)), where + "expected an array of shape"),
        (dict(ps=np.zeros(4, [("pos", "<f4", (3,)), ("mass", "<f4")])),
         where + "the structured dtype .* does not match the struct P: field 'vel' is missing"),
        (dict(ps=np.zeros(4, P.descr + [("x", "<f4")])), "field 'x' is not in the struct"),
        (dict(ps=np.zeros(4, [P.descr[1], P.descr[0], P.descr[2]])),
         r"the fields are in another order \(vel, pos, mass, not pos, vel, mass\)"),
        (dict(ps=np.zeros(4, [("pos", "<f8", (3,)), P.descr[1], P.descr[2]])),
         r"field 'pos' is float64\(3,\), not float32\(3,\)"),
        (dict(ps=np.zeros(4, [("pos", "<f4", (9,)), P.descr[1], P.descr[2]])),
         r"field 'pos' is float32\(9,\), not float32\(3,\)"),
        (dict(ps=np.zeros(4, [("pos", ">f4", (3,)), P.descr[1], P.descr[2]])),
         r"field 'pos' is >f4\(3,\), not float32\(3,\)"),
        (dict(ps=np.zeros(4, {"names": P.names, "formats": [("<f4", (3,)), ("<f4", (3,)), "<f4"],
                              "offsets": [0, 12, 24], "itemsize": 32})),
         "its size is 32 bytes, not 28"),
        (dict(ps=np.zeros(4, {"names": P.names, "formats": [("<f4", (3,)), ("<f4", (3,)), "<f4"],
                              "offsets": [0, 16, 28]})), "field 'vel' is at offset 16, not 12"),
        (dict(g=(1, 2)), r"parameter 'g' \(vec3\): expected float32 numbers of shape \(3,\), "
         r"got int64 of shape \(2,\)"),
        (dict(g=[[1, 2, 3]]), r"got int64 of shape \(1, 3\)"),
        (dict(g="abc"), "parameter 'g'"),
        (dict(g=[1j, 2, 3]), "got complex128"),
        (dict(g=None), r"parameter 'g' \(vec3\): expected float32 numbers of shape \(3,\), "
         "got NoneType"),
        (dict(g=ps), r"parameter 'g' \(vec3\): a structured array binds only to a struct"),
    ]
    for kw, msg in cases:
        with pytest.raises(kern.ArgumentError, match=msg):
            call(**kw)
    with pytest.raises(kern.ArgumentError, match=r"parameter 'm' \(mat3\[,\]\): expected an "
                       r"array of shape \(N, M, 3, 3\) of float32, got float32 of shape "
                       r"\(2, 2, 3, 4\)"):
        mod.matvec(m=np.zeros((2, 2, 3, 4), np.float32), v=np.zeros((2, 2, 3), np.float32),
                   out=np.zeros((2, 2, 3), np.float32), g=(0, 0, 0))
    with pytest.raises(kern.ArgumentError, match=r"parameter 'a' \(vec3\[\]\): expected an "
                       r"array of shape \(N, 3\) of float32, got float32 of shape \(5,\)"):
        e = np.zeros(5, np.float32)
        mod.cross3(e, e, e)
    np.testing.assert_array_equal(ps, particles(4))  # nothing ran


def test_struct_of_floats_and_ints_is_viewed_as_float_words_in_place():
    """A struct of f32 and i32/u32 fields is stored as f32 words (docs/reference.md 3.3): a
    structured array of it binds in place (its integer fields' bits reinterpreted, never
    converted) and the kernel's integer arithmetic sees the integers."""
    src = """
struct M { id: i32, w: f32, pos: vec2, flags: u32 }
kernel k(ms: M[], y: f32[]) {
    for i in 0..len(ms) {
        y[i] = ms[i].w * ms[i].pos.y + f32(ms[i].id);
        ms[i].id = ms[i].id + i32(ms[i].flags);
    }
}
"""
    k = kern.compile(src, name="mixed.kern")["k"]
    dt = k.param_dtype("ms")
    assert dt == np.dtype([("id", "<i4"), ("w", "<f4"), ("pos", "<f4", (2,)), ("flags", "<u4")])
    a = np.zeros(6, dt)
    a["id"] = np.arange(6) * 10 - 20
    a["w"] = np.linspace(0.5, 3.0, 6, dtype=np.float32)
    a["pos"][:, 1] = 3.0
    a["flags"] = 2**31 + 7
    want_y = a["w"].astype(np.float64) * 3.0 + a["id"]
    want_id = (a["id"].astype(np.int64) + (2**31 + 7)).astype(np.uint32).view(np.int32)
    y = np.zeros(6, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a copy would warn
        k(a, y)
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_array_equal(a["id"], want_id)
