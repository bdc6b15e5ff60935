"""Run by run_consumer_python.py with the venv's python, from a folder outside the repository,
with no ATTN_LIBRARY, LD_LIBRARY_PATH or PYTHONPATH: is the installed package self-contained?

Usage: python check_installed.py VENV VERSION"""

import importlib.metadata
import os
import sys

venv, version = os.path.realpath(sys.argv[1]), sys.argv[2]
for var in ("ATTN_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH"):
    assert var not in os.environ, var


def inside(path, root):
    path = os.path.realpath(path)
    return path.startswith(root + os.sep)


import attn  # noqa: E402
import numpy as np  # noqa: E402

assert os.path.realpath(sys.prefix) == venv, (sys.prefix, venv)
pkg = os.path.dirname(os.path.realpath(attn.__file__))
assert inside(pkg, venv), "attn imported from %s, not from the venv %s" % (pkg, venv)
lib = os.path.realpath(attn.library_path)
assert lib == os.path.join(pkg, "libattn.so"), "libattn loaded from %s" % attn.library_path
assert inside(lib, venv), lib
assert os.path.isfile(os.path.join(pkg, "py.typed"))
assert importlib.metadata.version("attn") == version == attn.version(), (
    importlib.metadata.version("attn"), version, attn.version())

# The seed example: Q = 0, K = [1, 2, 3], V = [10, 20, 30], causal: query 1 sees keys 0 and 1
# with equal scores, so out[1][0] is exactly the mean of 10 and 20.
out = attn.attention([[0], [0], [0]], [[1], [2], [3]], [[10], [20], [30]], causal=True)
assert out == [[10.0], [15.0], [20.0]], out
assert out[1][0] == 15.0
q = np.zeros((3, 1), np.float32)
k = np.array([[1], [2], [3]], np.float32)
v = np.array([[10], [20], [30]], np.float32)
res = attn.scaled_dot_product_attention(q, k, v, is_causal=True)
assert res.dtype == np.float32 and res[1, 0] == 15.0, res
print("attn %s from %s (isa %s): out[1][0] = %r" % (attn.version(), attn.library_path,
                                                     attn.isa(), out[1][0]))
