"""Finding and loading libattn, and the ctypes prototypes of capi/attn.h (set once, here).

Search order (the first that exists wins; a path that exists but fails to load is an error):
$ATTN_LIBRARY; attn/libattn.so beside this package (the wheel's, cmake/python_wheel.cmake);
the system's paths (ctypes.util.find_library("attn"), libattn.so.0, libattn.so).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
from typing import Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))

# The unversioned name first: it is the wheel's file (cmake/python_wheel.cmake).
if sys.platform == "darwin":
    _LOCAL_NAMES = ("libattn.dylib", "libattn.0.dylib")
    _SYSTEM_NAMES = ("libattn.0.dylib", "libattn.dylib")
elif sys.platform == "win32":
    _LOCAL_NAMES = ("attn.dll", "libattn.dll")
    _SYSTEM_NAMES = ("attn.dll", "libattn.dll")
else:
    _LOCAL_NAMES = ("libattn.so", "libattn.so.0")
    _SYSTEM_NAMES = ("libattn.so.0", "libattn.so")


def _load() -> Tuple[ctypes.CDLL, str]:
    env = os.environ.get("ATTN_LIBRARY")
    if env:
        try:
            return ctypes.CDLL(env), env
        except OSError as e:
            raise OSError("ATTN_LIBRARY=%r could not be loaded: %s" % (env, e)) from None
    tried = ["$ATTN_LIBRARY (not set)"]
    for name in _LOCAL_NAMES:
        path = os.path.join(_HERE, name)
        if os.path.exists(path):
            return ctypes.CDLL(path), path
        tried.append(path)
    found = ctypes.util.find_library("attn")
    for name in ([found] if found else []) + list(_SYSTEM_NAMES):
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
    raise OSError("libattn not found; set ATTN_LIBRARY to the path of libattn.so, or install "
                  "the package with its library (pip install <libattn source folder>). Tried: "
                  + "; ".join(tried))


lib, path = _load()

# Letters of the prototypes: the C types of capi/attn.h. Pointers to data are passed as raw
# addresses (zero copy).
_C = {"s": ctypes.c_int, "i": ctypes.c_int, "u": ctypes.c_uint, "z": ctypes.c_size_t,
      "p": ctypes.c_void_p, "b": ctypes.c_bool, "f": ctypes.c_float, "d": ctypes.c_double,
      "l": ctypes.c_int64, "c": ctypes.c_char_p, "v": None,
      "P": ctypes.POINTER(ctypes.c_void_p), "C": ctypes.POINTER(ctypes.c_char_p),
      "I": ctypes.POINTER(ctypes.c_int), "U": ctypes.POINTER(ctypes.c_uint),
      "L": ctypes.POINTER(ctypes.c_int64), "D": ctypes.POINTER(ctypes.c_double)}

# name: result letter, then argument letters.
_PROTOTYPES = """
attn_version_string c | attn_version_number u | attn_status_string c i | attn_last_error c
attn_simple s ppp zz b pp | attn_desc_create s P zzzzzz | attn_desc_destroy v p
attn_desc_set_causal s pi | attn_desc_set_scale s pf | attn_desc_set_strides s pi zzz
attn_desc_required_len z pi | attn_forward s p ppppppp | attn_weights s p ppppp
attn_set_num_threads s z | attn_get_num_threads z | attn_isa c | attn_set_isa s c
attn_desc_set_int s pil | attn_desc_set_float s pid | attn_desc_get_int s piL
attn_desc_get_float s piD | attn_param_bounds s iIDD | attn_args_create s P
attn_args_destroy v p | attn_args_clear s p | attn_run s pip
attn_args_set_f32 s pipz | attn_args_set_out_f32 s pipz | attn_args_set_u8 s pipz
attn_args_set_i32 s pipz | attn_args_set_f16 s pipz | attn_args_set_bf16 s pipz
attn_args_set_i8 s pipz | attn_args_set_out_f16 s pipz | attn_args_set_out_bf16 s pipz
attn_args_set_out_i8 s pipz | attn_kv_append s ppp zpz | attn_merge s ppp
attn_kv_append_args s pp | attn_convert_f32_to_f16 s ppz | attn_convert_f32_to_bf16 s ppz
attn_convert_f16_to_f32 s ppz | attn_convert_bf16_to_f32 s ppz | attn_quantize_i8 s pzzpp
attn_operand_info s iCUUII | attn_operand_dims s iC | attn_param_info s iCIDDD
attn_isa_info s iCI | attn_compute_unit c i | attn_args_set_fp8 s piipz
attn_args_set_out_fp8 s piipz | attn_quantize_fp8 s pzzifp | attn_dequantize_fp8 s pzzifp
"""

if not hasattr(lib, "attn_isa_info"):  # a library without the queries lacks other calls too
    raise OSError("libattn at %s is older than this package: it needs libattn >= 0.2.0 with "
                  "the introspection queries (attn_operand_info, attn_isa_info)" % path)
for _entry in filter(str.strip, re.split(r"[|\n]", _PROTOTYPES)):
    _name, _res, *_args = _entry.split()
    _fn = getattr(lib, _name)
    _fn.restype = _C[_res]
    _fn.argtypes = [_C[c] for c in "".join(_args)]
    globals()[_name] = _fn


def _table(query, *types):
    """The rows of an introspection query (capi/attn.h "Introspection"), from index 0 until the
    library refuses the index; strings decoded."""
    rows, outs = [], [t() for t in types]
    while query(len(rows), *(ctypes.byref(o) for o in outs)) == 0:
        rows.append(tuple(o.value.decode("ascii") if isinstance(o.value, bytes) else o.value
                          for o in outs))
    return tuple(rows)


# The library's tables, read once: operands (name, input types, output types, rank, strided),
# parameters (name, is_float, min, max, default) and ISAs (name, supported).
OPERANDS = _table(attn_operand_info, ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint,  # noqa: F821
                  ctypes.c_int, ctypes.c_int)
# Each operand's dense shape in attn.h's names ("batch heads_q seq_q head_dim").
DIMS = tuple(row[0] for row in _table(attn_operand_dims, ctypes.c_char_p))  # noqa: F821
PARAMS = _table(attn_param_info, ctypes.c_char_p, ctypes.c_int, ctypes.c_double,  # noqa: F821
                ctypes.c_double, ctypes.c_double)
ISAS = _table(attn_isa_info, ctypes.c_char_p, ctypes.c_int)  # noqa: F821
