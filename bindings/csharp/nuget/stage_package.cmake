# cmake -P: stage the files of the NuGet package LibAttn in its own layout (nuget 2.8.7 packs
# only files under the nuspec's folder: a src of "/abs/..." or "../..." is silently left out).
#   -DSTAGE=<package folder> -DTFM=net45 -DRID=linux-x64
#   -DDLL=<LibAttn.dll> -DXML=<LibAttn.xml>                      -> lib/<tfm>/
#   -DGLUE=<built libattn_csharp.so> -DGLUE_NAME=libattn_csharp.so -> runtimes/<rid>/native/
#   -DCORE=<built libattn.so.X.Y.Z>  -DCORE_NAME=libattn.so.0    -> runtimes/<rid>/native/
#   [-DREADELF=readelf]
# The glue is copied with its RUNPATH set to exactly $ORIGIN (the build tree's copy points into
# the build folder), so it finds libattn.so.0 beside it wherever the package is restored; libattn
# is copied under its SONAME, the name the glue's DT_NEEDED asks for. With READELF, checks what
# NativeLoader.cs relies on: the glue's SONAME is its file name (glibc's dlopen by name returns the
# preloaded library only if the SONAME matches), it needs CORE_NAME, libattn's SONAME is CORE_NAME.
cmake_minimum_required(VERSION 3.21)
foreach(_v STAGE TFM RID DLL XML GLUE GLUE_NAME CORE CORE_NAME)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "stage_package.cmake: -D${_v}=... is required")
  endif()
endforeach()

set(_lib "${STAGE}/lib/${TFM}")
set(DEST "${STAGE}/runtimes/${RID}/native")
file(MAKE_DIRECTORY "${_lib}" "${DEST}")
file(COPY_FILE "${DLL}" "${_lib}/LibAttn.dll")
file(COPY_FILE "${XML}" "${_lib}/LibAttn.xml")
file(COPY_FILE "${GLUE}" "${DEST}/${GLUE_NAME}")
file(COPY_FILE "${CORE}" "${DEST}/${CORE_NAME}")
# Fails (CMake's own error) if the glue has no RPATH entry to rewrite: do not configure with
# CMAKE_SKIP_RPATH / CMAKE_SKIP_BUILD_RPATH. CMake pads the build RPATH to fit INSTALL_RPATH.
set(_origin "\$ORIGIN")
file(RPATH_SET FILE "${DEST}/${GLUE_NAME}" NEW_RPATH "${_origin}")

if(READELF)
  function(dynamic FILE OUT)
    execute_process(COMMAND "${READELF}" -d "${FILE}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _o
                    ERROR_VARIABLE _e)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "stage_package.cmake: ${READELF} -d ${FILE} failed: ${_e}")
    endif()
    set(${OUT} "${_o}" PARENT_SCOPE)
  endfunction()
  function(expect TEXT REGEX WHAT)
    if(NOT TEXT MATCHES "${REGEX}")
      message(FATAL_ERROR "stage_package.cmake: ${WHAT}; readelf -d says:\n${TEXT}")
    endif()
  endfunction()
  string(REPLACE "." "\\." _glue_re "${GLUE_NAME}")
  string(REPLACE "." "\\." _core_re "${CORE_NAME}")
  dynamic("${DEST}/${GLUE_NAME}" _g)
  expect("${_g}" "\\(SONAME\\)[^\n]*\\[${_glue_re}\\]" "${GLUE_NAME}'s SONAME is not ${GLUE_NAME}")
  expect("${_g}" "\\(NEEDED\\)[^\n]*\\[${_core_re}\\]" "${GLUE_NAME} does not need ${CORE_NAME}")
  expect("${_g}" "\\((RUNPATH|RPATH)\\)[^\n]*\\[\\\$ORIGIN\\]" "${GLUE_NAME}'s RUNPATH is not \$ORIGIN")
  dynamic("${DEST}/${CORE_NAME}" _c)
  expect("${_c}" "\\(SONAME\\)[^\n]*\\[${_core_re}\\]" "libattn's SONAME is not ${CORE_NAME}")
  if(_c MATCHES "\\((RUNPATH|RPATH)\\)")
    message(FATAL_ERROR "stage_package.cmake: ${CORE_NAME} has an RPATH/RUNPATH:\n${_c}")
  endif()
endif()
