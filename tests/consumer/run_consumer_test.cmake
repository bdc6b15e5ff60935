# consumer_install (cmake -P): does libattn's INSTALLED package work for an outside program?
#   1. cmake --install BUILD_DIR --prefix <tmp>/prefix, <tmp> a fresh folder outside the build tree
#      (the install_manifest.txt that cmake --install writes into BUILD_DIR is put back as it was);
#   2. builds consumer.c with the compiler flags of `pkg-config --cflags --libs attn` and nothing
#      else (PKG_CONFIG_PATH = <prefix>/<libdir>/pkgconfig) and checks they point into the prefix,
#      including the -Wl,-rpath that attn.pc adds for a prefix other than /usr;
#   3. builds project/ (find_package(attn) + attn::attn, CMAKE_PREFIX_PATH = <prefix>) with the
#      same generator as the main build (Ninja, Makefiles, ...);
#   4. runs both programs without LD_LIBRARY_PATH (each finds the installed library through its
#      rpath: attn.pc's for the pkg-config build, CMake's for the other) and checks their line.
# Inputs (-D): BUILD_DIR SOURCE_DIR CONFIG LIBDIR INCLUDEDIR VERSION C_COMPILER GENERATOR MAKE_PROGRAM PKG_CONFIG
# Set ATTN_KEEP_CONSUMER_TMP=1 in the environment to keep <tmp> for inspection.
cmake_minimum_required(VERSION 3.25)

foreach(_v BUILD_DIR SOURCE_DIR LIBDIR INCLUDEDIR VERSION C_COMPILER GENERATOR PKG_CONFIG)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test.cmake: -D${_v}=... is required")
  endif()
endforeach()
if(IS_ABSOLUTE "${LIBDIR}" OR IS_ABSOLUTE "${INCLUDEDIR}")
  message(FATAL_ERROR "CMAKE_INSTALL_LIBDIR (${LIBDIR}) or CMAKE_INSTALL_INCLUDEDIR (${INCLUDEDIR}) "
                      "is absolute: cannot install into a temporary prefix")
endif()

# A fresh temporary folder outside the build tree.
if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(_tmp_root "$ENV{TMPDIR}")
else()
  set(_tmp_root "/tmp")
endif()
string(RANDOM LENGTH 10 _rand)
set(TMP "${_tmp_root}/attn-consumer-${_rand}")
set(PREFIX "${TMP}/prefix")
file(REMOVE_RECURSE "${TMP}")
file(MAKE_DIRECTORY "${TMP}")
message(STATUS "temporary prefix: ${PREFIX}")

function(cleanup)
  if("$ENV{ATTN_KEEP_CONSUMER_TMP}" STREQUAL "")
    file(REMOVE_RECURSE "${TMP}")
  else()
    message(STATUS "kept ${TMP}")
  endif()
endfunction()

function(fail)
  cleanup()
  string(JOIN "" _msg ${ARGN})
  message(FATAL_ERROR "consumer_install: ${_msg}")
endfunction()

# Runs a command; fails the test with its output unless it exits 0. OUT_VAR receives stdout.
function(run OUT_VAR WHAT)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    fail("${WHAT} failed (${_rc}):\n  ${_cmd}\n--- stdout\n${_out}\n--- stderr\n${_err}")
  endif()
  set(${OUT_VAR} "${_out}" PARENT_SCOPE)
endfunction()

# ------------------------------------------------------------------------------------------------
# 1. Install. cmake --install (re)writes BUILD_DIR/install_manifest.txt: restore it afterwards.
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
message(STATUS "installed:\n${_install_out}")

set(_libdir "${PREFIX}/${LIBDIR}")
foreach(_f "${PREFIX}/${INCLUDEDIR}/attn.h" "${_libdir}/pkgconfig/attn.pc"
           "${_libdir}/cmake/attn/attnConfig.cmake" "${_libdir}/cmake/attn/attnConfigVersion.cmake")
  if(NOT EXISTS "${_f}")
    fail("the install did not produce ${_f}")
  endif()
endforeach()

# The line both programs must print (values checked inside consumer.c as well).
set(EXPECTED "consumer: simple 10.0000 15.0000 20.0000 desc 3.0000 5.0000 lse 1.3863 0.0000 OK")

