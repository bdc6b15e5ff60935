# The optional parts of the build, each "on if its toolchain is found". Included from the
# top-level CMakeLists.txt before any part is added: tests/ reads the language switches too.
#
#   part     switch             needs (Debian packages)
#   tests    ATTN_BUILD_TESTS   doctest-dev pkg-config
#   java     ATTN_WITH_JAVA     default-jdk-headless swig; tests: junit5, prlimit (util-linux)
#   csharp   ATTN_WITH_CSHARP   swig mono-mcs mono-runtime; tests: nunit-console libnunit-cil-dev nuget
#   go       ATTN_WITH_GO       golang-go (Go >= 1.19) pkg-config
#   python   ATTN_WITH_PYTHON   python3; tests: python3-numpy python3-pytest python3-venv
#   mpi      ATTN_WITH_MPI      openmpi-bin libopenmpi-dev
#   docs     ATTN_BUILD_DOCS    doxygen
#   bench    ATTN_BUILD_BENCH   libopenblas-dev pkg-config
#   lab      ATTN_BUILD_LAB     the bench part (bench/lab/ is built inside bench/)
#
# Each switch is AUTO (the default: on if everything it needs is found, else off), ON (required:
# configure stops with the missing packages if anything is missing) or OFF. The exception is
# ATTN_BUILD_LAB, OFF by default: the lab tools (bench/lab/: A/B drivers and probes of one-off
# experiments) are not part of the product and build only when asked for. A part is looked for
# only when its switch is not OFF. Configure prints one line of what is on and off, and why:
#   -- libattn: on: c demo tests go python docs; off: java (no javac), csharp (no mcs), ...
# After the check every switch is a plain ON/OFF variable, so the rest of the build reads
# if(ATTN_WITH_JAVA) as before; AUTO is re-evaluated at each configure (install a toolchain,
# re-run cmake, and its part turns on).

set(_attn_parts tests java csharp go python mpi docs bench lab)
set(_attn_switch_tests ATTN_BUILD_TESTS)
set(_attn_switch_java ATTN_WITH_JAVA)
set(_attn_switch_csharp ATTN_WITH_CSHARP)
set(_attn_switch_go ATTN_WITH_GO)
set(_attn_switch_python ATTN_WITH_PYTHON)
set(_attn_switch_mpi ATTN_WITH_MPI)
set(_attn_switch_docs ATTN_BUILD_DOCS)
set(_attn_switch_bench ATTN_BUILD_BENCH)
set(_attn_switch_lab ATTN_BUILD_LAB)
set(_attn_doc_tests "C/C++ tests, and each binding's tests")
set(_attn_doc_java "Java binding (SWIG + JNI) and its tests")
set(_attn_doc_csharp "C# binding (SWIG + Mono) and its tests")
set(_attn_doc_go "Go binding (cgo) and its tests")
set(_attn_doc_python "Python ctypes binding tests")
set(_attn_doc_mpi "Ring attention / split-KV decode over MPI (examples/mpi) and its test")
set(_attn_doc_docs "Doxygen HTML reference and the attn(3) man page")
set(_attn_doc_bench "The benchmarks (bench/)")
set(_attn_doc_lab "The lab tools (bench/lab/: A/B drivers and probes, not product benches)")
set(_attn_default_lab OFF)

# attn_need(<part> <variable> <short reason> <Debian packages...>): if <variable> is false
# (FALSE, empty, <name>-NOTFOUND), records the reason and the packages that provide it.
macro(attn_need part found reason)
  if(NOT ${found})
    list(APPEND _attn_missing_${part} "${reason}")
    list(APPEND _attn_packages_${part} ${ARGN})
  endif()
endmacro()

# attn_found(<var> <condition...>): <var> = TRUE if the condition holds, else FALSE.
macro(attn_found var)
  if(${ARGN})
    set(${var} TRUE)
  else()
    set(${var} FALSE)
  endif()
endmacro()

