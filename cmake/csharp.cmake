# C# binding (namespace LibAttn) on Mono, included by the top-level CMakeLists.txt when
# ATTN_WITH_CSHARP is ON.
#
#   bindings/csharp/attn_csharp.i --SWIG (build time)--> attn_csharpCSHARP_wrap.c + raw *.cs
#   wrap.c                        --cc-->  csharp/libattn_csharp.so  (links libattn.so)
#   raw *.cs + face *.cs          --mcs--> csharp/LibAttn.dll
#   tests/csharp/*.cs             --mcs--> csharp/LibAttn.Tests.dll  (ctest csharp_tests, NUnit 2.6;
#                                           one file per topic, TestSupport.cs the shared helpers)
#   examples/csharp/*.cs          --mcs--> csharp/AttnDemo.exe       (target attn_csharp_demo)
#   bench/csharp/*.cs             --mcs--> csharp/AttnBench.exe      (target attn_csharp_bench)
#   LibAttn.dll + LibAttn.xml + natives --> csharp/nuget/LibAttn.nuspec (target attn_csharp_nupkg:
#                                           `nuget pack` into csharp/nupkg/; test consumer_csharp)
#
# Everything lands in ${CMAKE_BINARY_DIR}/csharp, so `mono <build>/csharp/AttnDemo.exe` runs as is:
# LibAttn's NativeLoader loads libattn_csharp.so from beside the assembly, whose build RUNPATH finds
# libattn.so. The NuGet package's copy of the glue has RUNPATH $ORIGIN and libattn.so.0 beside it.
# CMake's own C# support needs Visual Studio, so C# is compiled with mcs from custom commands.
# Needs (Debian): swig mono-mcs mono-runtime nunit-console libnunit-cil-dev.

# The SWIG wrapper is C; enable_language must run at file scope.
if(ATTN_WITH_CSHARP AND NOT CMAKE_C_COMPILER_LOADED)
  enable_language(C)
endif()

