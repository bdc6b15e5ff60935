# consumer_csharp (cmake -P): does the NuGet package LibAttn work for an outside C# program?
#   1. nuget pack NUSPEC into <tmp>/feed, <tmp> a fresh folder outside the source and build trees
#      (nuget runs with HOME=<tmp>/home: its caches and config stay in <tmp>);
#   2. checks the .nupkg's entries (lib/<tfm>/LibAttn.dll + .xml, runtimes/<rid>/native/ glue and
#      libattn, build/ and buildTransitive/LibAttn.targets, LICENSE.txt) and its nuspec's metadata;
#   3. in <tmp>/app: nuget install LibAttn -Version VERSION -Source <tmp>/feed -NoCache (no network),
#      checks the restored glue's SONAME and RUNPATH ($ORIGIN) with readelf;
#   4. mcs App.cs -r:packages/LibAttn.VERSION/lib/<tfm>/LibAttn.dll (the only reference);
#   5. runs `mono App.exe` with LD_LIBRARY_PATH unset and MONO_PATH = the package's lib/<tfm>/ (the
#      equivalent of the restore's reference, without copying anything): the seed example must give
#      exactly 15, the assembly versions must be VERSION, and both natives must be mapped from
#      packages/LibAttn.VERSION/runtimes/<rid>/native/;
#   6. LibAttn.dll alone in a folder, then with the glue but without libattn: the first call must
#      throw a DllNotFoundException (not a TypeInitializationException) naming the missing file.
# Inputs (-D): NUSPEC VERSION TFM RID GLUE_NAME CORE_NAME APP_SOURCE BUILD_DIR SOURCE_DIR NUGET MCS
#              MONO [READELF]
# Set ATTN_KEEP_CONSUMER_TMP=1 in the environment to keep <tmp> for inspection.
cmake_minimum_required(VERSION 3.25)

foreach(_v NUSPEC VERSION TFM RID GLUE_NAME CORE_NAME APP_SOURCE BUILD_DIR SOURCE_DIR NUGET MCS
           MONO)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_csharp.cmake: -D${_v}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${NUSPEC}")
  message(FATAL_ERROR "consumer_csharp: ${NUSPEC} does not exist: build the project first")
endif()

# A fresh temporary folder outside the source and build trees.
if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(_tmp_root "$ENV{TMPDIR}")
else()
  set(_tmp_root "/tmp")
endif()
string(RANDOM LENGTH 10 _rand)
file(REAL_PATH "${_tmp_root}" _tmp_root)
set(TMP "${_tmp_root}/attn-consumer-csharp-${_rand}")
file(REAL_PATH "${BUILD_DIR}" _build_real)
file(REAL_PATH "${SOURCE_DIR}" _source_real)
foreach(_tree "${_build_real}" "${_source_real}")
  string(FIND "${TMP}/" "${_tree}/" _at)
  if(_at EQUAL 0)
    message(FATAL_ERROR "consumer_csharp: ${TMP} is inside ${_tree}; set TMPDIR elsewhere")
  endif()
endforeach()
file(REMOVE_RECURSE "${TMP}")
file(MAKE_DIRECTORY "${TMP}/feed" "${TMP}/home" "${TMP}/app")
message(STATUS "temporary folder: ${TMP}")

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
  message(FATAL_ERROR "consumer_csharp: ${_msg}")
endfunction()

# Runs a command in WORKDIR with a clean environment for nuget and mono; fails the test with its
# output unless it exits 0. OUT_VAR receives stdout + stderr.
set(_env ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH --unset=LD_PRELOAD --unset=MONO_PATH
         --unset=MONO_CONFIG "HOME=${TMP}/home" "XDG_CONFIG_HOME=${TMP}/home/.config"
         "XDG_DATA_HOME=${TMP}/home/.local/share" "XDG_CACHE_HOME=${TMP}/home/.cache")