function(check_program EXE WHAT)
  # No LD_LIBRARY_PATH: the program must find the installed library by its rpath.
  run(_out "running the ${WHAT} consumer" ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${EXE}")
  string(FIND "${_out}" "${EXPECTED}" _pos)
  if(_pos EQUAL -1)
    fail("the ${WHAT} consumer printed\n${_out}\nexpected a line\n${EXPECTED}")
  endif()
  message(STATUS "${WHAT} consumer OK:\n${_out}")
endfunction()

# Every -I / -L / -Wl,-rpath, of pkg-config's answer must lie inside the prefix (not /usr/local
# or elsewhere), and there must be an rpath: the program has to run with no LD_LIBRARY_PATH.
function(check_paths_in_prefix FLAGS)
  if(NOT FLAGS MATCHES "(^|;)-Wl,-rpath,")
    fail("pkg-config --libs attn gives no -Wl,-rpath,<libdir> for the prefix ${PREFIX}: "
         "${FLAGS}. attn.pc adds one for every prefix except /usr.")
  endif()
  foreach(_flag IN LISTS FLAGS)
    if(_flag MATCHES "^(-[IL]|-Wl,-rpath,)(.+)$")
      set(_p "${CMAKE_MATCH_2}")
      cmake_path(IS_PREFIX PREFIX "${_p}" NORMALIZE _inside)
      if(NOT _inside)
        fail("pkg-config flag ${_flag} points outside the install prefix ${PREFIX}. attn.pc must "
             "follow the prefix given to cmake --install (e.g. prefix=\${pcfiledir}/../..), "
             "not the configure-time CMAKE_INSTALL_PREFIX.")
      endif()
    endif()
  endforeach()
endfunction()

# ------------------------------------------------------------------------------------------------
# 2. pkg-config.
set(_pc_env ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${_libdir}/pkgconfig")
run(_pc_version "pkg-config --modversion attn" ${_pc_env} "${PKG_CONFIG}" --modversion attn)
string(STRIP "${_pc_version}" _pc_version)
if(NOT _pc_version STREQUAL VERSION)
  fail("pkg-config --modversion attn says '${_pc_version}', expected '${VERSION}'")
endif()
run(_pc_flags "pkg-config --cflags --libs attn" ${_pc_env} "${PKG_CONFIG}" --cflags --libs attn)
run(_pc_libdir "pkg-config --variable=libdir attn" ${_pc_env} "${PKG_CONFIG}" --variable=libdir attn)
string(STRIP "${_pc_flags}" _pc_flags)
string(STRIP "${_pc_libdir}" _pc_libdir)
message(STATUS "pkg-config --cflags --libs attn: ${_pc_flags}")
separate_arguments(_pc_flags UNIX_COMMAND "${_pc_flags}")
check_paths_in_prefix("${_pc_flags}")
cmake_path(IS_PREFIX PREFIX "${_pc_libdir}" NORMALIZE _inside)
if(NOT _inside)
  fail("pkg-config libdir ${_pc_libdir} is outside the install prefix ${PREFIX}")
endif()
file(MAKE_DIRECTORY "${TMP}/pkgconfig-build")
set(_exe_pc "${TMP}/pkgconfig-build/attn_consumer")
run(_ "compiling consumer.c with pkg-config's flags"
    "${C_COMPILER}" -std=c99 -Wall -Wextra -pedantic -Werror "${SOURCE_DIR}/consumer.c"
    ${_pc_flags} -o "${_exe_pc}")
check_program("${_exe_pc}" "pkg-config")

# ------------------------------------------------------------------------------------------------
# 3. find_package(attn), same generator as the main build.
set(_cm_args -S "${SOURCE_DIR}/project" -B "${TMP}/cmake-build" -G "${GENERATOR}"
    "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_PREFIX_PATH=${PREFIX}"
    "-DATTN_EXPECTED_PREFIX=${PREFIX}" "-DATTN_EXPECTED_VERSION=${VERSION}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(NOT "${MAKE_PROGRAM}" STREQUAL "")
  list(APPEND _cm_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(NOT "${CONFIG}" STREQUAL "")
  list(APPEND _cm_args "-DCMAKE_BUILD_TYPE=${CONFIG}")
endif()
run(_cm_out "configuring the find_package(attn) project" ${CMAKE_COMMAND} ${_cm_args})
message(STATUS "find_package project configured:\n${_cm_out}")
run(_ "building the find_package(attn) project"
    ${CMAKE_COMMAND} --build "${TMP}/cmake-build" ${_config_args})
check_program("${TMP}/cmake-build/bin/attn_consumer" "find_package")

cleanup()
message(STATUS "consumer_install: pkg-config and find_package consumers both OK")
