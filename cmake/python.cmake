# Python binding (bindings/python, ctypes: nothing to compile) and its pytest suite.
# Included from the top-level CMakeLists.txt when ATTN_WITH_PYTHON is ON. (The pip-installable
# wheel: pyproject.toml + cmake/python_wheel.cmake, tested by ctest consumer_python.)
#
# Tests:
#   python_tests  pytest -q tests/python: the 0.1 shared vectors ($ATTN_XLANG_DIR/python.bin) and
#                 the 0.2 ones (variants.txt -> python.variants.bin, errors.txt), every attn_param
#                 and operand vs the float64 reference, shape/stride checks, docs/errors.md's "One rule"
#                 table, scaled_dot_product_attention vs numpy float64, concurrency, DLPack /
#                 array-interface objects and PyTorch's mask shapes vs the float64 reference,
#                 the typing (py.typed, annotations), where the library is loaded from
#   python_demo   examples/python/demo.py against the built library (one command)

# cmake/features.cmake found python3 (Python3_EXECUTABLE) and, for the tests, that it imports
# numpy, pytest, venv and ensurepip. The binding itself builds nothing: with
# -DATTN_BUILD_TESTS=OFF there is nothing more to do.
if(NOT ATTN_BUILD_TESTS)
  return()
endif()

set(_attn_py_env
  "ATTN_LIBRARY=$<TARGET_FILE:attn>"
  "ATTN_C_DEMO=$<$<TARGET_EXISTS:attn_demo>:$<TARGET_FILE:attn_demo>>"
  "ATTN_XLANG_DIR=${CMAKE_BINARY_DIR}/xlang"
  "PYTHONPATH=${PROJECT_SOURCE_DIR}/bindings/python"
  "PYTHONDONTWRITEBYTECODE=1")
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/xlang)

# -p no:cacheprovider: write nothing into the source tree.
add_test(NAME python_tests
  COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
          ${PROJECT_SOURCE_DIR}/tests/python
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(python_tests PROPERTIES ENVIRONMENT "${_attn_py_env}" TIMEOUT 600)

# The demo exits non-zero unless out[1][0] == 15 (tests/python/test_demo.py also compares its
# whole output with the C demo's).
add_test(NAME python_demo
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/python/demo.py
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(python_demo PROPERTIES ENVIRONMENT "${_attn_py_env}" TIMEOUT 60)

# One-command runners: `ninja -C <build> attn_python_demo` / `attn_python_bench`.
add_custom_target(attn_python_demo
  COMMAND ${CMAKE_COMMAND} -E env "ATTN_LIBRARY=$<TARGET_FILE:attn>"
          ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/python/demo.py
  DEPENDS attn USES_TERMINAL VERBATIM)
add_custom_target(attn_python_bench
  COMMAND ${CMAKE_COMMAND} -E env "ATTN_LIBRARY=$<TARGET_FILE:attn>"
          ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/bench/python/bench.py
  DEPENDS attn USES_TERMINAL VERBATIM)
include(heatmap)
include(llm)
