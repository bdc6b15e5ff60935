# Go binding (bindings/go: module github.com/libattn/libattn/bindings/go, package attn). The SWIG
# wrappers (bindings/go/internal/capi/capi.go, capi_wrap.c) are generated once and committed, so
# `go build` needs no swig and the module builds from the module proxy or a vendor folder; cgo
# finds libattn through `#cgo pkg-config: attn`. CMake provides the toolchain check, a build-tree
# attn.pc for the in-tree tests, the regeneration target and the tests.
# Included from the top-level CMakeLists.txt when ATTN_WITH_GO is ON.
#
# Targets:
#   attn_go        (ALL) go build of the binding, the demo and the bench against libattn
#   attn_go_demo   runs examples/go (the C demo's program in Go)      ninja -C <build> attn_go_demo
#   attn_go_bench  runs bench/go (the two lang=go lines)               ninja -C <build> attn_go_bench
#   go_generate    regenerates the committed SWIG wrappers (`go generate ./...` in bindings/go,
#                  which runs internal/capi/generate.sh; needs swig 4.1.0)   ninja -C <build> go_generate
# Tests:
#   go_tests           go test -v ./... in bindings/go: the 0.1 shared vectors (+ $ATTN_XLANG_DIR/go.bin),
#                      the 0.2 variants.txt, storage.txt and backward.txt (+ $ATTN_XLANG_DIR/go.variants.bin,
#                      go.storage.bin, go.backward.bin) and errors.txt, every
#                      parameter and operand against a float64 Go reference, the README's rules
#                      (lengths, nil vs empty, enums, aliasing, ISA names), finalizers, zero
#                      allocations, use after Close, concurrency, the go doc examples, and the
#                      serving layouts (varlen_test.go, paged_test.go, merge_test.go,
#                      serving_errors_test.go: varlen packs and paged caches filled by KVAppend,
#                      bit-identical to dense calls with batch invariance; Merge; every bad block
#                      table, length and prefix sum named by slot). Every *_test.go file of the
#                      package runs (go test ./...); shared helpers live in helpers_test.go.
#   go_tests_cgocheck  the same with GODEBUG=cgocheck=1
#   go_tests_cgocheck2 the same with the full pointer checker (GOEXPERIMENT=cgocheck2 on Go >= 1.21,
#                      GODEBUG=cgocheck=2 before)
#   go_tests_race      the same under the race detector (Close vs calls in flight, shared Desc)
#   go_demo            examples/go: the demo shows out[1][0] = 15 and prints exactly what the C
#                      demo prints (required when the attn_demo target exists)
#   go_generated_current  regenerates the SWIG wrappers into a temporary folder and fails with a
#                      diff if they differ from the committed ones (skipped without swig)
# (consumer_go, in tests/consumer/go, builds the module as a user would: installed package,
# module copy, no swig.)

if(DEFINED ATTN_WITH_GO AND NOT ATTN_WITH_GO)
  return()
endif()

# cmake/features.cmake found the toolchain: ATTN_GO_EXECUTABLE (Go >= 1.19; ATTN_GO_VERSION,
# ATTN_GO_VERSION_MAJOR/MINOR) and ATTN_GO_PKG_CONFIG (cgo runs pkg-config for
# `#cgo pkg-config: attn`).
set(_attn_go_version ${ATTN_GO_VERSION})
set(_attn_go_minor ${ATTN_GO_VERSION_MINOR})
# swig is needed only to regenerate the committed wrappers (go_generate, go_generated_current).
find_program(ATTN_GO_SWIG NAMES swig swig4.0)
if(ATTN_GO_SWIG)
  message(STATUS "Go binding: ${ATTN_GO_EXECUTABLE} (${_attn_go_version}); wrappers regenerated with ${ATTN_GO_SWIG}")
else()
  message(STATUS "Go binding: ${ATTN_GO_EXECUTABLE} (${_attn_go_version}); no swig: go_generate "
                 "unavailable, go_generated_current skipped")
endif()

# Build cache: go's own (GOCACHE, else under HOME) as seen at configure time, so builds share a
# warm cache; without HOME or GOCACHE (go needs one of them) a cache inside the build tree.
execute_process(COMMAND ${ATTN_GO_EXECUTABLE} env GOCACHE
                OUTPUT_VARIABLE _attn_gocache OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT IS_ABSOLUTE "${_attn_gocache}")
  set(_attn_gocache "${CMAKE_BINARY_DIR}/gocache")
endif()
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/xlang ${CMAKE_BINARY_DIR}/go)

# cgo finds libattn with `pkg-config attn`. For the in-tree targets and tests, an attn.pc of this
# build tree (the source tree's capi/ header, this build's library, with an rpath to it) comes
# first on PKG_CONFIG_PATH, ahead of any installed libattn.
if(CMAKE_CONFIGURATION_TYPES)
  set(_attn_go_pcdir "${CMAKE_BINARY_DIR}/go/pkgconfig/$<CONFIG>")
