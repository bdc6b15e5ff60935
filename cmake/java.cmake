# Java binding (package org.libattn): SWIG 4 via UseSWIG at build time, JNI library attn_java,
# jars via UseJava's add_jar, JUnit 5 tests registered as the ctest `java_tests`.
#
# Included from the top-level CMakeLists.txt when ATTN_WITH_JAVA is ON. Needs: a JDK (javac,
# jar, jni.h), swig >= 4, Debian's junit5 (junit-platform-console-standalone.jar; tests only),
# and for the Maven artifact Maven (Debian's maven, 3.8).
#
# Targets:  attn_java (libattn_java.so)   attn_jar (attn.jar: face + generated classes, no natives)
#           attn_java_natives: java/native/<os>-<arch>/{libattn.so.0, libattn_java.so}, the
#             natives as the Maven jar carries them (libattn_java.so: RUNPATH $ORIGIN only)
#           attn_java_tests_jar, attn_java_demo_jar, attn_java_bench_jar (jars)
#           attn_java_demo / attn_java_bench: one-command runners (build what is missing, run)
#           attn_java_maven (not in ALL; needs mvn): bindings/java/pom.xml -> java/maven/
#             attn-<version>{,-sources,-javadoc}.jar + attn-<version>.pom, natives inside
#           attn_java_maven_install: the same, `mvn install`ed into the user's local repository
#             (~/.m2): org.libattn:attn:<version>
# Tests:    java_tests (JUnit 5 under -Xcheck:jni: every class of tests/java/*.java, e.g.
#             CallBindingTest, VarlenTest; the glob below picks a new one up at configure
#             time), java_demo (output identical to the C demo);
#           consumer_java (tests/consumer/java) installs the Maven artifact and uses it.
# Everything lands in ${CMAKE_BINARY_DIR}/java: attn.jar, native/linux-x86_64/ (the JNI library
# and a copy of libattn.so.0 beside it), gen/ (SWIG's Java), the test/demo/bench jars, maven/.
# Install (COMPONENT java): attn.jar into <datadir>/java, libattn_java.so into <libdir> beside
# libattn.so.0 (found through $ORIGIN).

# --- toolchain ---------------------------------------------------------------------------------
# cmake/features.cmake found it (JAVA_HOME, Java, JNI headers without AWT, SWIG, and for the tests
# the JUnit 5 jars ATTN_JUNIT_*_JAR and prlimit): this file runs only when all of it is there.

include(UseJava)
include(UseSWIG)

# --- SWIG -> JNI library ----------------------------------------------------------------------
set(_attn_java_dir "${CMAKE_CURRENT_BINARY_DIR}/java")
set(_attn_java_gen "${_attn_java_dir}/gen/org/libattn")
set(_attn_java_i "${PROJECT_SOURCE_DIR}/bindings/java/attn_java.i")

set_property(SOURCE "${_attn_java_i}" PROPERTY CPLUSPLUS ON)
set_property(SOURCE "${_attn_java_i}" PROPERTY SWIG_MODULE_NAME AttnNative)
set_property(SOURCE "${_attn_java_i}" PROPERTY USE_SWIG_DEPENDENCIES TRUE)
set_property(SOURCE "${_attn_java_i}" PROPERTY COMPILE_OPTIONS -package org.libattn)
set_property(SOURCE "${_attn_java_i}" PROPERTY INCLUDE_DIRECTORIES
  "${PROJECT_SOURCE_DIR}/capi" "${PROJECT_SOURCE_DIR}/bindings" "${PROJECT_SOURCE_DIR}/bindings/java")

swig_add_library(attn_java
  TYPE MODULE
  LANGUAGE java
  OUTPUT_DIR "${_attn_java_gen}"
  OUTFILE_DIR "${_attn_java_dir}/wrap"
  SOURCES "${_attn_java_i}" "${PROJECT_SOURCE_DIR}/bindings/java/attn_jni.c")
target_include_directories(attn_java PRIVATE ${JNI_INCLUDE_DIRS} "${PROJECT_SOURCE_DIR}/capi"
  "${PROJECT_SOURCE_DIR}/bindings/java")
