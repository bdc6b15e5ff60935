# C# binding (namespace LibAttn) on Mono, included by the top-level CMakeLists.txt when
# ATTN_WITH_CSHARP is ON.
#
#   bindings/csharp/attn_csharp.i --SWIG (build time)--> attn_csharpCSHARP_wrap.c + raw *.cs
#   wrap.c                        --cc-->  csharp/libattn_csharp.so  (links libattn.so)
#   raw *.cs + face *.cs          --mcs--> csharp/LibAttn.dll
#   tests/csharp/*.cs             --mcs--> csharp/LibAttn.Tests.dll  (ctest csharp_tests, NUnit 2.6)
#   examples/csharp/*.cs          --mcs--> csharp/AttnDemo.exe       (target attn_csharp_demo)
#   bench/csharp/*.cs             --mcs--> csharp/AttnBench.exe      (target attn_csharp_bench)
#
# Everything lands in ${CMAKE_BINARY_DIR}/csharp, so `mono <build>/csharp/AttnDemo.exe` runs as is:
# Mono finds libattn_csharp.so beside the assembly, whose RUNPATH finds libattn.so.
# CMake's own C# support needs Visual Studio, so C# is compiled with mcs from custom commands.
# Needs (Debian): swig mono-mcs mono-runtime nunit-console libnunit-cil-dev.

# The SWIG wrapper is C; enable_language must run at file scope.
if(ATTN_WITH_CSHARP AND NOT CMAKE_C_COMPILER_LOADED)
  enable_language(C)
endif()

