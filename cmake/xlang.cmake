# Cross-language byte identity: every language's vector test wrote $ATTN_XLANG_DIR/<lang>.bin
# (out, lse and weights of every shared case) and <lang>.variants.bin (the 0.2 cases of
# variants.txt); each must equal the C tests' c.bin / c.variants.bin byte for byte.
set(_xlang_deps c_vectors c_variants)
foreach(_lang IN LISTS ATTN_XLANG_LANGS)
  if(NOT _lang STREQUAL "c")
    list(APPEND _xlang_deps ${_lang}_tests)
  endif()
endforeach()
add_test(NAME xlang_identical
  COMMAND ${CMAKE_COMMAND} -DDIR=${ATTN_XLANG_DIR} "-DLANGS=${ATTN_XLANG_LANGS}"
          -P ${CMAKE_CURRENT_LIST_DIR}/xlang_compare.cmake)
set_tests_properties(xlang_identical PROPERTIES DEPENDS "${_xlang_deps}")
