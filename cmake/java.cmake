# Java binding (package org.libattn): SWIG 4 via UseSWIG at build time, JNI library attn_java,
# jars via UseJava's add_jar, JUnit 5 tests registered as the ctest `java_tests`.
#
# Included from the top-level CMakeLists.txt when ATTN_WITH_JAVA is ON. Needs: a JDK (javac,
# jar, jni.h), swig >= 4, Debian's junit5 (junit-platform-console-standalone.jar).
#
# Targets:  attn_java (libattn_java.so)   attn_jar (attn.jar: face + generated classes)
#           attn_java_tests_jar, attn_java_demo_jar, attn_java_bench_jar (jars)
#           attn_java_demo / attn_java_bench: one-command runners (build what is missing, run)
# Tests:    java_tests (JUnit 5 under -Xcheck:jni), java_demo (output identical to the C demo)
# Everything lands in ${CMAKE_BINARY_DIR}/java: attn.jar, lib/libattn_java.so (finds libattn.so
# through its RUNPATH), the test/demo/bench jars.

# --- toolchain --------------------------------------------------------------------------------
# CMake 3.25's FindJNI does not search java-17 on Debian unless JAVA_HOME is set: derive it from
# the real path of javac (/usr/lib/jvm/<jdk>/bin/javac -> /usr/lib/jvm/<jdk>).
if(NOT DEFINED ENV{JAVA_HOME} OR "$ENV{JAVA_HOME}" STREQUAL "")
  find_program(ATTN_JAVAC_PROGRAM javac)
  if(ATTN_JAVAC_PROGRAM)
    file(REAL_PATH "${ATTN_JAVAC_PROGRAM}" _attn_javac_real)
    cmake_path(GET _attn_javac_real PARENT_PATH _attn_java_bin)
    cmake_path(GET _attn_java_bin PARENT_PATH _attn_java_home)
    set(ENV{JAVA_HOME} "${_attn_java_home}")
  endif()
endif()

find_package(Java 11 COMPONENTS Development Runtime)
find_package(JNI)
find_package(SWIG 4.0 COMPONENTS java)
if(NOT Java_FOUND OR NOT JNI_FOUND)
  message(FATAL_ERROR "ATTN_WITH_JAVA is ON but no JDK with JNI headers was found "
    "(JAVA_HOME='$ENV{JAVA_HOME}'). Install openjdk-17-jdk-headless, set JAVA_HOME, or configure "
    "with -DATTN_WITH_JAVA=OFF.")
endif()
if(NOT SWIG_FOUND OR NOT SWIG_java_FOUND)
  message(FATAL_ERROR "ATTN_WITH_JAVA is ON but SWIG >= 4.0 with Java support was not found. "
    "Install swig, or configure with -DATTN_WITH_JAVA=OFF.")
endif()

set(ATTN_JUNIT_CONSOLE_JAR "/usr/share/java/junit-platform-console-standalone.jar"
  CACHE FILEPATH "JUnit 5 console launcher (Debian package junit5)")
set(ATTN_JUNIT_API_JAR "/usr/share/java/junit-jupiter-api.jar"
  CACHE FILEPATH "JUnit 5 Jupiter API jar (Debian package junit5)")
set(ATTN_OPENTEST4J_JAR "/usr/share/java/opentest4j.jar"
  CACHE FILEPATH "opentest4j jar (dependency of JUnit 5)")
set(ATTN_APIGUARDIAN_JAR "/usr/share/java/apiguardian-api.jar"
  CACHE FILEPATH "apiguardian jar (dependency of JUnit 5)")
foreach(_attn_jar IN ITEMS ATTN_JUNIT_CONSOLE_JAR ATTN_JUNIT_API_JAR ATTN_OPENTEST4J_JAR)
  if(NOT EXISTS "${${_attn_jar}}")
    message(FATAL_ERROR "ATTN_WITH_JAVA is ON but ${_attn_jar} (${${_attn_jar}}) does not exist: "
      "install Debian's junit5 package, or configure with -DATTN_WITH_JAVA=OFF.")
  endif()
endforeach()

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
  "${PROJECT_SOURCE_DIR}/capi" "${PROJECT_SOURCE_DIR}/bindings")

swig_add_library(attn_java
  TYPE MODULE
  LANGUAGE java
  OUTPUT_DIR "${_attn_java_gen}"
  OUTFILE_DIR "${_attn_java_dir}/wrap"
  SOURCES "${_attn_java_i}")
