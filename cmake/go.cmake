# Go binding (bindings/go, package attn): `go build` / `go test` run SWIG themselves on
# bindings/go/internal/capi/capi.swig, so nothing is generated into the source tree and CMake
# only provides the toolchain check, the environment and the tests.
# Included from the top-level CMakeLists.txt when ATTN_WITH_GO is ON.
#
# Targets:
#   attn_go        (ALL) go build of the binding, the demo and the bench against libattn
#   attn_go_demo   runs examples/go (the C demo's program in Go)      ninja -C <build> attn_go_demo
#   attn_go_bench  runs bench/go (the two lang=go lines)               ninja -C <build> attn_go_bench
# Tests:
#   go_tests           go test -v ./... in bindings/go: the 0.1 shared vectors (+ $ATTN_XLANG_DIR/go.bin),
#                      the 0.2 variants.txt (+ $ATTN_XLANG_DIR/go.variants.bin) and errors.txt, every
#                      parameter and operand against a float64 Go reference, the README's rules
#                      (lengths, nil vs empty, enums, aliasing, ISA names), finalizers, zero
#                      allocations, use after Close, concurrency, the go doc examples
#   go_tests_cgocheck  the same with GODEBUG=cgocheck=1
#   go_tests_cgocheck2 the same with the full pointer checker (GOEXPERIMENT=cgocheck2 on Go >= 1.21,
#                      GODEBUG=cgocheck=2 before)
#   go_tests_race      the same under the race detector (Close vs calls in flight, shared Desc)
#   go_demo            examples/go: the demo shows out[1][0] = 15 and prints exactly what the C
#                      demo prints (required when the attn_demo target exists)

if(DEFINED ATTN_WITH_GO AND NOT ATTN_WITH_GO)
  return()
endif()

find_program(ATTN_GO_EXECUTABLE NAMES go PATHS /usr/local/go/bin /usr/lib/go/bin)
if(NOT ATTN_GO_EXECUTABLE)
  message(FATAL_ERROR "ATTN_WITH_GO is ON but no `go` toolchain was found (apt-get install golang-go, "
                      "Go >= 1.19; or configure with -DATTN_WITH_GO=OFF)")
endif()
execute_process(COMMAND ${ATTN_GO_EXECUTABLE} env GOVERSION
                OUTPUT_VARIABLE _attn_go_version OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE _attn_go_rc ERROR_QUIET)
if(NOT _attn_go_rc EQUAL 0 OR NOT _attn_go_version MATCHES "^go([0-9]+)\\.([0-9]+)")
  message(FATAL_ERROR "ATTN_WITH_GO is ON but `${ATTN_GO_EXECUTABLE} env GOVERSION` failed "
                      "(got '${_attn_go_version}'); Go >= 1.19 is needed")
endif()
set(_attn_go_major ${CMAKE_MATCH_1})
set(_attn_go_minor ${CMAKE_MATCH_2})
if(_attn_go_major LESS 1 OR (_attn_go_major EQUAL 1 AND _attn_go_minor LESS 19))
  message(FATAL_ERROR "ATTN_WITH_GO is ON but ${ATTN_GO_EXECUTABLE} is ${_attn_go_version}; "
                      "Go >= 1.19 is needed")
endif()
# cmd/go runs `swig` from PATH for the .swig file.
find_program(ATTN_GO_SWIG NAMES swig swig4.0)
if(NOT ATTN_GO_SWIG)
  message(FATAL_ERROR "ATTN_WITH_GO is ON but `swig` is not on PATH (apt-get install swig; "
                      "go build runs it on bindings/go/internal/capi/capi.swig)")
endif()
message(STATUS "Go binding: ${ATTN_GO_EXECUTABLE} (${_attn_go_version}), swig ${ATTN_GO_SWIG}")

# Build cache: go's own (GOCACHE, else under HOME) as seen at configure time, so builds share a
# warm cache; without HOME or GOCACHE (go needs one of them) a cache inside the build tree.
execute_process(COMMAND ${ATTN_GO_EXECUTABLE} env GOCACHE
                OUTPUT_VARIABLE _attn_gocache OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT IS_ABSOLUTE "${_attn_gocache}")
  set(_attn_gocache "${CMAKE_BINARY_DIR}/gocache")
endif()
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/xlang ${CMAKE_BINARY_DIR}/go)

# cmd/go keys its cache of the SWIG step on capi.swig alone, not on the files it %includes
# (bindings/attn.i, capi/attn.h): after an edit there, go would reuse stale wrappers. A hash of
# all three in CGO_CFLAGS (part of go's cache key) makes go rerun SWIG; an edit re-runs this
# configure step (CMAKE_CONFIGURE_DEPENDS), so `ninja` refreshes the hash before it builds.
set(_attn_go_swig_inputs ${PROJECT_SOURCE_DIR}/bindings/go/internal/capi/capi.swig
    ${PROJECT_SOURCE_DIR}/bindings/attn.i ${PROJECT_SOURCE_DIR}/capi/attn.h)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_attn_go_swig_inputs})
set(_attn_go_swig_hash "")
foreach(_f IN LISTS _attn_go_swig_inputs)
  file(SHA256 ${_f} _h)
  string(APPEND _attn_go_swig_hash ${_h})
endforeach()
string(SHA256 _attn_go_swig_hash "${_attn_go_swig_hash}")
string(SUBSTRING ${_attn_go_swig_hash} 0 16 _attn_go_swig_hash)

