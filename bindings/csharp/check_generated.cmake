# cmake -P: checks SWIG's C# output before mcs compiles it into LibAttn.dll.
#   -DGENERATED=<folder of AttnNative.cs, AttnNativePINVOKE.cs> -DDLLIMPORT=libattn_csharp
# 1. Every method of the raw class AttnNative is [MethodImpl(NoInlining)] and calls
#    NativeLoader.EnsureLoaded() first (attn_csharp.i [T7]): Mono binds a [DllImport] when it
#    compiles the calling method, so a raw method compiled into the face, or one whose return type
#    has no csout typemap of ours, would skip the native loader and fail with the runtime's own
#    DllNotFoundException.
# 2. Every [DllImport] of AttnNativePINVOKE names DLLIMPORT, the library NativeLoader preloads.
cmake_minimum_required(VERSION 3.21)
foreach(_v GENERATED DLLIMPORT)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "check_generated.cmake: -D${_v}=... is required")
  endif()
endforeach()

# Cut AttnNative.cs at each method (no CMake lists: C# is full of ';').
file(READ "${GENERATED}/AttnNative.cs" _rest)
set(_head "\n  (\\[[^]\n]*\\] )?public [a-z ]*static [^\n(]+ ([A-Za-z0-9_]+)\\(")
set(_n 0)
set(_bad "")
while(_rest MATCHES "${_head}(.*)$")
  set(_attr "${CMAKE_MATCH_1}")
  set(_name "${CMAKE_MATCH_2}")
  set(_rest "${CMAKE_MATCH_3}")
  math(EXPR _n "${_n} + 1")
  string(FIND "${_rest}" "\n  }" _end)
  string(SUBSTRING "${_rest}" 0 ${_end} _body)
  if(NOT _attr MATCHES "MethodImplOptions\\.NoInlining")
    string(APPEND _bad "\n  ${_name}: not [MethodImpl(MethodImplOptions.NoInlining)]")
  endif()
  if(NOT _body MATCHES "^[^;]*NativeLoader\\.EnsureLoaded\\(\\);")
    string(APPEND _bad "\n  ${_name}: does not start with NativeLoader.EnsureLoaded() (a csout typemap for its return type is missing)")
  endif()
endwhile()
if(_n EQUAL 0)
  message(FATAL_ERROR "check_generated.cmake: found no method in ${GENERATED}/AttnNative.cs")
endif()
if(_bad)
  message(FATAL_ERROR "check_generated.cmake: raw methods in AttnNative.cs that skip the native "
                      "loader (attn_csharp.i [T7]):${_bad}")
endif()

file(READ "${GENERATED}/AttnNativePINVOKE.cs" _pinvoke)
string(REGEX MATCHALL "DllImport\\(\"[^\"]*\"" _imports "${_pinvoke}")
list(REMOVE_DUPLICATES _imports)
if(NOT _imports STREQUAL "DllImport(\"${DLLIMPORT}\"")
  message(FATAL_ERROR "check_generated.cmake: AttnNativePINVOKE.cs imports ${_imports}, "
                      "NativeLoader preloads \"${DLLIMPORT}\" only")
endif()
message(STATUS "AttnNative.cs: ${_n} raw methods, all NoInlining and loading the natives first; DllImport \"${DLLIMPORT}\"")
