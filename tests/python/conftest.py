"""The Python tests compile without the compile cache (docs/runtime.md), so that they never
write to the user's home; test_cache.py gives its contexts a directory of their own."""
import os

os.environ.setdefault("KERN_CACHE", "0")