else()
  set(_attn_go_pcdir "${CMAKE_BINARY_DIR}/go/pkgconfig")
endif()
file(GENERATE OUTPUT "${_attn_go_pcdir}/attn.pc" CONTENT
"# libattn's build tree ${CMAKE_BINARY_DIR}, for the in-tree Go build and tests only (cmake/go.cmake).
# The installed package has its own attn.pc (cmake/attn.pc.in).
libdir=$<TARGET_FILE_DIR:attn>
includedir=${PROJECT_SOURCE_DIR}/capi

Name: attn
Description: libattn build tree (in-tree Go tests)
Version: ${PROJECT_VERSION}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lattn
Cflags: -I\${includedir}
")

# go's build cache keys a cgo package on its own files and the CGO_* flags, not on what
# pkg-config answers nor on the headers it includes (golang/go#24544, #24355): build trees that
# share a GOCACHE would reuse each other's objects, linked with the other tree's -L and rpath.
# A key made of this build tree and capi/attn.h, put into CGO_CFLAGS (part of go's cache key),
# keeps them apart and rebuilds after an edit of attn.h (which re-runs this configure step).
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/capi/attn.h)
file(SHA256 ${PROJECT_SOURCE_DIR}/capi/attn.h _attn_go_header_hash)
string(SHA256 _attn_go_build_key "${CMAKE_BINARY_DIR} ${_attn_go_header_hash}")
string(SUBSTRING ${_attn_go_build_key} 0 16 _attn_go_build_key)

set(_attn_go_libdir "$<TARGET_FILE_DIR:attn>")
set(_attn_go_env
  "GOCACHE=${_attn_gocache}"
  "GOPATH=${CMAKE_BINARY_DIR}/gopath"
  # No external modules: never reach for the network, never switch toolchains.
  "GOPROXY=off"
  "GOTOOLCHAIN=local"
  "GOFLAGS=-buildvcs=false"
  "CGO_ENABLED=1"
  "PKG_CONFIG=${ATTN_GO_PKG_CONFIG}"
  "PKG_CONFIG_PATH=${_attn_go_pcdir}"
  "CGO_CFLAGS=-O2 -g -DATTN_GO_BUILD_KEY=${_attn_go_build_key}"
  "LD_LIBRARY_PATH=${_attn_go_libdir}"
  "ATTN_VECTORS_DIR=${PROJECT_SOURCE_DIR}/tests/vectors")
if(CMAKE_C_COMPILER)
  list(APPEND _attn_go_env "CC=${CMAKE_C_COMPILER}")
endif()
# Only go_tests writes $ATTN_XLANG_DIR/go.bin, go.variants.bin, go.storage.bin and go.backward.bin
# (xlang_identical depends on it alone); the checker variants run the same tests without writing.
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
  COMMENT "Go binding: go build (committed SWIG wrappers, libattn through the build-tree attn.pc)"
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

# Regenerate the committed wrappers in place (a maintainer step after editing attn.h, attn.i or
# attn_go.i); the result is to be committed.
if(ATTN_GO_SWIG)
  add_custom_target(go_generate
    COMMAND ${CMAKE_COMMAND} -E env ${_attn_go_env} "SWIG=${ATTN_GO_SWIG}" ${ATTN_GO_EXECUTABLE} generate ./...
    WORKING_DIRECTORY ${_attn_go_pkg}
    COMMENT "Go binding: regenerating bindings/go/internal/capi/capi.go and capi_wrap.c with SWIG"
    USES_TERMINAL VERBATIM)
endif()

if(ATTN_BUILD_TESTS) # the Go tests and demo; -DATTN_BUILD_TESTS=OFF builds the binding only
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
# The committed wrappers are what swig makes of today's attn_go.i, attn.i and attn.h (the symbol
# suffix SWIG derives from them changes with any edit, a comment included). 77: no swig -> skipped.
add_test(NAME go_generated_current
  COMMAND sh ${_attn_go_pkg}/internal/capi/generate.sh --check)
if(ATTN_GO_SWIG)
  set_tests_properties(go_generated_current PROPERTIES ENVIRONMENT "SWIG=${ATTN_GO_SWIG}")
else()
  set_tests_properties(go_generated_current PROPERTIES ENVIRONMENT "SWIG=swig-not-found")
endif()
set_tests_properties(go_generated_current PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

set_tests_properties(go_tests PROPERTIES ENVIRONMENT "${_attn_go_env_xlang}" TIMEOUT 900)
set_tests_properties(go_tests_cgocheck PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang};GODEBUG=cgocheck=1" TIMEOUT 900)
set_tests_properties(go_tests_cgocheck2 PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang};${_attn_cgocheck2}" TIMEOUT 900)
set_tests_properties(go_tests_race PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang}" TIMEOUT 900)
set_tests_properties(go_demo PROPERTIES ENVIRONMENT "${_attn_go_env_noxlang};${_attn_c_demo}" TIMEOUT 900)
endif()
