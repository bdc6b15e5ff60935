"""Finding and loading libattn, and the ctypes prototypes of capi/attn.h.

Search order (the first that exists wins; a path that exists but fails to load is an error, never
silently skipped):
  1. the environment variable ATTN_LIBRARY (a path to the shared library file);
  2. beside this package: attn/libattn.so, where an installed wheel has it (pyproject.toml builds
     it from this repository's CMake; cmake/python_wheel.cmake installs it there), or a libattn
     copied into the attn/ directory by hand (libattn.so.0 is tried as well);
  3. the system's paths: ctypes.util.find_library("attn"), then "libattn.so.0", "libattn.so".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
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

    candidates = []
    found = ctypes.util.find_library("attn")
    if found:
        candidates.append(found)
    candidates.extend(_SYSTEM_NAMES)
    errors = []
    for name in candidates:
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            errors.append("%s (%s)" % (name, e))
    tried.extend(errors)
    raise OSError("libattn not found; set ATTN_LIBRARY to the path of libattn.so, or install "
                  "the package with its library (pip install <libattn source folder>). Tried: "
                  + "; ".join(tried))


lib, path = _load()

_c_float_p = ctypes.c_void_p  # float* / bool*: passed as raw addresses (zero copy)
_size = ctypes.c_size_t
_status = ctypes.c_int


def _proto(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


attn_version_string = _proto("attn_version_string", ctypes.c_char_p)
attn_version_number = _proto("attn_version_number", ctypes.c_uint)
attn_status_string = _proto("attn_status_string", ctypes.c_char_p, ctypes.c_int)
attn_last_error = _proto("attn_last_error", ctypes.c_char_p)
attn_simple = _proto("attn_simple", _status, _c_float_p, _c_float_p, _c_float_p, _size, _size,
                     ctypes.c_bool, _c_float_p, _c_float_p)
attn_desc_create = _proto("attn_desc_create", _status, ctypes.POINTER(ctypes.c_void_p), _size,
                          _size, _size, _size, _size, _size)
attn_desc_destroy = _proto("attn_desc_destroy", None, ctypes.c_void_p)
attn_desc_set_causal = _proto("attn_desc_set_causal", _status, ctypes.c_void_p, ctypes.c_int)
attn_desc_set_scale = _proto("attn_desc_set_scale", _status, ctypes.c_void_p, ctypes.c_float)
attn_desc_set_strides = _proto("attn_desc_set_strides", _status, ctypes.c_void_p, ctypes.c_int,
                               _size, _size, _size)
attn_desc_required_len = _proto("attn_desc_required_len", _size, ctypes.c_void_p, ctypes.c_int)
attn_forward = _proto("attn_forward", _status, ctypes.c_void_p, _c_float_p, _c_float_p,
                      _c_float_p, _c_float_p, _c_float_p, _c_float_p, _c_float_p)
attn_weights = _proto("attn_weights", _status, ctypes.c_void_p, _c_float_p, _c_float_p,
                      _c_float_p, _c_float_p, _c_float_p)
attn_set_num_threads = _proto("attn_set_num_threads", _status, _size)
attn_get_num_threads = _proto("attn_get_num_threads", _size)
attn_isa = _proto("attn_isa", ctypes.c_char_p)
attn_set_isa = _proto("attn_set_isa", _status, ctypes.c_char_p)


def _need_0_2():
    """The 0.2 entry points; a 0.1 library lacks them: say so instead of an AttributeError."""
    if attn_version_number() < 200 or not hasattr(lib, "attn_run"):
        raise OSError("libattn at %s is version %s; this package needs libattn >= 0.2.0 "
                      "(attn_run, attn_args_*, attn_desc_set_int/_float)"
                      % (path, attn_version_string().decode("ascii", "replace")))


_need_0_2()

# since 0.2: parameters, the attn_args binding object and attn_run.
_void_p = ctypes.c_void_p
attn_desc_set_int = _proto("attn_desc_set_int", _status, _void_p, ctypes.c_int, ctypes.c_int64)
attn_desc_set_float = _proto("attn_desc_set_float", _status, _void_p, ctypes.c_int,
                             ctypes.c_double)
attn_desc_get_int = _proto("attn_desc_get_int", _status, _void_p, ctypes.c_int,
                           ctypes.POINTER(ctypes.c_int64))
attn_desc_get_float = _proto("attn_desc_get_float", _status, _void_p, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_double))
attn_param_bounds = _proto("attn_param_bounds", _status, ctypes.c_int,
                           ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_double),
                           ctypes.POINTER(ctypes.c_double))
attn_args_create = _proto("attn_args_create", _status, ctypes.POINTER(_void_p))
attn_args_destroy = _proto("attn_args_destroy", None, _void_p)
attn_args_clear = _proto("attn_args_clear", _status, _void_p)
attn_args_set_f32 = _proto("attn_args_set_f32", _status, _void_p, ctypes.c_int, _void_p, _size)
attn_args_set_out_f32 = _proto("attn_args_set_out_f32", _status, _void_p, ctypes.c_int, _void_p,
                               _size)
attn_args_set_u8 = _proto("attn_args_set_u8", _status, _void_p, ctypes.c_int, _void_p, _size)
attn_args_set_i32 = _proto("attn_args_set_i32", _status, _void_p, ctypes.c_int, _void_p, _size)
attn_run = _proto("attn_run", _status, _void_p, ctypes.c_int, _void_p)


def _optional_proto(name, restype, *argtypes):
    """A prototype, or None when this library lacks the function (the caller says so)."""
    return _proto(name, restype, *argtypes) if hasattr(lib, name) else None


# since 0.2, the serving layouts: attn_kv_append (new K/V rows into their cache positions) and
# attn_merge (exact merge of partial results). Optional, so an early 0.2 build still imports.
attn_kv_append = _optional_proto("attn_kv_append", _status, _void_p, _void_p, _void_p, _size,
                                 _void_p, _size)
attn_merge = _optional_proto("attn_merge", _status, _void_p, _void_p, _void_p)

# since 0.2, storage types (capi/attn.h "Storage types"): 16-bit and int8 Q/K/V, the conversion
# helpers. Optional like the serving calls: a library without them still imports, and the
# binding names the missing function when it is used.
attn_args_set_f16 = _optional_proto("attn_args_set_f16", _status, _void_p, ctypes.c_int, _void_p,
                                    _size)
attn_args_set_bf16 = _optional_proto("attn_args_set_bf16", _status, _void_p, ctypes.c_int,
                                     _void_p, _size)
attn_args_set_i8 = _optional_proto("attn_args_set_i8", _status, _void_p, ctypes.c_int, _void_p,
                                   _size)
# since 0.2, appends into caches of every storage type: the caches bound writable in the args.
attn_args_set_out_f16 = _optional_proto("attn_args_set_out_f16", _status, _void_p, ctypes.c_int,
                                        _void_p, _size)
attn_args_set_out_bf16 = _optional_proto("attn_args_set_out_bf16", _status, _void_p, ctypes.c_int,
                                         _void_p, _size)
attn_args_set_out_i8 = _optional_proto("attn_args_set_out_i8", _status, _void_p, ctypes.c_int,
                                       _void_p, _size)
attn_kv_append_args = _optional_proto("attn_kv_append_args", _status, _void_p, _void_p)
attn_convert_f32_to_f16 = _optional_proto("attn_convert_f32_to_f16", _status, _void_p, _void_p,
                                          _size)
attn_convert_f32_to_bf16 = _optional_proto("attn_convert_f32_to_bf16", _status, _void_p,
                                           _void_p, _size)
attn_convert_f16_to_f32 = _optional_proto("attn_convert_f16_to_f32", _status, _void_p, _void_p,
                                          _size)
attn_convert_bf16_to_f32 = _optional_proto("attn_convert_bf16_to_f32", _status, _void_p,
                                           _void_p, _size)
attn_quantize_i8 = _optional_proto("attn_quantize_i8", _status, _void_p, _size, _size, _void_p,
                                   _void_p)
