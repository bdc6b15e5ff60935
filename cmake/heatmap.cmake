# The attention-weight heatmap example (examples/python/heatmap.py) and its ctest.
# Included at the end of cmake/python.cmake (ATTN_WITH_PYTHON: python3 with numpy is there).
#
# Test:
#   python_heatmap  tests/python/check_heatmap.py --render examples/python/heatmap.py: renders a
#                   12 x 16 grid (causal top-left, window-left 4, 3 padded keys) into a temporary
#                   directory, then parses the PNG in pure Python (chunks, CRCs, zlib,
#                   un-filtering) and checks the grid size, the hidden / padded / colour-map
#                   colour of every cell against the rules of capi/attn.h and the library's
#                   weights, and that the colours follow the weights. Writes nothing into the
#                   source or build tree.
#
# Regenerate docs/images/heatmap_causal_pad_window.png (the picture in docs/api.md) with
# `ninja -C <build> attn_heatmap_image`.

if(NOT Python3_EXECUTABLE)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
endif()

# How the package and the library are found from the build tree (as cmake/python.cmake does).
set(_attn_heatmap_env
  "ATTN_LIBRARY=$<TARGET_FILE:attn>"
  "PYTHONPATH=${PROJECT_SOURCE_DIR}/bindings/python"
  "PYTHONDONTWRITEBYTECODE=1")

add_test(NAME python_heatmap
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/python/check_heatmap.py
          --render ${PROJECT_SOURCE_DIR}/examples/python/heatmap.py
          --seq-q 12 --seq-k 16 --causal top-left --window-left 4 --pad 3
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(python_heatmap PROPERTIES ENVIRONMENT "${_attn_heatmap_env}" TIMEOUT 120)

add_custom_target(attn_heatmap_image
  COMMAND ${CMAKE_COMMAND} -E env ${_attn_heatmap_env}
          ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/python/heatmap.py
          --seq-q 16 --seq-k 20 --causal bottom-right --window-left 6 --pad 4
          --out ${PROJECT_SOURCE_DIR}/docs/images/heatmap_causal_pad_window.png
  DEPENDS attn USES_TERMINAL VERBATIM)