target_include_directories(attn_java PRIVATE ${JNI_INCLUDE_DIRS} "${PROJECT_SOURCE_DIR}/capi")
target_link_libraries(attn_java PRIVATE attn) # libjvm is not linked: the JVM provides it
set_target_properties(attn_java PROPERTIES
  CXX_STANDARD 11
  CXX_STANDARD_REQUIRED ON
  CXX_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY "${_attn_java_dir}/lib")

# The Java files SWIG writes. AttnNative{,JNI}.java are declared by UseSWIG; the enum files are
# not, so a no-op rule after SWIG declares them. Only these are compiled: if the interface ever
# leaks an unmapped pointer type, the SWIGTYPE_p_* class it needs is missing and javac fails.
set(_attn_java_generated
  "${_attn_java_gen}/AttnNative.java"
  "${_attn_java_gen}/AttnNativeJNI.java")
set(_attn_java_enums
  "${_attn_java_gen}/attn_status.java"
  "${_attn_java_gen}/attn_causal.java"
  "${_attn_java_gen}/attn_operand.java"
  "${_attn_java_gen}/attn_param.java"
  "${_attn_java_gen}/attn_alibi.java"
  "${_attn_java_gen}/attn_weights_mode.java"
  "${_attn_java_gen}/attn_op.java")
add_custom_command(
  OUTPUT ${_attn_java_enums}
  COMMAND "${CMAKE_COMMAND}" -E touch_nocreate ${_attn_java_enums}
  DEPENDS "${_attn_java_gen}/AttnNative.java"
  COMMENT "SWIG Java enums")
set_source_files_properties(${_attn_java_generated} ${_attn_java_enums} PROPERTIES GENERATED TRUE)

# --- jars -------------------------------------------------------------------------------------
file(GLOB _attn_java_face CONFIGURE_DEPENDS
  "${PROJECT_SOURCE_DIR}/bindings/java/src/org/libattn/*.java")
add_jar(attn_jar
  SOURCES ${_attn_java_face} ${_attn_java_generated} ${_attn_java_enums}
  OUTPUT_NAME attn
  OUTPUT_DIR "${_attn_java_dir}")
add_dependencies(attn_jar attn_java)
get_target_property(ATTN_JAR_FILE attn_jar JAR_FILE)

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
# java.library.path = the directory of libattn_java.so; it finds libattn.so through its RPATH.
set(_attn_java_run
  "${Java_JAVA_EXECUTABLE}" "-Djava.library.path=$<TARGET_FILE_DIR:attn_java>")

add_custom_target(attn_java_demo
  COMMAND ${_attn_java_run} -cp "${ATTN_JAR_FILE}:${_attn_java_demo_jar}" Demo
  DEPENDS attn_java attn_jar attn_java_demo_jar
  USES_TERMINAL VERBATIM)
add_custom_target(attn_java_bench
  COMMAND ${_attn_java_run} -cp "${ATTN_JAR_FILE}:${_attn_java_bench_jar}" CallBench
  DEPENDS attn_java attn_jar attn_java_bench_jar
  USES_TERMINAL VERBATIM)

# --- tests ------------------------------------------------------------------------------------
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

# Issue 14, item 1: worker threads that cannot start under a lowered soft RLIMIT_AS. The child JVM
# (tests/java/ThreadFailureChild.java) lowers its own limit with prlimit; a small fixed heap,
# serial GC (no GC threads started on demand) and the interpreter only (no JIT arenas or code
# cache growth, whose allocation failures would abort the JVM) keep the JVM's own needs before
# the limit. Exit 0 only if every call succeeded
# with the 1-thread result, no worker was alive under the limit, and the workers came back after.
find_program(ATTN_PRLIMIT_PROGRAM prlimit)
if(NOT ATTN_PRLIMIT_PROGRAM)
  message(FATAL_ERROR "ATTN_WITH_JAVA is ON but prlimit (util-linux) was not found: the test "
    "java_thread_failure needs it.")
endif()
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
    "-DDEMO_CMD=${Java_JAVA_EXECUTABLE}|-Xcheck:jni|-Djava.library.path=$<TARGET_FILE_DIR:attn_java>|-cp|${ATTN_JAR_FILE}:${_attn_java_demo_jar}|Demo"
    "-DFAIL_REGEX=WARNING in native method|Warning: Calling other JNI|JNI local refs"
    "-DC_DEMO=$<$<TARGET_EXISTS:attn_demo>:$<TARGET_FILE:attn_demo>>"
    -P "${CMAKE_CURRENT_LIST_DIR}/demo_check.cmake")
set_tests_properties(java_demo PROPERTIES TIMEOUT 120)
