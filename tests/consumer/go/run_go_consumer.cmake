# consumer_go (cmake -P): can a Go user build against the Go module with nothing but the installed
# C package?
#   1. cmake --install BUILD_DIR --prefix <tmp>/prefix (install_manifest.txt put back as it was);
#   2. copies bindings/go ALONE to <tmp>/module, as the module proxy or `go mod vendor` would, and
#      checks it holds no .swig file and no path out of the module in its cgo directives;
#   3. a tools folder <tmp>/bin with only go, the C compiler (as gcc and cc), as, ld and pkg-config:
#      it is the whole PATH, so swig cannot be found (checked);
#   4. every go command runs under `env -i`: HOME, PATH, GOCACHE, GOPATH, GOTOOLCHAIN=local,
#      GOPROXY (off, or the file:// proxy of step 7), TMPDIR and
#      PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig: no CGO_* variable at all;
#   5. consumer/ with `replace <module> => <tmp>/module`: go build, run;
#   6. go mod vendor (the wrappers land in vendor/), then, with <tmp>/module moved away,
#      go build -mod=vendor, run;
#   7. `go get github.com/libattn/libattn/bindings/go@v<VERSION>` from a file:// module proxy that
#      serves a zip of <tmp>/module (plus the repository's LICENSE, as the proxy adds for a module
#      in a subdirectory): go build, run.
# Each program must print "out[1][0] = 15 OK" (it checks out[1][0] == 15 exactly itself). It runs
# without LD_LIBRARY_PATH when attn.pc's Libs carry an rpath; until they do, with
# LD_LIBRARY_PATH=<prefix>/<libdir> for running only (reported in the output).
# Inputs (-D): BUILD_DIR SOURCE_DIR CONSUMER_DIR CONFIG LIBDIR VERSION GO PKG_CONFIG C_COMPILER GOCACHE
# Set ATTN_KEEP_CONSUMER_TMP=1 in the environment to keep <tmp> for inspection.
cmake_minimum_required(VERSION 3.25)

foreach(_v BUILD_DIR SOURCE_DIR CONSUMER_DIR LIBDIR VERSION GO C_COMPILER)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_go_consumer.cmake: -D${_v}=... is required")
  endif()
endforeach()
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "consumer_go: pkg-config not found (apt-get install pkg-config): cgo needs it "
                      "for `#cgo pkg-config: attn`")
endif()
if(IS_ABSOLUTE "${LIBDIR}")
  message(FATAL_ERROR "CMAKE_INSTALL_LIBDIR (${LIBDIR}) is absolute: cannot install into a temporary prefix")
endif()
set(MODULE_PATH "github.com/libattn/libattn/bindings/go")
set(MODULE_VERSION "v${VERSION}")

# A fresh temporary folder outside the build and source trees.
if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(_tmp_root "$ENV{TMPDIR}")
else()
  set(_tmp_root "/tmp")
endif()
string(RANDOM LENGTH 10 _rand)
set(TMP "${_tmp_root}/attn-consumer-go-${_rand}")
set(PREFIX "${TMP}/prefix")
file(REMOVE_RECURSE "${TMP}")
file(MAKE_DIRECTORY "${TMP}" "${TMP}/home" "${TMP}/tmp" "${TMP}/bin")
message(STATUS "temporary folder: ${TMP}")

set(_env_tool)
find_program(_env_tool NAMES env PATHS /usr/bin /bin NO_CACHE)
if(NOT _env_tool)
  message(FATAL_ERROR "consumer_go: `env` not found")
endif()

function(cleanup)
  if("$ENV{ATTN_KEEP_CONSUMER_TMP}" STREQUAL "")
    # The module cache is read-only: let go remove it first.
    if(IS_DIRECTORY "${TMP}/gopath/pkg/mod")
      execute_process(COMMAND ${_env_tool} -i "HOME=${TMP}/home" "GOPATH=${TMP}/gopath"
                              "GOCACHE=${TMP}/gocache-unused" "GOTOOLCHAIN=local" "${GO}" clean -modcache
                      OUTPUT_QUIET ERROR_QUIET)
    endif()
    file(REMOVE_RECURSE "${TMP}")
  else()
    message(STATUS "kept ${TMP}")
  endif()
