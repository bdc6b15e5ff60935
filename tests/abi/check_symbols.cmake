# ABI guard: the dynamic symbols libattn defines must equal the committed allow-list, and the
# allow-list must equal the functions the public header declares with ATTN_API.
#   cmake -DNM=<nm> -DLIB=<libattn.so> -DALLOW=<symbols.txt> -DHEADER=<attn.h> -P check_symbols.cmake
foreach(_v NM LIB ALLOW HEADER)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "check_symbols.cmake: -D${_v}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only ${LIB}
                OUTPUT_VARIABLE _nm_out ERROR_VARIABLE _nm_err RESULT_VARIABLE _nm_rc)
if(NOT _nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed (${_nm_rc}): ${_nm_err}")
endif()

# "<address> <type> <name>[@version]" per line.
set(_exported "")
string(REPLACE "\n" ";" _lines "${_nm_out}")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^[0-9a-fA-F]* *[A-Za-z] +([^ @]+)")
    list(APPEND _exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _exported)
list(SORT _exported)

file(STRINGS ${ALLOW} _allowed REGEX "^[A-Za-z_]")
list(SORT _allowed)

file(READ ${HEADER} _hdr)
string(REGEX MATCHALL "ATTN_API[^;(]*[ *](attn_[a-z0-9_]+)\\(" _decls "${_hdr}")
set(_declared "")
foreach(_d IN LISTS _decls)
  string(REGEX MATCH "(attn_[a-z0-9_]+)\\($" _m "${_d}")
  list(APPEND _declared "${CMAKE_MATCH_1}")
endforeach()
list(SORT _declared)

function(_diff title a_name b_name)
  set(_extra ${${a_name}})
  list(REMOVE_ITEM _extra ${${b_name}})
  set(_missing ${${b_name}})
  list(REMOVE_ITEM _missing ${${a_name}})
  if(_extra OR _missing)
    list(JOIN _extra " " _e)
    list(JOIN _missing " " _m)
    message(SEND_ERROR "${title}\n  not in the allow-list: ${_e}\n  in the allow-list only: ${_m}")
  endif()
endfunction()

list(LENGTH _exported _n_exp)
list(LENGTH _allowed _n_allow)
list(LENGTH _declared _n_decl)
message(STATUS "exported ${_n_exp}, allow-list ${_n_allow}, declared in attn.h ${_n_decl}")
if(_n_allow EQUAL 0)
  message(FATAL_ERROR "allow-list ${ALLOW} is empty")
endif()
_diff("exported symbols of ${LIB} differ from ${ALLOW}" _exported _allowed)
_diff("ATTN_API functions of ${HEADER} differ from ${ALLOW}" _declared _allowed)