target_link_libraries(attn_java PRIVATE attn) # libjvm is not linked: the JVM provides it
# <os>-<arch> as org.libattn.NativeLoader.platform() names it (the jar's META-INF/native/<dir>).
string(TOLOWER "${CMAKE_SYSTEM_NAME}" _attn_java_os)
string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _attn_java_arch)
if(_attn_java_os STREQUAL "darwin")
  set(_attn_java_os osx)
endif()
if(_attn_java_arch MATCHES "^(amd64|x86_64|x64)$")
  set(_attn_java_arch x86_64)
elseif(_attn_java_arch MATCHES "^(aarch64|arm64)$")
  set(_attn_java_arch aarch64)
endif()
set(ATTN_JAVA_PLATFORM "${_attn_java_os}-${_attn_java_arch}")
set(ATTN_JAVA_NATIVE_ROOT "${_attn_java_dir}/native")
set(ATTN_JAVA_NATIVE_DIR "${ATTN_JAVA_NATIVE_ROOT}/${ATTN_JAVA_PLATFORM}")

# The JNI library is built straight into the native staging directory. Its only RUNPATH is
# $ORIGIN (in the build tree too: no absolute path), so it finds the libattn.so.0 beside it
# wherever that directory is moved or extracted to; NativeLoader also loads libattn.so.0 first.
set_target_properties(attn_java PROPERTIES
  CXX_STANDARD 11
  CXX_STANDARD_REQUIRED ON
  CXX_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY "${ATTN_JAVA_NATIVE_DIR}"
  BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "$ORIGIN")

# libattn beside it, under its SONAME (the name libattn_java.so's DT_NEEDED asks for): a copy of
# the real file, not the symlink.
add_custom_command(
  OUTPUT "${ATTN_JAVA_NATIVE_DIR}/libattn.so.0"
  COMMAND "${CMAKE_COMMAND}" -E copy "$<TARGET_FILE:attn>" "${ATTN_JAVA_NATIVE_DIR}/libattn.so.0"
  DEPENDS attn
  COMMENT "Staging libattn.so.0 for the Java natives"
  VERBATIM)
add_custom_target(attn_java_natives ALL DEPENDS "${ATTN_JAVA_NATIVE_DIR}/libattn.so.0")
add_dependencies(attn_java_natives attn_java)

# The Java files SWIG writes. AttnNative{,JNI}.java are declared by UseSWIG; the raw enums
# attn_*.java are not, so a no-op rule after SWIG declares them. The public enums come from one
# SWIG run per enum over bindings/java/attn_java_enum.swg (C enum | Java enum | constant prefix,
# a regex). Only these are compiled: an unmapped pointer type's SWIGTYPE_p_* class is missing
# and javac fails.
set(_attn_java_enum_list
  "attn_status|Status|ATTN_(?:ERR_)?" "attn_causal|Causal|ATTN_CAUSAL_" "attn_operand|Operand|ATTN_"
  "attn_param|Param|ATTN_PARAM_" "attn_alibi|Alibi|ATTN_ALIBI_"
  "attn_weights_mode|WeightsMode|ATTN_WEIGHTS_" "attn_compute|Compute|ATTN_COMPUTE_"
  "attn_diagonal|Diagonal|ATTN_DIAGONAL_" "attn_alibi_form|AlibiForm|ATTN_ALIBI_"
  "attn_dtype|Dtype|ATTN_DTYPE_"
  "attn_op|Op|ATTN_OP_")