set(_attn_go_libdir "$<TARGET_FILE_DIR:attn>")
set(_attn_go_env
  "GOCACHE=${_attn_gocache}"
  "GOPATH=${CMAKE_BINARY_DIR}/gopath"
  # No external modules: never reach for the network, never switch toolchains.
  "GOPROXY=off"
  "GOTOOLCHAIN=local"
  "GOFLAGS=-buildvcs=false"
  "CGO_ENABLED=1"
  "CGO_CFLAGS=-O2 -g -I${PROJECT_SOURCE_DIR}/capi -DATTN_GO_SWIG_INPUTS=${_attn_go_swig_hash}"
  "CGO_LDFLAGS=-L${_attn_go_libdir} -Wl,-rpath,${_attn_go_libdir}"
  "LD_LIBRARY_PATH=${_attn_go_libdir}"
  "ATTN_VECTORS_DIR=${PROJECT_SOURCE_DIR}/tests/vectors")
if(CMAKE_C_COMPILER)
  list(APPEND _attn_go_env "CC=${CMAKE_C_COMPILER}")
endif()
# Only go_tests writes $ATTN_XLANG_DIR/go.bin and go.variants.bin (xlang_identical depends on it
# alone); the checker variants run the same tests without writing.
if(NOT ATTN_XLANG_DIR)
  set(ATTN_XLANG_DIR ${CMAKE_BINARY_DIR}/xlang)
endif()
set(_attn_go_env_xlang ${_attn_go_env} "ATTN_XLANG_DIR=${ATTN_XLANG_DIR}")
set(_attn_go_env_noxlang ${_attn_go_env} "ATTN_XLANG_DIR=")

set(_attn_go_pkg ${PROJECT_SOURCE_DIR}/bindings/go)
set(_attn_go_demo ${PROJECT_SOURCE_DIR}/examples/go)
set(_attn_go_bench ${PROJECT_SOURCE_DIR}/bench/go)

# Compile everything Go against the freshly built library as part of the normal build, so the
# tests below find a built library and a warm cache. go's own cache decides what is stale.
add_custom_target(attn_go ALL
  COMMAND ${CMAKE_COMMAND} -E env ${_attn_go_env} ${ATTN_GO_EXECUTABLE} build ./...
  COMMAND ${CMAKE_COMMAND} -E chdir ${_attn_go_demo}
          ${CMAKE_COMMAND} -E env ${_attn_go_env} ${ATTN_GO_EXECUTABLE} build -o ${CMAKE_BINARY_DIR}/go/attn_go_demo .
  COMMAND ${CMAKE_COMMAND} -E chdir ${_attn_go_bench}
          ${CMAKE_COMMAND} -E env ${_attn_go_env} ${ATTN_GO_EXECUTABLE} build -o ${CMAKE_BINARY_DIR}/go/attn_go_bench .
  WORKING_DIRECTORY ${_attn_go_pkg}
  COMMENT "Go binding: go build (SWIG runs inside go build)"
  VERBATIM)
add_dependencies(attn_go attn)

add_custom_target(attn_go_demo
  COMMAND ${CMAKE_COMMAND} -E env ${_attn_go_env} ${ATTN_GO_EXECUTABLE} run .
  WORKING_DIRECTORY ${_attn_go_demo}
  DEPENDS attn USES_TERMINAL VERBATIM)
add_custom_target(attn_go_bench
  COMMAND ${CMAKE_COMMAND} -E env ${_attn_go_env} ${ATTN_GO_EXECUTABLE} run .
  WORKING_DIRECTORY ${_attn_go_bench}
  DEPENDS attn USES_TERMINAL VERBATIM)

add_test(NAME go_tests
  COMMAND ${ATTN_GO_EXECUTABLE} test -count=1 -v ./...
  WORKING_DIRECTORY ${_attn_go_pkg})
add_test(NAME go_tests_cgocheck
  COMMAND ${ATTN_GO_EXECUTABLE} test -count=1 ./...
  WORKING_DIRECTORY ${_attn_go_pkg})
add_test(NAME go_tests_cgocheck2
  COMMAND ${ATTN_GO_EXECUTABLE} test -count=1 ./...
  WORKING_DIRECTORY ${_attn_go_pkg})
add_test(NAME go_tests_race
  COMMAND ${ATTN_GO_EXECUTABLE} test -count=1 -race ./...
  WORKING_DIRECTORY ${_attn_go_pkg})
add_test(NAME go_demo
  COMMAND ${ATTN_GO_EXECUTABLE} test -count=1 -v .
  WORKING_DIRECTORY ${_attn_go_demo})

if(_attn_go_minor GREATER_EQUAL 21)
  set(_attn_cgocheck2 "GOEXPERIMENT=cgocheck2")
else()
  set(_attn_cgocheck2 "GODEBUG=cgocheck=2")
endif()
# With the C demo built, go_demo must compare against it (by hand, without ATTN_C_DEMO, it skips).
if(TARGET attn_demo)
  set(_attn_c_demo "ATTN_C_DEMO=$<TARGET_FILE:attn_demo>;ATTN_C_DEMO_REQUIRED=1")
else()
  set(_attn_c_demo "ATTN_C_DEMO=")
endif()
set_tests_properties(go_tests PROPERTIES ENVIRONMENT "${_attn_go_env_xlang}" TIMEOUT 900)
set_tests_properties(go_tests_cgocheck PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang};GODEBUG=cgocheck=1" TIMEOUT 900)
set_tests_properties(go_tests_cgocheck2 PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang};${_attn_cgocheck2}" TIMEOUT 900)
set_tests_properties(go_tests_race PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang}" TIMEOUT 900)
set_tests_properties(go_demo PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang};${_attn_c_demo}" TIMEOUT 900)