function(run OUT_VAR WHAT WORKDIR)
  execute_process(COMMAND ${_env} ${ARGN} WORKING_DIRECTORY "${WORKDIR}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    fail("${WHAT} failed (${_rc}):\n  (in ${WORKDIR}) ${_cmd}\n--- stdout\n${_out}\n--- stderr\n${_err}")
  endif()
  set(${OUT_VAR} "${_out}${_err}" PARENT_SCOPE)
endfunction()

function(expect TEXT REGEX WHAT)
  if(NOT TEXT MATCHES "${REGEX}")
    fail("${WHAT}: no match for \"${REGEX}\" in:\n${TEXT}")
  endif()
endfunction()

function(regex_escape OUT TEXT)
  string(REGEX REPLACE "([][.*+?^$()|\\\\])" "\\\\\\1" _e "${TEXT}")
  set(${OUT} "${_e}" PARENT_SCOPE)
endfunction()

# ------------------------------------------------------------------------------------------------
# 1. nuget pack into the local feed.
set(_nupkg "${TMP}/feed/LibAttn.${VERSION}.nupkg")
run(_out "nuget pack" "${TMP}" "${NUGET}" pack "${NUSPEC}" -NonInteractive -OutputDirectory
    "${TMP}/feed")
if(NOT EXISTS "${_nupkg}")
  fail("nuget pack did not write ${_nupkg}:\n${_out}")
endif()
message(STATUS "packed ${_nupkg}")

# 2. The package's entries and metadata.
run(_list "listing the nupkg" "${TMP}" "${CMAKE_COMMAND}" -E tar tf "${_nupkg}")
message(STATUS "nupkg entries:\n${_list}")
foreach(_entry "LibAttn.nuspec" "lib/${TFM}/LibAttn.dll" "lib/${TFM}/LibAttn.xml"
               "runtimes/${RID}/native/${GLUE_NAME}" "runtimes/${RID}/native/${CORE_NAME}"
               "build/LibAttn.targets" "buildTransitive/LibAttn.targets" "LICENSE.txt")
  regex_escape(_re "${_entry}")
  expect("${_list}" "(^|\n)${_re}(\n|$)" "the nupkg lacks ${_entry}")
endforeach()
file(MAKE_DIRECTORY "${TMP}/nuspec")
run(_out "extracting the nuspec" "${TMP}/nuspec" "${CMAKE_COMMAND}" -E tar xf "${_nupkg}"
    LibAttn.nuspec)
file(READ "${TMP}/nuspec/LibAttn.nuspec" _nuspec)
regex_escape(_ver_re "${VERSION}")
expect("${_nuspec}" "<id>LibAttn</id>" "nuspec id")
expect("${_nuspec}" "<version>${_ver_re}</version>" "nuspec version")
expect("${_nuspec}" "<authors>[^<]+</authors>" "nuspec authors")
expect("${_nuspec}" "<description>[^<]+</description>" "nuspec description")
expect("${_nuspec}" "<licenseUrl>https://licenses\\.nuget\\.org/Apache-2\\.0</licenseUrl>"
       "nuspec license (Apache-2.0)")
file(MAKE_DIRECTORY "${TMP}/targets")
run(_out "extracting build/LibAttn.targets" "${TMP}/targets" "${CMAKE_COMMAND}" -E tar xf
    "${_nupkg}" build/LibAttn.targets)
file(READ "${TMP}/targets/build/LibAttn.targets" _targets)
regex_escape(_glue_re "${GLUE_NAME}")
regex_escape(_core_re "${CORE_NAME}")
expect("${_targets}" "runtimes\\\\${RID}\\\\native\\\\${_glue_re}" "build/LibAttn.targets copies the glue")
expect("${_targets}" "runtimes\\\\${RID}\\\\native\\\\${_core_re}" "build/LibAttn.targets copies libattn")

# 3. Restore from the local feed, as a consumer would (no network: only -Source).
set(_app "${TMP}/app")
run(_out "nuget install" "${_app}" "${NUGET}" install LibAttn -Version "${VERSION}" -Source
    "${TMP}/feed" -OutputDirectory packages -NonInteractive -NoCache)
set(_pkg "${_app}/packages/LibAttn.${VERSION}")
set(_lib "${_pkg}/lib/${TFM}")
set(_native "${_pkg}/runtimes/${RID}/native")
foreach(_f "${_lib}/LibAttn.dll" "${_lib}/LibAttn.xml" "${_native}/${GLUE_NAME}"
           "${_native}/${CORE_NAME}")
  if(NOT EXISTS "${_f}")
    fail("nuget install did not restore ${_f}:\n${_out}")
  endif()
endforeach()
message(STATUS "restored ${_pkg}")
if(READELF)
  run(_dyn "readelf" "${_app}" "${READELF}" -d "${_native}/${GLUE_NAME}")
  expect("${_dyn}" "\\(SONAME\\)[^\n]*\\[${_glue_re}\\]" "the glue's SONAME")
  expect("${_dyn}" "\\(NEEDED\\)[^\n]*\\[${_core_re}\\]" "the glue's NEEDED")
  expect("${_dyn}" "\\(RUNPATH\\)[^\n]*\\[\\\$ORIGIN\\]" "the glue's RUNPATH")
  string(REGEX MATCHALL "\\((SONAME|NEEDED|RUNPATH)\\)[^\n]*" _dyn_lines "${_dyn}")
  string(REPLACE ";" "\n  " _dyn_lines "${_dyn_lines}")
  message(STATUS "restored ${GLUE_NAME}:\n  ${_dyn_lines}")
endif()

# 4. Compile against the restored assembly only.
run(_out "mcs App.cs" "${_app}" "${MCS}" -nologo -warnaserror+ -target:exe -out:App.exe
    "-r:${_lib}/LibAttn.dll" "${APP_SOURCE}")

# 5. Run with no LD_LIBRARY_PATH. MONO_PATH is the package's lib/<tfm>/ (what the restore's
#    reference points at); nothing is copied next to App.exe.
run(_out "mono App.exe" "${_app}" "${CMAKE_COMMAND}" -E env "MONO_PATH=${_lib}" "${MONO}" App.exe)
message(STATUS "App.exe:\n${_out}")
regex_escape(_lib_re "${_lib}")
regex_escape(_native_re "${_native}")
expect("${_out}" "LibAttn\\.dll: ${_lib_re}/LibAttn\\.dll" "LibAttn.dll loaded from the package")
expect("${_out}" "assembly version: ${_ver_re}\\.0, file version: ${_ver_re}\\.0, informational version: ${_ver_re}\n"
       "assembly versions")
expect("${_out}" "libattn ${_ver_re}," "the native library's version")
expect("${_out}" "out\\[1\\]\\[0\\] = 15\n" "the seed example (exactly 15)")
expect("${_out}" "native ${_glue_re}: ${_native_re}/${_glue_re}\n"
       "the glue mapped from the package's runtimes folder")
expect("${_out}" "native ${_core_re}: ${_native_re}/${_core_re}\n"
       "libattn mapped from the package's runtimes folder")

# 6. The natives absent: the error names what is missing and where it looked.
foreach(_case bare noattn)
  set(_dir "${TMP}/${_case}")
  file(MAKE_DIRECTORY "${_dir}")
  file(COPY_FILE "${_lib}/LibAttn.dll" "${_dir}/LibAttn.dll")
  file(COPY_FILE "${_app}/App.exe" "${_dir}/App.exe")
  if(_case STREQUAL "noattn")
    file(COPY_FILE "${_native}/${GLUE_NAME}" "${_dir}/${GLUE_NAME}")
  endif()
  run(_out "mono App.exe --expect-missing (${_case})" "${_dir}" "${MONO}" App.exe --expect-missing)
  message(STATUS "without the natives (${_case}):\n${_out}")
  regex_escape(_dir_re "${_dir}")
  expect("${_out}" "^System\\.DllNotFoundException: LibAttn ${_ver_re} could not load its native libraries ${_glue_re} [^\n]* and ${_core_re} "
         "the DllNotFoundException names both libraries")
  if(_case STREQUAL "bare")
    expect("${_out}" "\n  ${_dir_re}/${_glue_re}: no such file\n" "the message lists the assembly's folder")
    expect("${_out}" "\n  ${_dir_re}/runtimes/${RID}/native/${_glue_re}: no such file\n"
           "the message lists runtimes/${RID}/native/")
  else()
    expect("${_out}" "\n  ${_dir_re}/${_glue_re}: ${_core_re}: cannot open shared object file"
           "the message names the missing ${CORE_NAME}")
  endif()
endforeach()

cleanup()
message(STATUS "consumer_csharp: OK")
