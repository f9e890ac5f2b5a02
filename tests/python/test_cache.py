"""Context(cache=...): the compile cache of docs/runtime.md from Python, in a temporary
directory: a second context loads the entry and computes what NumPy computes; cache=False
writes nothing; a bad value is an ArgumentError."""
import os

import numpy as np
import pytest

import kern

SRC = ("kernel f(x: f32[], y: f32[]) {\n"
       "    for i in 0..len(x) { y[i] = sin(x[i]) * x[i]; }\n"
       "}\n")


def entries(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".kmod"))


def run(ctx):
    m = kern.compile(SRC, context=ctx, name="cache.kern")
    x = np.linspace(-2, 2, 100).astype(np.float32)
    y = np.zeros_like(x)
    m.kernel("f")(x=x, y=y)
    np.testing.assert_allclose(y, np.sin(x) * x, rtol=1e-5, atol=1e-6)


def test_second_context_loads_the_entry(tmp_path):
    d = str(tmp_path)
    run(kern.Context(cache=d))
    first = entries(d)
    assert len(first) == 1
    ino = os.stat(os.path.join(d, first[0])).st_ino
    run(kern.Context(cache=d))
    assert entries(d) == first
    assert os.stat(os.path.join(d, first[0])).st_ino == ino  # loaded, not written again


def test_cache_false_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KERN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KERN_CACHE", "1")
    run(kern.Context(cache=False))
    assert entries(str(tmp_path)) == []
    run(kern.Context())  # None: the environment's directory
    assert len(entries(str(tmp_path))) == 1


def test_bad_cache_value():
    with pytest.raises(kern.ArgumentError, match="cache must be"):
        kern.Context(cache=3)