endfunction()

function(fail)
  cleanup()
  string(JOIN "" _msg ${ARGN})
  message(FATAL_ERROR "consumer_go: ${_msg}")
endfunction()

# Runs a command; fails the test with its output unless it exits 0. OUT_VAR receives stdout+stderr.
function(run OUT_VAR WHAT)
  cmake_parse_arguments(PARSE_ARGV 2 _r "" "WORKING_DIRECTORY" "")
  if(NOT _r_WORKING_DIRECTORY)
    set(_r_WORKING_DIRECTORY "${TMP}")
  endif()
  execute_process(COMMAND ${_r_UNPARSED_ARGUMENTS} WORKING_DIRECTORY "${_r_WORKING_DIRECTORY}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${_r_UNPARSED_ARGUMENTS}")
    fail("${WHAT} failed (${_rc}):\n  (in ${_r_WORKING_DIRECTORY}) ${_cmd}\n${_out}")
  endif()
  set(${OUT_VAR} "${_out}" PARENT_SCOPE)
endfunction()

# ------------------------------------------------------------------------------------------------
# 1. Install the C package. cmake --install (re)writes BUILD_DIR/install_manifest.txt: restore it.
set(_manifest "${BUILD_DIR}/install_manifest.txt")
set(_had_manifest FALSE)
if(EXISTS "${_manifest}")
  set(_had_manifest TRUE)
  file(COPY_FILE "${_manifest}" "${TMP}/install_manifest.txt.saved")
endif()
set(_config_args)
if(NOT "${CONFIG}" STREQUAL "")
  set(_config_args --config "${CONFIG}")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env --unset=DESTDIR
          ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}" ${_config_args}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _install_out ERROR_VARIABLE _install_err)
if(_had_manifest)
  file(COPY_FILE "${TMP}/install_manifest.txt.saved" "${_manifest}")
else()
  file(REMOVE "${_manifest}")
endif()
if(NOT _rc EQUAL 0)
  fail("cmake --install failed (${_rc}):\n${_install_out}\n${_install_err}")
endif()
set(_libdir "${PREFIX}/${LIBDIR}")
set(_pcdir "${_libdir}/pkgconfig")
if(NOT EXISTS "${_pcdir}/attn.pc")
  fail("the install did not produce ${_pcdir}/attn.pc:\n${_install_out}")