# --- one check per part -----------------------------------------------------------------------
# Each sets _attn_missing_<part> (short reasons, "no javac") and _attn_packages_<part>. What a
# check finds stays for the part's own cmake file (JNI_INCLUDE_DIRS, ATTN_GO_EXECUTABLE, ...).

macro(attn_check_tests)
  find_package(doctest QUIET)
  find_program(ATTN_PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
  attn_need(tests doctest_FOUND "no doctest" doctest-dev)
  attn_need(tests ATTN_PKG_CONFIG_EXECUTABLE "no pkg-config" pkg-config)
endmacro()

macro(attn_check_java)
  # CMake 3.25's FindJNI does not search java-17 on Debian unless JAVA_HOME is set: derive it
  # from the real path of javac (/usr/lib/jvm/<jdk>/bin/javac -> /usr/lib/jvm/<jdk>).
  if(NOT DEFINED ENV{JAVA_HOME} OR "$ENV{JAVA_HOME}" STREQUAL "")
    find_program(ATTN_JAVAC_PROGRAM javac)
    if(ATTN_JAVAC_PROGRAM)
      file(REAL_PATH "${ATTN_JAVAC_PROGRAM}" _attn_javac_real)
      cmake_path(GET _attn_javac_real PARENT_PATH _attn_java_bin)
      cmake_path(GET _attn_java_bin PARENT_PATH _attn_java_home)
      set(ENV{JAVA_HOME} "${_attn_java_home}")
    endif()
  endif()
  find_package(Java 11 QUIET COMPONENTS Development Runtime)
  attn_need(java Java_FOUND "no javac" default-jdk-headless)
  if(Java_FOUND)
    # jni.h and jni_md.h only: the JNI library is not linked against libjvm (the JVM provides
    # it), and AWT (which a headless JDK lacks, and FindJNI asks for by default) is not used.
    find_package(JNI QUIET OPTIONAL_COMPONENTS JVM)
    attn_need(java JNI_FOUND "no JNI headers" default-jdk-headless)
  endif()
  find_package(SWIG 4.0 QUIET COMPONENTS java)
  attn_found(_attn_swig_ok SWIG_FOUND AND SWIG_java_FOUND)
  attn_need(java _attn_swig_ok "no swig" swig)
  if(ATTN_BUILD_TESTS)
    set(ATTN_JUNIT_CONSOLE_JAR "/usr/share/java/junit-platform-console-standalone.jar"
      CACHE FILEPATH "JUnit 5 console launcher (Debian package junit5)")
    set(ATTN_JUNIT_API_JAR "/usr/share/java/junit-jupiter-api.jar"
      CACHE FILEPATH "JUnit 5 Jupiter API jar (Debian package junit5)")
    set(ATTN_OPENTEST4J_JAR "/usr/share/java/opentest4j.jar"
      CACHE FILEPATH "opentest4j jar (dependency of JUnit 5)")
    set(ATTN_APIGUARDIAN_JAR "/usr/share/java/apiguardian-api.jar"
      CACHE FILEPATH "apiguardian jar (dependency of JUnit 5)")
    set(_attn_junit_ok TRUE)
    foreach(_attn_jar IN ITEMS ATTN_JUNIT_CONSOLE_JAR ATTN_JUNIT_API_JAR ATTN_OPENTEST4J_JAR)
      if(NOT EXISTS "${${_attn_jar}}")
        set(_attn_junit_ok FALSE)
      endif()
    endforeach()
    attn_need(java _attn_junit_ok "no junit5 (tests)" junit5)
    find_program(ATTN_PRLIMIT_PROGRAM prlimit)
    attn_need(java ATTN_PRLIMIT_PROGRAM "no prlimit (tests)" util-linux)
  endif()
endmacro()

macro(attn_check_csharp)
  find_package(SWIG 4.0 QUIET COMPONENTS csharp)
  find_program(ATTN_MCS_EXECUTABLE mcs)
  find_program(ATTN_MONO_EXECUTABLE mono)
  attn_need(csharp ATTN_MCS_EXECUTABLE "no mcs" mono-mcs)
  attn_need(csharp ATTN_MONO_EXECUTABLE "no mono" mono-runtime)
  attn_found(_attn_swig_ok SWIG_FOUND AND SWIG_csharp_FOUND)
  attn_need(csharp _attn_swig_ok "no swig" swig)
  if(ATTN_BUILD_TESTS)
    find_program(ATTN_NUNIT_CONSOLE nunit-console)
    file(GLOB _attn_nunit_hints LIST_DIRECTORIES true /usr/lib/cli/nunit.framework-2.6*
         /usr/lib/mono/nunit /usr/lib/nunit)
    find_file(ATTN_NUNIT_FRAMEWORK_DLL nunit.framework.dll HINTS ${_attn_nunit_hints})
    find_program(ATTN_NUGET_EXECUTABLE nuget)
    attn_need(csharp ATTN_NUNIT_CONSOLE "no nunit-console (tests)" nunit-console)
    attn_need(csharp ATTN_NUNIT_FRAMEWORK_DLL "no nunit.framework.dll (tests)" libnunit-cil-dev)
    attn_need(csharp ATTN_NUGET_EXECUTABLE "no nuget (tests)" nuget)
  endif()
endmacro()

macro(attn_check_go)
  find_program(ATTN_GO_EXECUTABLE NAMES go PATHS /usr/local/go/bin /usr/lib/go/bin)
  set(_attn_go_ok FALSE)
  if(ATTN_GO_EXECUTABLE)
    execute_process(COMMAND ${ATTN_GO_EXECUTABLE} env GOVERSION
                    OUTPUT_VARIABLE ATTN_GO_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _attn_go_rc ERROR_QUIET)
    if(_attn_go_rc EQUAL 0 AND ATTN_GO_VERSION MATCHES "^go([0-9]+)\\.([0-9]+)")
      set(ATTN_GO_VERSION_MAJOR ${CMAKE_MATCH_1})
      set(ATTN_GO_VERSION_MINOR ${CMAKE_MATCH_2})
      if(ATTN_GO_VERSION_MAJOR GREATER 1 OR ATTN_GO_VERSION_MINOR GREATER_EQUAL 19)
        set(_attn_go_ok TRUE)
      endif()
    endif()
  endif()
  if(ATTN_GO_EXECUTABLE AND NOT _attn_go_ok)
    attn_need(go _attn_go_ok "${ATTN_GO_EXECUTABLE} is not Go >= 1.19" golang-go)
  else()
    attn_need(go ATTN_GO_EXECUTABLE "no go" golang-go)
  endif()
  # cgo runs pkg-config for `#cgo pkg-config: attn`.
  find_program(ATTN_GO_PKG_CONFIG NAMES pkg-config pkgconf)
  attn_need(go ATTN_GO_PKG_CONFIG "no pkg-config" pkg-config)
endmacro()

macro(attn_check_python)
  find_package(Python3 QUIET COMPONENTS Interpreter)
  attn_need(python Python3_Interpreter_FOUND "no python3" python3)
  if(Python3_Interpreter_FOUND AND ATTN_BUILD_TESTS)
    # pytest and numpy run the tests; venv + ensurepip make consumer_python's fresh environment.
    foreach(_attn_pymod IN ITEMS numpy pytest venv ensurepip)
      execute_process(COMMAND ${Python3_EXECUTABLE} -c "import ${_attn_pymod}"
                      RESULT_VARIABLE _attn_pymod_rc OUTPUT_QUIET ERROR_QUIET)
      set(_attn_pymod_ok TRUE)
      if(NOT _attn_pymod_rc EQUAL 0)
        set(_attn_pymod_ok FALSE)
      endif()
      if(_attn_pymod MATCHES "venv|ensurepip")
        set(_attn_pymod_pkg python3-venv)
      else()
        set(_attn_pymod_pkg python3-${_attn_pymod})
      endif()
      attn_need(python _attn_pymod_ok "no ${_attn_pymod} (tests)" ${_attn_pymod_pkg})
    endforeach()
  endif()
endmacro()

macro(attn_check_mpi)
  find_package(MPI QUIET COMPONENTS C)
  attn_need(mpi MPI_C_FOUND "no MPI C library" openmpi-bin libopenmpi-dev)
endmacro()

macro(attn_check_docs)
  find_package(Doxygen QUIET)
  attn_need(docs DOXYGEN_FOUND "no doxygen" doxygen)
endmacro()

macro(attn_check_lab)
  # bench/lab/ is a subdirectory of bench/ (its tools share bench/'s read loops and helpers).
  attn_need(lab ATTN_BUILD_BENCH "needs the bench part, which is off" libopenblas-dev pkg-config)
endmacro()

macro(attn_check_bench)
  # attn_bench compares against OpenBLAS; the other benches need only the compiler.
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
  endif()
  attn_need(bench PKG_CONFIG_FOUND "no pkg-config" pkg-config)
  attn_need(bench OPENBLAS_FOUND "no OpenBLAS" libopenblas-dev)
endmacro()

# --- resolve each switch ------------------------------------------------------------------------
set(_attn_on c)
if(ATTN_BUILD_EXAMPLES)
  list(APPEND _attn_on demo)
endif()
set(_attn_off "")
foreach(_attn_part IN LISTS _attn_parts)
  set(_attn_switch ${_attn_switch_${_attn_part}})
  set(_attn_default AUTO)
  if(DEFINED _attn_default_${_attn_part})
    set(_attn_default ${_attn_default_${_attn_part}})
  endif()
  set(${_attn_switch} ${_attn_default} CACHE STRING
      "${_attn_doc_${_attn_part}}: AUTO (on if its toolchain is found), ON (required) or OFF")
  set_property(CACHE ${_attn_switch} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${_attn_switch}}" _attn_request)
  if(NOT _attn_request STREQUAL "AUTO" AND NOT ${_attn_switch})
    set(${_attn_switch} OFF)
    list(APPEND _attn_off "${_attn_part} (${_attn_switch}=OFF)")
    continue()
  endif()
  set(_attn_missing_${_attn_part} "")
  set(_attn_packages_${_attn_part} "")
  cmake_language(CALL attn_check_${_attn_part})
  if(NOT _attn_missing_${_attn_part})
    set(${_attn_switch} ON)
    list(APPEND _attn_on ${_attn_part})
  elseif(_attn_request STREQUAL "AUTO")
    set(${_attn_switch} OFF)
    list(JOIN _attn_missing_${_attn_part} ", " _attn_why)
    list(APPEND _attn_off "${_attn_part} (${_attn_why})")
  else()
    list(REMOVE_DUPLICATES _attn_packages_${_attn_part})
    list(JOIN _attn_missing_${_attn_part} ", " _attn_why)
    list(JOIN _attn_packages_${_attn_part} " " _attn_pkgs)
    message(FATAL_ERROR "${_attn_switch} is ON but its toolchain is incomplete: ${_attn_why}.\n"
      "Debian: apt-get install ${_attn_pkgs} (scripts/setup-deps.sh all installs everything), "
      "or configure with -D${_attn_switch}=OFF (or AUTO: on only when found).")
  endif()
endforeach()
if(ATTN_BUILD_FUZZ)
  list(APPEND _attn_on fuzz)
endif()

list(JOIN _attn_on " " _attn_on_text)
set(ATTN_FEATURE_SUMMARY "on: ${_attn_on_text}")
if(_attn_off)
  list(JOIN _attn_off ", " _attn_off_text)
  string(APPEND ATTN_FEATURE_SUMMARY "; off: ${_attn_off_text}")
endif()
message(STATUS "libattn: ${ATTN_FEATURE_SUMMARY}")