function(attn_csharp_setup)
  # cmake/features.cmake found the toolchain (SWIG, ATTN_MCS_EXECUTABLE, ATTN_MONO_EXECUTABLE;
  # for the tests ATTN_NUNIT_CONSOLE, ATTN_NUNIT_FRAMEWORK_DLL, ATTN_NUGET_EXECUTABLE).
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
  # Installed beside libattn.so.0 (see the install rules below): $ORIGIN finds it.
  set_target_properties(attn_csharp PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${_out}
    C_VISIBILITY_PRESET hidden
    INSTALL_RPATH "\$ORIGIN")

  set(_mcs ${ATTN_MCS_EXECUTABLE} -nologo -langversion:7.2 -warnaserror+ -optimize+ -debug-)

  # --- package identity: one version (capi/attn.h -> project()), names from the targets --------
  set(ATTN_CSHARP_AUTHORS "libattn maintainers" CACHE STRING
      "Authors of the NuGet package LibAttn (and AssemblyCompany of LibAttn.dll)")
  set(ATTN_CSHARP_PROJECT_URL "${PROJECT_HOMEPAGE_URL}" CACHE STRING
      "projectUrl of the NuGet package LibAttn (default: project(HOMEPAGE_URL); empty: none)")
  set(ATTN_CSHARP_DESCRIPTION "Exact, masked scaled dot-product attention on the CPU in fp32 (causal, padding, masks, GQA, sliding window, softcap, ALiBi, sinks, bias), the C# binding of libattn ${PROJECT_VERSION} with its native libraries.")
  set(ATTN_CSHARP_COPYRIGHT "Copyright the libattn authors. Licensed under the Apache License 2.0.")
  set(ATTN_CSHARP_PROJECT_URL_ELEMENT "")
  if(ATTN_CSHARP_PROJECT_URL)
    set(ATTN_CSHARP_PROJECT_URL_ELEMENT "    <projectUrl>${ATTN_CSHARP_PROJECT_URL}</projectUrl>\n")
  endif()
  # What mcs builds against: Mono's 4.5 profile (mscorlib 4.0.0.0, no netstandard facades here).
  set(ATTN_CSHARP_TFM net45)
  # The runtime identifier of the natives: this build's OS and CPU (.NET RID names).
  string(TOLOWER "${CMAKE_SYSTEM_NAME}" _os)
  if(_os STREQUAL "darwin")
    set(_os osx)
  endif()
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|x64)$")
    set(_arch x64)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
    set(_arch arm64)
  else()
    string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _arch)
  endif()
  set(ATTN_CSHARP_RID ${_os}-${_arch})
  set(ATTN_CSHARP_DLLIMPORT ${CMAKE_SHARED_LIBRARY_PREFIX}attn_csharp)   # UseSWIG's -dllimport
  set(ATTN_CSHARP_GLUE_NAME ${CMAKE_SHARED_LIBRARY_PREFIX}attn_csharp${CMAKE_SHARED_LIBRARY_SUFFIX})
  set(ATTN_CSHARP_CORE_NAME
      ${CMAKE_SHARED_LIBRARY_PREFIX}attn${CMAKE_SHARED_LIBRARY_SUFFIX}.${ATTN_SOVERSION})
  set(ATTN_CSHARP_OUT ${_out})
  set(ATTN_CSHARP_PKG_STAGE ${_out}/nuget)
  set(ATTN_CSHARP_NATIVE_STAGE ${ATTN_CSHARP_PKG_STAGE}/runtimes/${ATTN_CSHARP_RID}/native)
  set(ATTN_CSHARP_NUSPEC ${ATTN_CSHARP_PKG_STAGE}/LibAttn.nuspec)
  set(_asminfo ${CMAKE_CURRENT_BINARY_DIR}/csharp_gen/AssemblyInfo.cs)
  configure_file(${_src}/AssemblyInfo.cs.in ${_asminfo} @ONLY)

  # --- LibAttn.dll (+ LibAttn.xml): SWIG's raw classes (internal) + the face ------------------
  # check_generated.cmake: every raw method loads the natives first, one DllImport name.
  # CS1591 (a public member without an XML comment) stays a warning, so a value added to an enum
  # of attn.h does not break the build before it is documented.
  # gen_enums.cmake: the public enums (Status, Operand, Param, ...) from SWIG's internal ones.
  set(_face ${_src}/Attention.cs ${_src}/AttentionDesc.cs ${_src}/AttentionArgs.cs
            ${_src}/AttentionException.cs ${_src}/AttnDescHandle.cs ${_src}/AttnArgsHandle.cs
            ${_src}/NativeLoader.cs)
  set(_enums ${CMAKE_CURRENT_BINARY_DIR}/csharp_gen/Enums.g.cs)
  add_custom_command(
    OUTPUT ${_out}/LibAttn.dll ${_out}/LibAttn.xml
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
    COMMAND ${CMAKE_COMMAND} -DGENERATED=${_gen} -DDLLIMPORT=${ATTN_CSHARP_DLLIMPORT}
            -P ${_src}/check_generated.cmake
    COMMAND ${CMAKE_COMMAND} -DGENERATED=${_gen} -DOUTPUT=${_enums} -P ${_src}/gen_enums.cmake
    COMMAND ${_mcs} -warnaserror-:1591 -target:library -unsafe -out:${_out}/LibAttn.dll
            -doc:${_out}/LibAttn.xml "-recurse:${_gen}/*.cs" ${_enums} ${_face} ${_asminfo}
    DEPENDS attn_csharp ${_face} ${_asminfo} ${_src}/check_generated.cmake
            ${_src}/gen_enums.cmake
    COMMENT "mcs LibAttn.dll"
    VERBATIM)

  # --- tests, demo, bench --------------------------------------------------------------------
  # One file per topic; TestSupport.cs holds the helpers they share.
  set(_tests)
  foreach(_t TestSupport SharedVectorTests ApiTests ErrorTests ConcurrencyTests ParameterTests
             OperandTests ArgsTests IntrospectionTests VariantVectorTests VarlenTests
             PagedCacheTests MergeTests ServingErrorTests ConversionTests StorageTypeTests
             BackwardTests TypedAppendTests ErrorVectorTests PackagingTests ComputeModeTests
             StorageFp8Tests)
    list(APPEND _tests ${PROJECT_SOURCE_DIR}/tests/csharp/${_t}.cs)
  endforeach()
  # A test file missing from the list above would never run: refuse to configure instead.
  file(GLOB _all_tests ${PROJECT_SOURCE_DIR}/tests/csharp/*.cs)
  list(REMOVE_ITEM _all_tests ${_tests} ${PROJECT_SOURCE_DIR}/tests/csharp/ThreadFailureChild.cs)
  if(_all_tests)
    message(FATAL_ERROR "cmake/csharp.cmake: add ${_all_tests} to the C# test files")
  endif()
  add_custom_command(
    OUTPUT ${_out}/LibAttn.Tests.dll
    COMMAND ${_mcs} -target:library -unsafe -r:${_out}/LibAttn.dll -r:${ATTN_NUNIT_FRAMEWORK_DLL}
            -out:${_out}/LibAttn.Tests.dll ${_tests}
    DEPENDS ${_out}/LibAttn.dll ${_tests}
    COMMENT "mcs LibAttn.Tests.dll"
    VERBATIM)

  # The thread-start failure child: its own process, since it lowers RLIMIT_AS.
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

  # --- the NuGet package's files, staged in its layout in csharp/nuget/ ------------------------
  # stage_package.cmake copies LibAttn.dll/.xml to lib/<tfm>/, the glue (RUNPATH rewritten to
  # exactly $ORIGIN) and libattn under its SONAME to runtimes/<rid>/native/, and checks the
  # SONAMEs, NEEDED and RUNPATH with readelf.
  set(_staged ${ATTN_CSHARP_PKG_STAGE}/lib/${ATTN_CSHARP_TFM}/LibAttn.dll
              ${ATTN_CSHARP_PKG_STAGE}/lib/${ATTN_CSHARP_TFM}/LibAttn.xml
              ${ATTN_CSHARP_NATIVE_STAGE}/${ATTN_CSHARP_GLUE_NAME}
              ${ATTN_CSHARP_NATIVE_STAGE}/${ATTN_CSHARP_CORE_NAME})
  add_custom_command(
    OUTPUT ${_staged}
    COMMAND ${CMAKE_COMMAND} -DSTAGE=${ATTN_CSHARP_PKG_STAGE} -DTFM=${ATTN_CSHARP_TFM}
            -DRID=${ATTN_CSHARP_RID} -DDLL=${_out}/LibAttn.dll -DXML=${_out}/LibAttn.xml
            -DGLUE=$<TARGET_FILE:attn_csharp> -DGLUE_NAME=${ATTN_CSHARP_GLUE_NAME}
            -DCORE=$<TARGET_FILE:attn> -DCORE_NAME=${ATTN_CSHARP_CORE_NAME}
            -DREADELF=${CMAKE_READELF} -P ${_src}/nuget/stage_package.cmake
    DEPENDS ${_out}/LibAttn.dll ${_out}/LibAttn.xml attn_csharp attn
            ${_src}/nuget/stage_package.cmake
    COMMENT "Staging the NuGet package LibAttn (natives with RUNPATH $ORIGIN)"
    VERBATIM)
  configure_file(${PROJECT_SOURCE_DIR}/LICENSE ${ATTN_CSHARP_PKG_STAGE}/LICENSE.txt COPYONLY)
  configure_file(${_src}/nuget/LibAttn.targets.in ${ATTN_CSHARP_PKG_STAGE}/build/LibAttn.targets
                 @ONLY)
  configure_file(${_src}/nuget/LibAttn.transitive.targets.in
                 ${ATTN_CSHARP_PKG_STAGE}/buildTransitive/LibAttn.targets @ONLY)
  configure_file(${_src}/nuget/LibAttn.nuspec.in ${ATTN_CSHARP_NUSPEC} @ONLY)

  set(_test_assemblies "")
  if(ATTN_BUILD_TESTS)
    set(_test_assemblies ${_out}/LibAttn.Tests.dll ${_out}/ThreadFailureChild.exe)
  endif()
  add_custom_target(attn_csharp_assemblies ALL
    DEPENDS ${_out}/LibAttn.dll ${_test_assemblies} ${_out}/AttnDemo.exe
            ${_out}/AttnBench.exe ${_staged})
  # For tests/consumer/csharp (configured before this file is included): where the nuspec is.
  set_target_properties(attn_csharp_assemblies PROPERTIES
    ATTN_NUSPEC ${ATTN_CSHARP_NUSPEC}
    ATTN_PACKAGE_VERSION ${PROJECT_VERSION}
    ATTN_PACKAGE_TFM ${ATTN_CSHARP_TFM}
    ATTN_PACKAGE_RID ${ATTN_CSHARP_RID}
    ATTN_GLUE_NAME ${ATTN_CSHARP_GLUE_NAME}
    ATTN_CORE_NAME ${ATTN_CSHARP_CORE_NAME})

  # `cmake --build <build> --target attn_csharp_nupkg` -> csharp/nupkg/LibAttn.<version>.nupkg.
  # nuget (Debian package nuget, 2.8.7 on Mono) wants a writable HOME; not part of ALL.
  find_program(ATTN_NUGET_EXECUTABLE nuget)
  if(ATTN_NUGET_EXECUTABLE)
    add_custom_target(attn_csharp_nupkg
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}/nupkg
      COMMAND ${ATTN_NUGET_EXECUTABLE} pack ${ATTN_CSHARP_NUSPEC} -NonInteractive
              -OutputDirectory ${_out}/nupkg
      COMMENT "nuget pack LibAttn ${PROJECT_VERSION} -> ${_out}/nupkg"
      VERBATIM)
    add_dependencies(attn_csharp_nupkg attn_csharp_assemblies)
  endif()

  # --- install (component csharp): LibAttn.dll + .xml and the glue ----------------------------
  # The glue goes beside libattn.so.0 (RUNPATH $ORIGIN). LibAttn.dll goes to
  # ATTN_INSTALL_CSHARPDIR, by default the same folder, where NativeLoader finds the glue beside
  # it; elsewhere (e.g. lib/cli/libattn) it finds the glue by name only if the library folder is
  # on the loader's path (LD_LIBRARY_PATH, ld.so.conf).
  set(ATTN_INSTALL_CSHARPDIR ${CMAKE_INSTALL_LIBDIR} CACHE STRING
      "Install folder of LibAttn.dll and LibAttn.xml (relative to the prefix)")
  install(TARGETS attn_csharp
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT csharp)
  install(FILES ${_out}/LibAttn.dll ${_out}/LibAttn.xml
    DESTINATION ${ATTN_INSTALL_CSHARPDIR} COMPONENT csharp)

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
  if(NOT ATTN_BUILD_TESTS) # -DATTN_BUILD_TESTS=OFF: the binding, the package, no tests
    return()
  endif()
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
  # Worker threads that cannot start under a lowered soft RLIMIT_AS. The child
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