set(_attn_java_generated "${_attn_java_gen}/AttnNative.java" "${_attn_java_gen}/AttnNativeJNI.java")
set(_attn_java_enums)
set(_attn_java_public_enums)
foreach(_e IN LISTS _attn_java_enum_list)
  string(REPLACE "|" ";" _e "${_e}")
  list(GET _e 0 _c)
  list(GET _e 1 _j)
  list(GET _e 2 _p)
  list(APPEND _attn_java_enums "${_attn_java_gen}/${_c}.java")
  set(_dir "${_attn_java_dir}/enums/${_j}")
  file(WRITE "${_dir}/enum.i.in" "%module AttnEnum${_j}\n%include \"attn_java_enum.swg\"\n"
    "ATTN_JAVA_ENUM(${_c}, ${_j}, ${_p})\n%include \"attn.h\"\n")
  configure_file("${_dir}/enum.i.in" "${_dir}/enum.i" COPYONLY)
  add_custom_command(
    OUTPUT "${_attn_java_gen}/${_j}.java"
    COMMAND "${SWIG_EXECUTABLE}" -java -package org.libattn -I${PROJECT_SOURCE_DIR}/capi
      -I${PROJECT_SOURCE_DIR}/bindings/java -outdir "${_dir}" -o "${_dir}/wrap.c" "${_dir}/enum.i"
    COMMAND "${CMAKE_COMMAND}" -E copy "${_dir}/${_j}.java" "${_attn_java_gen}/${_j}.java"
    DEPENDS "${_dir}/enum.i" "${PROJECT_SOURCE_DIR}/bindings/java/attn_java_enum.swg"
      "${PROJECT_SOURCE_DIR}/capi/attn.h"
    COMMENT "SWIG Java enum ${_j}")
  list(APPEND _attn_java_public_enums "${_attn_java_gen}/${_j}.java")
endforeach()
add_custom_command(
  OUTPUT ${_attn_java_enums}
  COMMAND "${CMAKE_COMMAND}" -E touch_nocreate ${_attn_java_enums}
  DEPENDS "${_attn_java_gen}/AttnNative.java"
  COMMENT "SWIG Java enums")
list(APPEND _attn_java_enums ${_attn_java_public_enums})
set_source_files_properties(${_attn_java_generated} ${_attn_java_enums} PROPERTIES GENERATED TRUE)

# --- jars -------------------------------------------------------------------------------------
file(GLOB _attn_java_face CONFIGURE_DEPENDS
  "${PROJECT_SOURCE_DIR}/bindings/java/src/org/libattn/*.java")
add_jar(attn_jar
  SOURCES ${_attn_java_face} ${_attn_java_generated} ${_attn_java_enums}
  OUTPUT_NAME attn
  OUTPUT_DIR "${_attn_java_dir}")
add_dependencies(attn_jar attn_java attn_java_natives)
get_target_property(ATTN_JAR_FILE attn_jar JAR_FILE)