function(attn_csharp_setup)
  find_package(SWIG 4.0 COMPONENTS csharp)
  find_program(ATTN_MCS_EXECUTABLE mcs)
  find_program(ATTN_MONO_EXECUTABLE mono)
  find_program(ATTN_NUNIT_CONSOLE nunit-console)
  file(GLOB _nunit_hints LIST_DIRECTORIES true /usr/lib/cli/nunit.framework-2.6*
       /usr/lib/mono/nunit /usr/lib/nunit)
  find_file(ATTN_NUNIT_FRAMEWORK_DLL nunit.framework.dll HINTS ${_nunit_hints})

  set(_missing "")
  if(NOT SWIG_FOUND OR NOT SWIG_csharp_FOUND)
    list(APPEND _missing "swig (>= 4.0 with C# support; Debian package swig)")
  endif()
  if(NOT ATTN_MCS_EXECUTABLE)
    list(APPEND _missing "mcs (Debian package mono-mcs)")
  endif()
  if(NOT ATTN_MONO_EXECUTABLE)
    list(APPEND _missing "mono (Debian package mono-runtime)")
  endif()
  if(NOT ATTN_NUNIT_CONSOLE)
    list(APPEND _missing "nunit-console (Debian package nunit-console)")
  endif()
  if(NOT ATTN_NUNIT_FRAMEWORK_DLL)
    list(APPEND _missing "nunit.framework.dll (Debian package libnunit-cil-dev)")
  endif()
  if(_missing)
    list(JOIN _missing "\n  " _missing)
    message(FATAL_ERROR "ATTN_WITH_CSHARP is ON but these are missing:\n  ${_missing}\n"
                        "Install them or configure with -DATTN_WITH_CSHARP=OFF.")
  endif()

  include(UseSWIG)
  # Version 2: obsolete generated .cs files are removed before each SWIG run; SWIG's own
  # dependency output makes edits to attn.i / attn.h regenerate.
  set(UseSWIG_MODULE_VERSION 2)
  set(SWIG_USE_SWIG_DEPENDENCIES TRUE)

  set(_src ${PROJECT_SOURCE_DIR}/bindings/csharp)
  set(_out ${CMAKE_BINARY_DIR}/csharp)
  set(_gen ${CMAKE_CURRENT_BINARY_DIR}/csharp_swig/generated)

  set_property(SOURCE ${_src}/attn_csharp.i PROPERTY SWIG_MODULE_NAME AttnNative)
  swig_add_library(attn_csharp
    TYPE SHARED
    LANGUAGE csharp
    OUTPUT_DIR ${_gen}
    OUTFILE_DIR ${CMAKE_CURRENT_BINARY_DIR}/csharp_swig
    SOURCES ${_src}/attn_csharp.i)
  # UseSWIG adds -dllimport libattn_csharp itself (CMP0122: C# libraries are lib<name>.so).
  set_property(TARGET attn_csharp PROPERTY SWIG_COMPILE_OPTIONS -namespace LibAttn)
  set_property(TARGET attn_csharp PROPERTY SWIG_INCLUDE_DIRECTORIES
               ${PROJECT_SOURCE_DIR}/capi ${PROJECT_SOURCE_DIR}/bindings)
  set_property(TARGET attn_csharp PROPERTY SWIG_DEPENDS
               ${PROJECT_SOURCE_DIR}/bindings/attn.i ${PROJECT_SOURCE_DIR}/capi/attn.h)
  target_include_directories(attn_csharp PRIVATE ${PROJECT_SOURCE_DIR}/capi)
  target_link_libraries(attn_csharp PRIVATE attn)
  set_target_properties(attn_csharp PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${_out}
    C_VISIBILITY_PRESET hidden)

  set(_mcs ${ATTN_MCS_EXECUTABLE} -nologo -langversion:7.2 -warnaserror+ -optimize+ -debug-)

  # --- LibAttn.dll: SWIG's raw classes (internal) + the face ---------------------------------
  set(_face ${_src}/Attention.cs ${_src}/AttentionDesc.cs ${_src}/AttentionArgs.cs
            ${_src}/AttentionException.cs ${_src}/AttnDescHandle.cs ${_src}/AttnArgsHandle.cs
            ${_src}/Enums.cs)
  add_custom_command(
    OUTPUT ${_out}/LibAttn.dll
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
    COMMAND ${_mcs} -target:library -unsafe -out:${_out}/LibAttn.dll
            "-recurse:${_gen}/*.cs" ${_face}
    DEPENDS attn_csharp ${_face}
    COMMENT "mcs LibAttn.dll"
    VERBATIM)

  # --- tests, demo, bench --------------------------------------------------------------------
  set(_tests ${PROJECT_SOURCE_DIR}/tests/csharp/AttentionTests.cs
             ${PROJECT_SOURCE_DIR}/tests/csharp/RunReference.cs
             ${PROJECT_SOURCE_DIR}/tests/csharp/ExtensibleCallTests.cs
             ${PROJECT_SOURCE_DIR}/tests/csharp/VariantVectorTests.cs)
  add_custom_command(
    OUTPUT ${_out}/LibAttn.Tests.dll
    COMMAND ${_mcs} -target:library -unsafe -r:${_out}/LibAttn.dll -r:${ATTN_NUNIT_FRAMEWORK_DLL}
            -out:${_out}/LibAttn.Tests.dll ${_tests}
    DEPENDS ${_out}/LibAttn.dll ${_tests}
    COMMENT "mcs LibAttn.Tests.dll"
    VERBATIM)

  # The thread-start failure child (issue 14): its own process, since it lowers RLIMIT_AS.
  set(_tf_child ${PROJECT_SOURCE_DIR}/tests/csharp/ThreadFailureChild.cs)
  add_custom_command(
    OUTPUT ${_out}/ThreadFailureChild.exe
    COMMAND ${_mcs} -target:exe -unsafe -r:${_out}/LibAttn.dll
            -out:${_out}/ThreadFailureChild.exe ${_tf_child}
    DEPENDS ${_out}/LibAttn.dll ${_tf_child}
    COMMENT "mcs ThreadFailureChild.exe"
    VERBATIM)

  set(_demo ${PROJECT_SOURCE_DIR}/examples/csharp/Demo.cs)
  add_custom_command(
    OUTPUT ${_out}/AttnDemo.exe
    COMMAND ${_mcs} -target:exe -r:${_out}/LibAttn.dll -out:${_out}/AttnDemo.exe ${_demo}
    DEPENDS ${_out}/LibAttn.dll ${_demo}
    COMMENT "mcs AttnDemo.exe"
    VERBATIM)

  set(_bench ${PROJECT_SOURCE_DIR}/bench/csharp/CallBench.cs)
  add_custom_command(
    OUTPUT ${_out}/AttnBench.exe
    COMMAND ${_mcs} -target:exe -r:${_out}/LibAttn.dll -out:${_out}/AttnBench.exe ${_bench}
    DEPENDS ${_out}/LibAttn.dll ${_bench}
    COMMENT "mcs AttnBench.exe"
    VERBATIM)

  add_custom_target(attn_csharp_assemblies ALL
    DEPENDS ${_out}/LibAttn.dll ${_out}/LibAttn.Tests.dll ${_out}/AttnDemo.exe
            ${_out}/AttnBench.exe ${_out}/ThreadFailureChild.exe)

  # One-command runners: `ninja -C <build> attn_csharp_demo` / `attn_csharp_bench`.
  set(_env LD_LIBRARY_PATH=${_out}:$<TARGET_FILE_DIR:attn> MONO_PATH=${_out})
  add_custom_target(attn_csharp_demo
    COMMAND ${CMAKE_COMMAND} -E env ${_env} ${ATTN_MONO_EXECUTABLE} ${_out}/AttnDemo.exe
    DEPENDS attn_csharp_assemblies
    USES_TERMINAL VERBATIM)
  add_custom_target(attn_csharp_bench
    COMMAND ${CMAKE_COMMAND} -E env ${_env} ${ATTN_MONO_EXECUTABLE} --optimize=all
            ${_out}/AttnBench.exe
    DEPENDS attn_csharp_assemblies
    USES_TERMINAL VERBATIM)

  # --- ctest ---------------------------------------------------------------------------------
  if(NOT ATTN_XLANG_DIR)
    set(ATTN_XLANG_DIR ${CMAKE_BINARY_DIR}/xlang)
  endif()
  file(MAKE_DIRECTORY ${ATTN_XLANG_DIR})
  # nunit-console's exit code is the number of failed tests (negative: could not run).
  add_test(NAME csharp_tests
    COMMAND ${ATTN_NUNIT_CONSOLE} -nologo -noshadow -labels
            -xml=${_out}/TestResult.xml ${_out}/LibAttn.Tests.dll
    WORKING_DIRECTORY ${_out})
  set_tests_properties(csharp_tests PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${_out}:$<TARGET_FILE_DIR:attn>;MONO_PATH=${_out};ATTN_XLANG_DIR=${ATTN_XLANG_DIR};ATTN_VECTORS_DIR=${PROJECT_SOURCE_DIR}/tests/vectors"
    # Fail, never pass silently, if NUnit ran nothing or ignored, skipped or rejected a test.
    FAIL_REGULAR_EXPRESSION "Tests run: 0,|Not run: [1-9]|Invalid: [1-9]|Ignored: [1-9]|Skipped: [1-9]"
    TIMEOUT 600)
  # Issue 14, item 1: worker threads that cannot start under a lowered soft RLIMIT_AS. The child
  # mono process lowers its own limit; exit 0 only if every call succeeded with the 1-thread
  # result, no worker was alive under the limit, and the workers came back once it was raised.
  add_test(NAME csharp_thread_failure
    COMMAND ${ATTN_MONO_EXECUTABLE} ${_out}/ThreadFailureChild.exe
    WORKING_DIRECTORY ${_out})
  set_tests_properties(csharp_thread_failure PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${_out}:$<TARGET_FILE_DIR:attn>;MONO_PATH=${_out}"
    FAIL_REGULAR_EXPRESSION "FAIL:"
    TIMEOUT 120)
  # The demo exits 1 unless the seed example's out[1][0] is 15, and must print exactly what the
  # C demo prints.
  add_test(NAME csharp_demo
    COMMAND ${CMAKE_COMMAND} "-DNAME=C#" "-DDEMO_CMD=${ATTN_MONO_EXECUTABLE}|${_out}/AttnDemo.exe"
            "-DC_DEMO=$<$<TARGET_EXISTS:attn_demo>:$<TARGET_FILE:attn_demo>>"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/demo_check.cmake)
  set_tests_properties(csharp_demo PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${_out}:$<TARGET_FILE_DIR:attn>;MONO_PATH=${_out}"
    TIMEOUT 120)
endfunction()

attn_csharp_setup()