endif()
execute_process(COMMAND ${_env_tool} "PKG_CONFIG_PATH=${_pcdir}" "${PKG_CONFIG}" --libs attn
                OUTPUT_VARIABLE _pc_libs OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  fail("pkg-config --libs attn failed with PKG_CONFIG_PATH=${_pcdir}")
endif()
message(STATUS "installed into ${PREFIX}; pkg-config --libs attn: ${_pc_libs}")

# ------------------------------------------------------------------------------------------------
# 2. The module alone, as the proxy serves it (nothing from the rest of the repository).
set(MODULE "${TMP}/module")
file(COPY "${SOURCE_DIR}/bindings/go/" DESTINATION "${MODULE}")
file(REMOVE_RECURSE "${MODULE}/vendor")
file(GLOB_RECURSE _swig_files RELATIVE "${MODULE}" "${MODULE}/*.swig" "${MODULE}/*.swigcxx")
if(_swig_files)
  fail("the module holds ${_swig_files}: go build would run swig on it")
endif()
file(GLOB_RECURSE _go_c_files "${MODULE}/*.go" "${MODULE}/*.c" "${MODULE}/*.h")
foreach(_f IN LISTS _go_c_files)
  file(STRINGS "${_f}" _bad REGEX "#cgo .*\\$\\{SRCDIR\\}/\\.\\.|#include \"\\.\\./")
  if(_bad)
    fail("${_f} reaches out of the module: ${_bad}")
  endif()
endforeach()
foreach(_f go.mod internal/capi/capi.go internal/capi/capi_wrap.c)
  if(NOT EXISTS "${MODULE}/${_f}")
    fail("the module has no ${_f}")
  endif()
endforeach()

# ------------------------------------------------------------------------------------------------
# 3. PATH = a folder with only the tools a Go user with a C compiler has; no swig.
function(tool NAME REAL)
  if(NOT REAL OR NOT EXISTS "${REAL}")
    fail("tool ${NAME} not found (${REAL})")
  endif()
  file(WRITE "${TMP}/bin/${NAME}" "#!/bin/sh\nexec '${REAL}' \"$@\"\n")
  file(CHMOD "${TMP}/bin/${NAME}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
       GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endfunction()
find_program(_as NAMES as NO_CACHE)
find_program(_ld NAMES ld NO_CACHE)
tool(go "${GO}")
tool(gcc "${C_COMPILER}")
tool(cc "${C_COMPILER}")
tool(as "${_as}")
tool(ld "${_ld}")
tool(pkg-config "${PKG_CONFIG}")
set(_path "${TMP}/bin")
find_program(_swig_on_path NAMES swig swig4.0 swig3.0 PATHS "${_path}" NO_DEFAULT_PATH NO_CACHE)
if(_swig_on_path)
  fail("swig is on the test's PATH (${_swig_on_path})")
endif()
execute_process(COMMAND ${_env_tool} -i "PATH=${_path}" /bin/sh -c "command -v swig"
                RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
if(_rc EQUAL 0)
  fail("`command -v swig` finds swig with PATH=${_path}")
endif()
message(STATUS "PATH=${_path} (go, gcc, cc, as, ld, pkg-config; no swig)")

# ------------------------------------------------------------------------------------------------
# 4. The environment of every go command: env -i, so no CGO_* (nor LD_LIBRARY_PATH) gets through.
if(GOCACHE)
  set(_gocache "${GOCACHE}")
else()
  set(_gocache "${TMP}/gocache")
endif()
set(_goenv ${_env_tool} -i "HOME=${TMP}/home" "PATH=${_path}" "TMPDIR=${TMP}/tmp"
    "GOCACHE=${_gocache}" "GOPATH=${TMP}/gopath" "GOTOOLCHAIN=local"
    "PKG_CONFIG_PATH=${_pcdir}")
set(_go_offline ${_goenv} "GOPROXY=off" "${GO}")

# Runs a built consumer and checks its line. No LD_LIBRARY_PATH if attn.pc gives an rpath.
string(FIND "${_pc_libs}" "-rpath" _has_rpath)
if(_has_rpath EQUAL -1)
  set(_run_env ${_env_tool} -i "LD_LIBRARY_PATH=${_libdir}")
  message(STATUS "NOTE: attn.pc's Libs carry no -Wl,-rpath yet: the programs run with "
                 "LD_LIBRARY_PATH=${_libdir} (building needs no variable)")
else()
  set(_run_env ${_env_tool} -i)
endif()
function(check_program EXE WHAT)
  if(NOT _has_rpath EQUAL -1)
    # Linked with the installed package's flags: its rpath names the prefix, not the build tree.
    file(STRINGS "${EXE}" _rp REGEX "${TMP}/prefix/[^:]*lib")
    if(NOT _rp)
      fail("the ${WHAT} consumer has no rpath into ${PREFIX} (linked with other flags?)")
    endif()
  endif()
  run(_out "running the ${WHAT} consumer" ${_run_env} "${EXE}")
  string(REGEX MATCH "consumer_go: libattn [^\n]* out\\[1\\]\\[0\\] = 15 OK" _line "${_out}")
  if(NOT _line)
    fail("the ${WHAT} consumer printed\n${_out}\nexpected a line ending in 'out[1][0] = 15 OK'")
  endif()
  message(STATUS "${WHAT}: ${_line}")
endfunction()

run(_ver "go version" ${_go_offline} version)
string(STRIP "${_ver}" _ver)
message(STATUS "${_ver}")

# ------------------------------------------------------------------------------------------------
# 5. require + replace => the module copy.
set(CONSUMER "${TMP}/consumer")
file(MAKE_DIRECTORY "${CONSUMER}")
file(COPY "${CONSUMER_DIR}/main.go" DESTINATION "${CONSUMER}")
set(ATTN_GO_MODULE_COPY "${MODULE}")
configure_file("${CONSUMER_DIR}/go.mod.in" "${CONSUMER}/go.mod" @ONLY)
run(_ "go build (replace => module copy)" ${_go_offline} build -o "${TMP}/consumer_go" .
    WORKING_DIRECTORY "${CONSUMER}")
check_program("${TMP}/consumer_go" "go build (replace)")

# ------------------------------------------------------------------------------------------------
# 6. go mod vendor, then build from vendor/ alone (the module copy moved away).
run(_ "go mod vendor" ${_go_offline} mod vendor WORKING_DIRECTORY "${CONSUMER}")
set(_vendored "${CONSUMER}/vendor/${MODULE_PATH}")
foreach(_f attn.go internal/capi/cgo.go internal/capi/capi.go internal/capi/capi_wrap.c)
  if(NOT EXISTS "${_vendored}/${_f}")
    fail("go mod vendor did not copy ${_f} into ${_vendored}")
  endif()
endforeach()
file(RENAME "${MODULE}" "${TMP}/module.moved-away")
run(_ "go build -mod=vendor" ${_go_offline} build -mod=vendor -o "${TMP}/consumer_go_vendor" .
    WORKING_DIRECTORY "${CONSUMER}")
file(RENAME "${TMP}/module.moved-away" "${MODULE}")
check_program("${TMP}/consumer_go_vendor" "go build -mod=vendor")

# ------------------------------------------------------------------------------------------------
# 7. go get from a file:// module proxy serving the module copy as <module>@<version>.
set(_proxy "${TMP}/proxy")
set(_vdir "${_proxy}/${MODULE_PATH}/@v")
set(_stage "${TMP}/zipstage")
set(_zroot "${MODULE_PATH}@${MODULE_VERSION}")
file(MAKE_DIRECTORY "${_vdir}" "${_stage}")
file(COPY "${MODULE}/" DESTINATION "${_stage}/${_zroot}")
if(NOT EXISTS "${_stage}/${_zroot}/LICENSE" AND EXISTS "${SOURCE_DIR}/LICENSE")
  file(COPY "${SOURCE_DIR}/LICENSE" DESTINATION "${_stage}/${_zroot}")
endif()
file(GLOB_RECURSE _zfiles RELATIVE "${_stage}" "${_stage}/*")
list(SORT _zfiles)
string(REPLACE ";" "\n" _zlist "${_zfiles}")
file(WRITE "${TMP}/zipfiles.txt" "${_zlist}\n")
run(_ "zipping the module" ${CMAKE_COMMAND} -E tar cf "${_vdir}/${MODULE_VERSION}.zip" --format=zip
    "--files-from=${TMP}/zipfiles.txt" WORKING_DIRECTORY "${_stage}")
file(COPY_FILE "${MODULE}/go.mod" "${_vdir}/${MODULE_VERSION}.mod")
file(WRITE "${_vdir}/${MODULE_VERSION}.info"
     "{\"Version\":\"${MODULE_VERSION}\",\"Time\":\"2026-01-01T00:00:00Z\"}\n")
file(WRITE "${_vdir}/list" "${MODULE_VERSION}\n")
set(CONSUMER2 "${TMP}/consumer-get")
file(MAKE_DIRECTORY "${CONSUMER2}")
file(COPY "${CONSUMER_DIR}/main.go" DESTINATION "${CONSUMER2}")
file(WRITE "${CONSUMER2}/go.mod" "module example.com/attn-consumer-get\n\ngo 1.19\n")
set(_go_proxy ${_goenv} "GOPROXY=file://${_proxy}" "GOSUMDB=off" "${GO}")
run(_get "go get ${MODULE_PATH}@${MODULE_VERSION}" ${_go_proxy} get "${MODULE_PATH}@${MODULE_VERSION}"
    WORKING_DIRECTORY "${CONSUMER2}")
message(STATUS "go get: ${_get}")
run(_ "go build (after go get)" ${_go_proxy} build -o "${TMP}/consumer_go_get" .
    WORKING_DIRECTORY "${CONSUMER2}")
check_program("${TMP}/consumer_go_get" "go get ${MODULE_PATH}@${MODULE_VERSION}")

cleanup()
message(STATUS "consumer_go: replace, vendor and go get consumers all OK")
