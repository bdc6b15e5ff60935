# consumer_deb (cmake -P): do libattn's packages (cmake/packaging.cmake) work for an outside program?
#   1. cpack -G "DEB;TGZ" from BUILD_DIR into <tmp>/packages (the install_manifest_*.txt files
#      cpack writes into BUILD_DIR are put back as they were);
#   2. checks the .deb files: control fields (names, version, Depends from dpkg-shlibdeps,
#      shlibs, ldconfig trigger) and contents (`dpkg-deb -c`: library, SONAME links, header,
#      attn.pc, CMake package, man page, HTML index, LICENSE; nothing else), and that the .deb's
#      attn.pc is the plain /usr one (no rpath);
#   3. extracts the .tar.gz into <tmp>/tgz, builds Makefile + app.c with PKG_CONFIG_PATH pointing
#      into it, runs the program with an EMPTY environment (the tarball's attn.pc adds an rpath)
#      and checks that it loaded the tarball's library;
#   4. as root: dpkg -i both .deb files, builds the same program with plain `pkg-config` (no
#      PKG_CONFIG_PATH), runs it with an empty environment, checks that it loaded
#      /usr/<libdir>/libattn.so.<version> with no rpath, `man -w 3 attn`, builds ../project
#      (find_package(attn) with no hint) and runs it, then dpkg --purge both packages (also when a
#      step fails) and checks they are gone.
#      Not root: steps 1-3 run, then the test FAILS saying that dpkg -i needs root (CI runs as
#      root). An extracted .deb proves nothing about ldconfig, the maintainer scripts or running
#      without LD_LIBRARY_PATH, so it is not offered as a substitute.
# Before installing, the test refuses to run if libattn0 / libattn-dev are already installed or if
# pkg-config already finds an attn.pc somewhere (it would shadow the package under test).
# Inputs (-D): see tests/consumer/deb/CMakeLists.txt. ATTN_KEEP_CONSUMER_TMP=1 keeps <tmp>.
cmake_minimum_required(VERSION 3.25)

foreach(_v BUILD_DIR SOURCE_DIR CONSUMER_DIR CPACK VERSION SOVERSION LIBDIR INCLUDEDIR DOCDIR
           MANDIR C_COMPILER GENERATOR)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_deb_test.cmake: -D${_v}=... is required")
  endif()
endforeach()
foreach(_tool DPKG DPKG_DEB PKG_CONFIG MAKE)
  if("${${_tool}}" STREQUAL "" OR "${${_tool}}" MATCHES "-NOTFOUND$")
    message(FATAL_ERROR "consumer_deb: ${_tool} was not found at configure time (Debian: dpkg, "
                        "pkg-config and make; scripts/setup-deps.sh installs them)")
  endif()
endforeach()

# The package names and the tarball's name, as cmake/packaging.cmake set them.
include("${BUILD_DIR}/CPackConfig.cmake")
set(RUNTIME_PKG "${CPACK_DEBIAN_RUNTIME_PACKAGE_NAME}")
set(DEV_PKG "${CPACK_DEBIAN_DEV_PACKAGE_NAME}")
set(TGZ_NAME "${CPACK_PACKAGE_FILE_NAME}")
if(NOT RUNTIME_PKG STREQUAL "libattn${SOVERSION}" OR NOT DEV_PKG STREQUAL "libattn-dev")
  message(FATAL_ERROR "consumer_deb: packages are named '${RUNTIME_PKG}' and '${DEV_PKG}', "
                      "expected libattn${SOVERSION} and libattn-dev")
endif()
if(NOT "${MULTIARCH}" STREQUAL "" AND NOT LIBDIR STREQUAL "lib/${MULTIARCH}")
  message(FATAL_ERROR "consumer_deb: CMAKE_INSTALL_LIBDIR is '${LIBDIR}', but Debian's multiarch "
                      "libdir lib/${MULTIARCH} was expected (ATTN_INSTALL_MULTIARCH is ON)")
endif()

# A fresh temporary folder outside the build tree.
if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(_tmp_root "$ENV{TMPDIR}")
else()
  set(_tmp_root "/tmp")
endif()
string(RANDOM LENGTH 10 _rand)
set(TMP "${_tmp_root}/attn-consumer-deb-${_rand}")
file(REMOVE_RECURSE "${TMP}")
file(MAKE_DIRECTORY "${TMP}")
message(STATUS "temporary folder: ${TMP}")

