"""The Python demo runs and prints exactly what the C demo prints (same library, same text).

ctest sets ATTN_C_DEMO to the built attn_demo; without it only the Python demo's own checks run
(it exits non-zero unless out[1][0] == 15)."""

import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO = os.path.join(ROOT, "examples", "python", "demo.py")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_demo_runs():
    out = run([sys.executable, DEMO])
    assert "(out[1][0] = 15: the mean of V[0] and V[1])" in out
    assert "out = [10, 15, 20]" in out
    assert out.count("   sequence ") == 3


def test_demo_matches_c_demo():
    c_demo = os.environ.get("ATTN_C_DEMO")
    if not c_demo:
        # Not counted as a pass when it could not compare: say so loudly.
        import pytest
        pytest.skip("ATTN_C_DEMO not set (ctest sets it)")
    assert run([sys.executable, DEMO]) == run([c_demo])