if(ATTN_BUILD_TESTS)
  set(_attn_junit_cp "${ATTN_JUNIT_API_JAR}" "${ATTN_OPENTEST4J_JAR}")
  if(EXISTS "${ATTN_APIGUARDIAN_JAR}")
    list(APPEND _attn_junit_cp "${ATTN_APIGUARDIAN_JAR}")
  endif()
  file(GLOB _attn_java_test_src CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/java/*.java")
  add_jar(attn_java_tests_jar
    OUTPUT_NAME attn_java_tests
    SOURCES ${_attn_java_test_src}
    INCLUDE_JARS attn_jar ${_attn_junit_cp}
    OUTPUT_DIR "${_attn_java_dir}")
  get_target_property(_attn_java_tests_jar attn_java_tests_jar JAR_FILE)
endif()

file(GLOB _attn_java_demo_src CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/examples/java/*.java")
add_jar(attn_java_demo_jar
  OUTPUT_NAME attn_java_demo
  SOURCES ${_attn_java_demo_src}
  INCLUDE_JARS attn_jar
  ENTRY_POINT Demo
  OUTPUT_DIR "${_attn_java_dir}")
get_target_property(_attn_java_demo_jar attn_java_demo_jar JAR_FILE)
if(TARGET attn_demo)
  add_dependencies(attn_java_demo_jar attn_demo) # ctest java_demo compares with its output
endif()

file(GLOB _attn_java_bench_src CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/bench/java/*.java")
add_jar(attn_java_bench_jar
  OUTPUT_NAME attn_java_bench
  SOURCES ${_attn_java_bench_src}
  INCLUDE_JARS attn_jar
  ENTRY_POINT CallBench
  OUTPUT_DIR "${_attn_java_dir}")
get_target_property(_attn_java_bench_jar attn_java_bench_jar JAR_FILE)

# --- running ----------------------------------------------------------------------------------
# org.libattn.library.path = the staged natives (NativeLoader loads libattn.so.0, then
# libattn_java.so, from there; attn.jar itself carries no natives).
set(_attn_java_run
  "${Java_JAVA_EXECUTABLE}" "-Dorg.libattn.library.path=${ATTN_JAVA_NATIVE_DIR}")

add_custom_target(attn_java_demo
  COMMAND ${_attn_java_run} -cp "${ATTN_JAR_FILE}:${_attn_java_demo_jar}" Demo
  DEPENDS attn_java attn_jar attn_java_demo_jar
  USES_TERMINAL VERBATIM)
add_custom_target(attn_java_bench
  COMMAND ${_attn_java_run} -cp "${ATTN_JAR_FILE}:${_attn_java_bench_jar}" CallBench
  DEPENDS attn_java attn_jar attn_java_bench_jar
  USES_TERMINAL VERBATIM)

# --- tests ------------------------------------------------------------------------------------
if(ATTN_BUILD_TESTS)
  # -Xcheck:jni validates every JNI call; its warnings fail the test too (FAIL_REGULAR_EXPRESSION).
  if(NOT ATTN_XLANG_DIR)
    set(ATTN_XLANG_DIR "${CMAKE_BINARY_DIR}/xlang")
  endif()
  file(MAKE_DIRECTORY "${ATTN_XLANG_DIR}")
  add_test(NAME java_tests
    COMMAND ${_attn_java_run} -Xcheck:jni
      "-Dattn.vectors.dir=${PROJECT_SOURCE_DIR}/tests/vectors"
      -jar "${ATTN_JUNIT_CONSOLE_JAR}"
      --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree --details-theme=ascii
      --class-path "${ATTN_JAR_FILE}:${_attn_java_tests_jar}"
      --scan-class-path "${_attn_java_tests_jar}")
  set_tests_properties(java_tests PROPERTIES
    ENVIRONMENT "ATTN_XLANG_DIR=${ATTN_XLANG_DIR}"
    FAIL_REGULAR_EXPRESSION "WARNING in native method|Warning: Calling other JNI|FATAL ERROR in native method|JNI local refs"
    TIMEOUT 600)

  # Worker threads that cannot start under a lowered soft RLIMIT_AS. The child JVM
  # (tests/java/ThreadFailureChild.java) lowers its own limit with prlimit; a small fixed heap,
  # serial GC (no GC threads started on demand) and the interpreter only (no JIT arenas or code
  # cache growth, whose allocation failures would abort the JVM) keep the JVM's own needs before
  # the limit. Exit 0 only if every call succeeded
  # with the 1-thread result, no worker was alive under the limit, and the workers came back after.
  add_test(NAME java_thread_failure
    COMMAND ${_attn_java_run} -Xms64m -Xmx64m -XX:+UseSerialGC -Xss1m -Xint
      -XX:ReservedCodeCacheSize=32m
      -cp "${ATTN_JAR_FILE}:${_attn_java_tests_jar}" org.libattn.ThreadFailureChild)
  set_tests_properties(java_thread_failure PROPERTIES
    FAIL_REGULAR_EXPRESSION "FAIL:|Exception|OutOfMemoryError"
    TIMEOUT 120)

  # The demo exits 1 unless the seed example's out[1][0] is 15, and must print exactly what the C
  # demo prints (when the C demo is built).
  add_test(NAME java_demo
    COMMAND "${CMAKE_COMMAND}" -DNAME=Java
      "-DDEMO_CMD=${Java_JAVA_EXECUTABLE}|-Xcheck:jni|-Dorg.libattn.library.path=${ATTN_JAVA_NATIVE_DIR}|-cp|${ATTN_JAR_FILE}:${_attn_java_demo_jar}|Demo"
      "-DFAIL_REGEX=WARNING in native method|Warning: Calling other JNI|JNI local refs"
      "-DC_DEMO=$<$<TARGET_EXISTS:attn_demo>:$<TARGET_FILE:attn_demo>>"
      -P "${CMAKE_CURRENT_LIST_DIR}/demo_check.cmake")
  set_tests_properties(java_demo PROPERTIES TIMEOUT 120)
endif()

# --- Maven artifact (bindings/java/pom.xml) ---------------------------------------------------
# org.libattn:attn:<version>, natives inside the jar. The version is the project's (capi/attn.h),
# passed as ${revision}; the SWIG sources, natives and Maven's output directory are all in this
# build tree, so Maven writes nothing into the source tree. Plugins resolve through the user's
# ~/.m2 (downloaded from Maven Central once per machine). Not part of ALL: `mvn` takes ~10-20 s.
find_program(ATTN_MVN_PROGRAM mvn)
set(ATTN_JAVA_POM "${PROJECT_SOURCE_DIR}/bindings/java/pom.xml")
set(ATTN_JAVA_MAVEN_DIR "${_attn_java_dir}/maven")
set(ATTN_JAVA_MAVEN_JAR "${ATTN_JAVA_MAVEN_DIR}/attn-${PROJECT_VERSION}.jar")
if(ATTN_MVN_PROGRAM)
  set(_attn_mvn "${ATTN_MVN_PROGRAM}" -B -ntp -f "${ATTN_JAVA_POM}"
    "-Drevision=${PROJECT_VERSION}"
    "-Dattn.cmake.build.dir=${CMAKE_BINARY_DIR}"
    "-Dattn.generated.dir=${_attn_java_dir}/gen"
    "-Dattn.native.dir=${ATTN_JAVA_NATIVE_ROOT}"
    "-Dattn.build.dir=${ATTN_JAVA_MAVEN_DIR}")
  set(_attn_java_maven_outputs
    "${ATTN_JAVA_MAVEN_JAR}"
    "${ATTN_JAVA_MAVEN_DIR}/attn-${PROJECT_VERSION}-sources.jar"
    "${ATTN_JAVA_MAVEN_DIR}/attn-${PROJECT_VERSION}-javadoc.jar"
    "${ATTN_JAVA_MAVEN_DIR}/attn-${PROJECT_VERSION}.pom")
  add_custom_command(
    OUTPUT ${_attn_java_maven_outputs}
    COMMAND ${_attn_mvn} -q clean package
    # Maven leaves a jar it found up to date untouched: give the outputs this run's time.
    COMMAND "${CMAKE_COMMAND}" -E touch ${_attn_java_maven_outputs}
    DEPENDS "${ATTN_JAVA_POM}" ${_attn_java_face} ${_attn_java_generated} ${_attn_java_enums}
      "${ATTN_JAVA_NATIVE_DIR}/libattn.so.0" attn_java
    COMMENT "mvn package: org.libattn:attn:${PROJECT_VERSION} (natives for ${ATTN_JAVA_PLATFORM})"
    VERBATIM)
  add_custom_target(attn_java_maven DEPENDS ${_attn_java_maven_outputs})
  add_dependencies(attn_java_maven attn_java_natives attn_jar)
  add_custom_target(attn_java_maven_install
    COMMAND ${_attn_mvn} -q clean install
    COMMAND "${CMAKE_COMMAND}" -E echo
      "installed org.libattn:attn:${PROJECT_VERSION} into the local Maven repository (~/.m2)"
    DEPENDS attn_java_natives attn_jar
    USES_TERMINAL VERBATIM)
else()
  message(STATUS "mvn not found: no attn_java_maven / attn_java_maven_install targets "
    "(Debian: apt-get install maven)")
endif()

# --- install (COMPONENT java) -----------------------------------------------------------------
# libattn_java.so next to libattn.so.0 in <libdir> ($ORIGIN finds it; Debian's default
# java.library.path has /usr/lib/<multiarch>), attn.jar (no natives: its NativeLoader then uses
# System.loadLibrary, or -Dorg.libattn.library.path=<libdir>) into <datadir>/java. The Maven
# artifact (natives inside) goes into a Maven repository instead: attn_java_maven_install.
install(TARGETS attn_java
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT java)
install_jar(attn_jar DESTINATION "${CMAKE_INSTALL_DATADIR}/java" COMPONENT java)