set(INSTALLED FALSE)   # TRUE while our packages are installed: cleanup() removes them
set(_clean_env --unset=LD_LIBRARY_PATH --unset=LD_PRELOAD --unset=PKG_CONFIG_PATH
    --unset=PKG_CONFIG_LIBDIR --unset=PKG_CONFIG_SYSROOT_DIR --unset=LIBRARY_PATH --unset=CPATH
    --unset=C_INCLUDE_PATH --unset=CMAKE_PREFIX_PATH --unset=DESTDIR)

function(purge_packages)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env DEBIAN_FRONTEND=noninteractive
                          "${DPKG}" --purge "${DEV_PKG}" "${RUNTIME_PKG}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(WARNING "consumer_deb: dpkg --purge ${DEV_PKG} ${RUNTIME_PKG} failed (${_rc}):\n"
                    "${_out}${_err}\nRemove them by hand.")
  else()
    message(STATUS "removed: ${_out}")
  endif()
endfunction()

function(cleanup)
  if(INSTALLED)
    purge_packages()
  endif()
  if("$ENV{ATTN_KEEP_CONSUMER_TMP}" STREQUAL "")
    file(REMOVE_RECURSE "${TMP}")
  else()
    message(STATUS "kept ${TMP}")
  endif()
endfunction()

function(fail)
  cleanup()
  string(JOIN "" _msg ${ARGN})
  message(FATAL_ERROR "consumer_deb: ${_msg}")
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
# 1. cpack. It rewrites BUILD_DIR/install_manifest_<component>.txt: put them back afterwards.
set(_manifests install_manifest_runtime.txt install_manifest_dev.txt)
foreach(_m IN LISTS _manifests)
  if(EXISTS "${BUILD_DIR}/${_m}")
    file(COPY_FILE "${BUILD_DIR}/${_m}" "${TMP}/${_m}.saved")
  endif()
