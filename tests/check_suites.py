#!/usr/bin/env python3
"""check_suites.py KERN_TESTS SUITE... - fails unless the Criterion suites that KERN_TESTS
lists (`--list`) are exactly the SUITEs that tests/meson.build registers as meson tests."""
import re
import subprocess
import sys

out = subprocess.run([sys.argv[1], "--list"], capture_output=True, text=True, check=True)
have = {m.group(1) for m in re.finditer(r"^(\w+): \d+ tests?$", out.stdout + out.stderr, re.M)}
listed = set(sys.argv[2:])
if not have:
    sys.exit("check_suites: no suites in the output of --list")
missing, extra = sorted(have - listed), sorted(listed - have)
if missing:
    print("suites not registered in tests/meson.build:", " ".join(missing), file=sys.stderr)
if extra:
    print("suites registered in tests/meson.build that the binary lacks:", " ".join(extra),
          file=sys.stderr)
sys.exit(1 if missing or extra else 0)
