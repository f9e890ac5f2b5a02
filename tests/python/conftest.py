"""Fixtures shared by the Python package's tests. The tests compile without the compile
cache (docs/runtime.md), so that they never write to the user's home; test_cache.py gives
its contexts a directory of their own."""
import os
import threading

import pytest

os.environ.setdefault("KERN_CACHE", "0")


@pytest.fixture
def in_threads():
    """in_threads(body, n) runs body(i) on n threads at once (i = 0 .. n-1) and returns
    their results in order; an exception in any fails the test, naming its thread."""
    def run(body, n):
        results, errors = [None] * n, []

        def one(i):
            try:
                results[i] = body(i)
            except Exception as e:  # reported below, with the thread
                errors.append((i, e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        return results
    return run