endforeach()
set(_cpack_args -G "DEB\\;TGZ" --config "${BUILD_DIR}/CPackConfig.cmake" -B "${TMP}/packages")
if(NOT "${CONFIG}" STREQUAL "")
  list(APPEND _cpack_args -C "${CONFIG}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=DESTDIR "${CPACK}" ${_cpack_args}
                WORKING_DIRECTORY "${TMP}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _cpack_out ERROR_VARIABLE _cpack_err)
foreach(_m IN LISTS _manifests)
  if(EXISTS "${TMP}/${_m}.saved")
    file(COPY_FILE "${TMP}/${_m}.saved" "${BUILD_DIR}/${_m}")
  else()
    file(REMOVE "${BUILD_DIR}/${_m}")
  endif()
endforeach()
if(NOT _rc EQUAL 0)
  fail("cpack failed (${_rc}):\n${_cpack_out}\n${_cpack_err}")
endif()
message(STATUS "cpack:\n${_cpack_out}")

set(_arch_out "")
run(_arch_out "dpkg --print-architecture" "${DPKG}" --print-architecture)
string(STRIP "${_arch_out}" DEB_ARCH)
set(RUNTIME_DEB "${TMP}/packages/${RUNTIME_PKG}_${VERSION}_${DEB_ARCH}.deb")
set(DEV_DEB "${TMP}/packages/${DEV_PKG}_${VERSION}_${DEB_ARCH}.deb")
set(TGZ "${TMP}/packages/${TGZ_NAME}.tar.gz")
foreach(_f "${RUNTIME_DEB}" "${DEV_DEB}" "${TGZ}")
  if(NOT EXISTS "${_f}")
    file(GLOB _made "${TMP}/packages/*.*")
    fail("cpack did not write ${_f}; it wrote: ${_made}")
  endif()
endforeach()

# ------------------------------------------------------------------------------------------------
# 2. The .deb files: control fields and contents.
function(deb_field DEB FIELD OUT_VAR)
  run(_v "dpkg-deb -f ${DEB} ${FIELD}" "${DPKG_DEB}" -f "${DEB}" "${FIELD}")
  string(STRIP "${_v}" _v)
  set(${OUT_VAR} "${_v}" PARENT_SCOPE)
endfunction()

foreach(_pkg IN ITEMS RUNTIME DEV)
  set(_deb "${${_pkg}_DEB}")
  deb_field("${_deb}" Package _name)
  deb_field("${_deb}" Version _ver)
  deb_field("${_deb}" Architecture _arch)
  deb_field("${_deb}" Maintainer _maint)
  deb_field("${_deb}" Description _desc)
  if(NOT _name STREQUAL "${${_pkg}_PKG}" OR NOT _ver STREQUAL VERSION OR NOT _arch STREQUAL DEB_ARCH
     OR _maint STREQUAL "" OR _desc STREQUAL "")
    fail("${_deb}: Package '${_name}', Version '${_ver}', Architecture '${_arch}', Maintainer "
         "'${_maint}', Description '${_desc}': expected ${${_pkg}_PKG} ${VERSION} ${DEB_ARCH} and "
         "a maintainer and a description")
  endif()
endforeach()
deb_field("${RUNTIME_DEB}" Depends _depends)
if(NOT _depends MATCHES "(^|, )libc6 \\(>= [0-9.]+\\)" OR NOT _depends MATCHES "libstdc\\+\\+6")
  fail("${RUNTIME_PKG} Depends '${_depends}': dpkg-shlibdeps should have computed libc6 and "
       "libstdc++6 (CPACK_DEBIAN_PACKAGE_SHLIBDEPS)")
endif()
deb_field("${DEV_DEB}" Depends _dev_depends)
if(NOT _dev_depends MATCHES "(^|, )${RUNTIME_PKG} \\(= ${VERSION}\\)")
  fail("${DEV_PKG} Depends '${_dev_depends}', expected ${RUNTIME_PKG} (= ${VERSION})")
endif()
run(_shlibs "the shlibs file of ${RUNTIME_PKG}" "${DPKG_DEB}" -I "${RUNTIME_DEB}" shlibs)
if(NOT _shlibs MATCHES "^libattn ${SOVERSION} ${RUNTIME_PKG} \\(>= ${VERSION}\\)")
  fail("${RUNTIME_PKG}'s shlibs file is '${_shlibs}'")
endif()
run(_triggers "the triggers file of ${RUNTIME_PKG}" "${DPKG_DEB}" -I "${RUNTIME_DEB}" triggers)
if(NOT _triggers MATCHES "activate-noawait ldconfig")
  fail("${RUNTIME_PKG}'s triggers file is '${_triggers}', expected activate-noawait ldconfig")
endif()
message(STATUS "${RUNTIME_PKG}: Depends: ${_depends}; shlibs: ${_shlibs}")
message(STATUS "${DEV_PKG}: Depends: ${_dev_depends}")

# Contents: `dpkg-deb -c` lines are "<mode> <owner> <size> <date> <time> ./path[ -> target]".
function(deb_contents DEB OUT_FILES OUT_LINKS)
  run(_list "dpkg-deb -c ${DEB}" "${DPKG_DEB}" -c "${DEB}")
  string(REPLACE "\n" ";" _lines "${_list}")
  set(_files)
  set(_links)
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^([-dl])[^ ]+ +[^ ]+ +[0-9]+ +[^ ]+ +[^ ]+ +\\./([^ ]*)( -> (.+))?$")
      if(CMAKE_MATCH_1 STREQUAL "l")
        list(APPEND _links "${CMAKE_MATCH_2} -> ${CMAKE_MATCH_4}")
      elseif(CMAKE_MATCH_1 STREQUAL "-")
        list(APPEND _files "${CMAKE_MATCH_2}")
      endif()
    elseif(NOT _line STREQUAL "")
      fail("cannot read this line of dpkg-deb -c ${DEB}: ${_line}")
    endif()
  endforeach()
  set(${OUT_FILES} "${_files}" PARENT_SCOPE)
  set(${OUT_LINKS} "${_links}" PARENT_SCOPE)
endfunction()

set(_ld "usr/${LIBDIR}")
deb_contents("${RUNTIME_DEB}" _rt_files _rt_links)
deb_contents("${DEV_DEB}" _dev_files _dev_links)
set(_want_rt_files "${_ld}/libattn.so.${VERSION}" "usr/${DOCDIR}/LICENSE")
set(_want_rt_links "${_ld}/libattn.so.${SOVERSION} -> libattn.so.${VERSION}")
set(_want_dev_files "usr/${INCLUDEDIR}/attn.h" "${_ld}/pkgconfig/attn.pc"
    "${_ld}/cmake/attn/attnConfig.cmake" "${_ld}/cmake/attn/attnConfigVersion.cmake"
    "${_ld}/cmake/attn/attnTargets.cmake" "usr/${DOCDIR}/CHANGELOG.md")
if(WITH_DOCS)
  list(APPEND _want_dev_files "usr/${MANDIR}/man3/attn.3" "usr/${DOCDIR}/html/index.html")
else()
  message(STATUS "ATTN_BUILD_DOCS is OFF: the man page and the HTML reference are not checked")
endif()
set(_want_dev_links "${_ld}/libattn.so -> libattn.so.${SOVERSION}")
foreach(_kind IN ITEMS rt_files rt_links dev_files dev_links)
  foreach(_want IN LISTS _want_${_kind})
    if(NOT _want IN_LIST _${_kind})
      string(REPLACE ";" "\n  " _have "${_${_kind}}")
      fail("the package lacks ${_want}; it has:\n  ${_have}")
    endif()
  endforeach()
endforeach()
# Only the C library's parts: anything else (a binding's files, a stray install rule without a
# COMPONENT) is an error.
string(REPLACE "." "\\." _ld_re "${_ld}")
set(_allowed "^(${_ld_re}/libattn\\.so\\.[0-9.]+|${_ld_re}/pkgconfig/attn\\.pc|${_ld_re}/cmake/attn/[^/]+\\.cmake|usr/${INCLUDEDIR}/attn\\.h|usr/${MANDIR}/man3/attn\\.3|usr/${DOCDIR}/.+)$")
foreach(_f IN LISTS _rt_files _dev_files)
  if(NOT _f MATCHES "${_allowed}")
    fail("the .deb files hold /${_f}, which is not part of the C library: give its install() rule "
         "its own COMPONENT (cmake/packaging.cmake packs only CPACK_COMPONENTS_ALL = runtime dev)")
  endif()
endforeach()
list(LENGTH _rt_files _n_rt)
list(LENGTH _dev_files _n_dev)
message(STATUS "${RUNTIME_PKG}: ${_n_rt} files, links ${_rt_links}; ${DEV_PKG}: ${_n_dev} files, "
               "links ${_dev_links}")

# The .deb's attn.pc: prefix /usr, no rpath (pkg-config then prints just -lattn).
run(_ "dpkg-deb -x ${DEV_DEB}" "${DPKG_DEB}" -x "${DEV_DEB}" "${TMP}/deb-x")
file(READ "${TMP}/deb-x/${_ld}/pkgconfig/attn.pc" _deb_pc)
if(NOT _deb_pc MATCHES "(^|\n)prefix=/usr\n" OR _deb_pc MATCHES "rpath")
  fail("the .deb's attn.pc should say prefix=/usr and carry no rpath:\n${_deb_pc}")
endif()

# ------------------------------------------------------------------------------------------------
# Builds SOURCE_DIR/Makefile + app.c in a fresh folder with the given environment additions
# (besides a cleaned environment), runs it with an EMPTY environment, checks its line and which
# libattn.so it loaded (its real path must be WANT_LIB's).
set(EXPECTED "app: attn ${VERSION} simple 10.0000 15.0000 20.0000 OK")
function(build_and_run_app WHAT DIR WANT_LIB)
  file(MAKE_DIRECTORY "${DIR}")
  file(COPY "${SOURCE_DIR}/Makefile" "${SOURCE_DIR}/app.c" DESTINATION "${DIR}")
  run(_flags "pkg-config --cflags --libs attn (${WHAT})"
      ${CMAKE_COMMAND} -E env ${_clean_env} ${ARGN} "${PKG_CONFIG}" --cflags --libs attn)
  string(STRIP "${_flags}" _flags)
  message(STATUS "${WHAT}: pkg-config --cflags --libs attn: ${_flags}")
  run(_make "make (${WHAT})" ${CMAKE_COMMAND} -E env ${_clean_env} ${ARGN}
      "${MAKE}" -C "${DIR}" "CC=${C_COMPILER}" "PKG_CONFIG=${PKG_CONFIG}")
  run(_out "running the ${WHAT} program with an empty environment" env -i "${DIR}/app")
  string(STRIP "${_out}" _out)
  if(NOT _out STREQUAL EXPECTED)
    fail("the ${WHAT} program printed\n${_out}\nexpected\n${EXPECTED}")
  endif()
  run(_ldd "ldd ${DIR}/app" env -i /usr/bin/ldd "${DIR}/app")
  if(NOT _ldd MATCHES "libattn\\.so\\.${SOVERSION} => ([^ \n]+)")
    fail("ldd ${DIR}/app does not show libattn.so.${SOVERSION}:\n${_ldd}")
  endif()
  file(REAL_PATH "${CMAKE_MATCH_1}" _loaded)
  file(REAL_PATH "${WANT_LIB}" _want)
  if(NOT _loaded STREQUAL _want)
    fail("the ${WHAT} program loads ${_loaded}, not ${_want}:\n${_ldd}")
  endif()
  message(STATUS "${WHAT} program OK (loads ${_loaded}): ${_out}")
  set(APP_FLAGS "${_flags}" PARENT_SCOPE)
endfunction()

# ------------------------------------------------------------------------------------------------
# 3. The tarball: extract, build through its attn.pc, run with no environment at all.
file(MAKE_DIRECTORY "${TMP}/tgz")
run(_ "extracting ${TGZ}" ${CMAKE_COMMAND} -E chdir "${TMP}/tgz" ${CMAKE_COMMAND} -E tar xzf "${TGZ}")
set(_top "${TMP}/tgz/${TGZ_NAME}")
foreach(_f "${_top}/${INCLUDEDIR}/attn.h" "${_top}/${LIBDIR}/libattn.so.${VERSION}"
           "${_top}/${LIBDIR}/pkgconfig/attn.pc" "${_top}/${LIBDIR}/cmake/attn/attnConfig.cmake"
           "${_top}/${DOCDIR}/LICENSE" "${_top}/${DOCDIR}/CHANGELOG.md")
  if(NOT EXISTS "${_f}")
    fail("the tarball lacks ${_f}")
  endif()
endforeach()
foreach(_l "libattn.so" "libattn.so.${SOVERSION}")
  if(NOT IS_SYMLINK "${_top}/${LIBDIR}/${_l}")
    fail("the tarball's ${LIBDIR}/${_l} is not a symbolic link")
  endif()
endforeach()
if(WITH_DOCS AND (NOT EXISTS "${_top}/${MANDIR}/man3/attn.3" OR NOT EXISTS "${_top}/${DOCDIR}/html/index.html"))
  fail("the tarball lacks ${MANDIR}/man3/attn.3 or ${DOCDIR}/html/index.html")
endif()
build_and_run_app("tarball" "${TMP}/tgz-app" "${_top}/${LIBDIR}/libattn.so.${VERSION}"
                  "PKG_CONFIG_PATH=${_top}/${LIBDIR}/pkgconfig")
if(NOT APP_FLAGS MATCHES "-Wl,-rpath,")
  fail("the tarball's attn.pc gives no -Wl,-rpath: ${APP_FLAGS}")
endif()

# ------------------------------------------------------------------------------------------------
# 4. Install the .deb files (root only).
run(_uid "id -u" id -u)
string(STRIP "${_uid}" _uid)
if(NOT _uid STREQUAL "0")
  fail("the packages were built and checked, and the tarball works, but installing the .deb "
       "files (dpkg -i) needs root and this test runs as uid ${_uid}. Run it as root (CI does), "
       "or leave it out: ctest -E consumer_deb")
endif()

# Nothing that would shadow the packages under test.
execute_process(COMMAND "${DPKG}" -s "${RUNTIME_PKG}" "${DEV_PKG}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_QUIET)
if(_out MATCHES "Status: install ok installed")
  fail("${RUNTIME_PKG} or ${DEV_PKG} is already installed on this machine; the test does not "
       "replace it. Remove it first (dpkg --purge ${DEV_PKG} ${RUNTIME_PKG}) if it is a leftover.")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${_clean_env} "${PKG_CONFIG}" --path attn
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_QUIET)
if(_rc EQUAL 0)
  string(STRIP "${_out}" _out)
  fail("pkg-config already finds an attn.pc (${_out}) before the packages are installed: it "
       "would shadow them. Remove that installation first.")
endif()

set(INSTALLED TRUE)
run(_dpkg_out "dpkg -i" ${CMAKE_COMMAND} -E env DEBIAN_FRONTEND=noninteractive
    "${DPKG}" -i "${RUNTIME_DEB}" "${DEV_DEB}")
message(STATUS "dpkg -i:\n${_dpkg_out}")
run(_status "dpkg -s" "${DPKG}" -s "${RUNTIME_PKG}" "${DEV_PKG}")
string(REGEX MATCHALL "Status: install ok installed" _ok "${_status}")
list(LENGTH _ok _n_ok)
if(NOT _n_ok EQUAL 2)
  fail("after dpkg -i, dpkg -s says:\n${_status}")
endif()
run(_ldconfig "ldconfig -p" /sbin/ldconfig -p)
if(NOT _ldconfig MATCHES "libattn\\.so\\.${SOVERSION} ")
  fail("after dpkg -i, ldconfig's cache has no libattn.so.${SOVERSION} (the ldconfig trigger did "
       "not run?)")
endif()

run(_pc_path "pkg-config --path attn" ${CMAKE_COMMAND} -E env ${_clean_env} "${PKG_CONFIG}" --path attn)
string(STRIP "${_pc_path}" _pc_path)
if(NOT _pc_path STREQUAL "/${_ld}/pkgconfig/attn.pc")
  fail("pkg-config uses ${_pc_path}, not the package's /${_ld}/pkgconfig/attn.pc")
endif()
build_and_run_app("installed .deb" "${TMP}/deb-app" "/${_ld}/libattn.so.${VERSION}")
if(APP_FLAGS MATCHES "rpath")
  fail("the installed attn.pc gives an rpath: ${APP_FLAGS}")
endif()
run(_dyn "readelf -d" readelf -d "${TMP}/deb-app/app")
if(_dyn MATCHES "\\((RPATH|RUNPATH)\\)")
  fail("the program built against the .deb has an rpath (it must run from the system paths):\n${_dyn}")
endif()

if(WITH_DOCS)
  if(MAN AND NOT MAN MATCHES "-NOTFOUND$")
    run(_man_path "man -w 3 attn" ${CMAKE_COMMAND} -E env --unset=MANPATH "${MAN}" -w 3 attn)
    string(STRIP "${_man_path}" _man_path)
    if(NOT _man_path MATCHES "^/usr/${MANDIR}/man3/attn\\.3(\\.gz)?$")
      fail("man -w 3 attn says '${_man_path}', expected /usr/${MANDIR}/man3/attn.3")
    endif()
    run(_man_text "man -l ${_man_path}" ${CMAKE_COMMAND} -E env MANWIDTH=100 MANPAGER=cat
        "${MAN}" -l "${_man_path}")
    if(NOT _man_text MATCHES "attn_simple" OR NOT _man_text MATCHES "NAME")
      fail("man -l ${_man_path} does not render the API:\n${_man_text}")
    endif()
    message(STATUS "man -w 3 attn: ${_man_path}")
  elseif(NOT EXISTS "/usr/${MANDIR}/man3/attn.3")
    fail("/usr/${MANDIR}/man3/attn.3 is not installed")
  endif()
  if(NOT EXISTS "/usr/${DOCDIR}/html/index.html")
    fail("/usr/${DOCDIR}/html/index.html is not installed")
  endif()
endif()

# find_package(attn) with no hint finds the package in /usr, and the program runs.
set(_cm_args -S "${CONSUMER_DIR}/project" -B "${TMP}/cmake-build" -G "${GENERATOR}"
    "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DATTN_EXPECTED_PREFIX=/usr"
    "-DATTN_EXPECTED_VERSION=${VERSION}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(NOT "${MAKE_PROGRAM}" STREQUAL "")
  list(APPEND _cm_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
run(_ "configuring ../project against the installed package"
    ${CMAKE_COMMAND} -E env ${_clean_env} ${CMAKE_COMMAND} ${_cm_args})
run(_ "building ../project" ${CMAKE_COMMAND} --build "${TMP}/cmake-build")
run(_cm_run "running ../project's program with an empty environment"
    env -i "${TMP}/cmake-build/bin/attn_consumer")
if(NOT _cm_run MATCHES "consumer: simple 10\\.0000 15\\.0000 20\\.0000 desc 3\\.0000 5\\.0000 lse 1\\.3863 0\\.0000 OK")
  fail("find_package(attn) program printed:\n${_cm_run}")
endif()
message(STATUS "find_package(attn) program OK: ${_cm_run}")

# Remove the packages and check that nothing is left.
set(INSTALLED FALSE)
purge_packages()
execute_process(COMMAND "${DPKG}" -s "${RUNTIME_PKG}" "${DEV_PKG}" OUTPUT_VARIABLE _out ERROR_QUIET)
run(_ldconfig "ldconfig -p" /sbin/ldconfig -p)
if(_out MATCHES "Status: install" OR EXISTS "/${_ld}/libattn.so.${VERSION}"
   OR EXISTS "/usr/${INCLUDEDIR}/attn.h" OR _ldconfig MATCHES "libattn\\.so")
  fail("after dpkg --purge, libattn is still on this machine:\n${_out}")
endif()

cleanup()
message(STATUS "consumer_deb: ${RUNTIME_PKG} + ${DEV_PKG} and ${TGZ_NAME}.tar.gz OK")
