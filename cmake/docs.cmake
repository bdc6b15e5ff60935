# Reference documentation (included from the top-level CMakeLists.txt): Doxygen turns the doc
# blocks of capi/attn.h into HTML and into the man page attn(3).
#   switch ATTN_BUILD_DOCS   AUTO (on when doxygen is found), ON, OFF: cmake/features.cmake
#   target attn_docs         part of ALL (doxygen takes well under a second on one header)
#   installed (component dev) ${CMAKE_INSTALL_DOCDIR}/html/index.html ...
#                             ${CMAKE_INSTALL_MANDIR}/man3/attn.3
# Doxygen's warnings (undocumented items in capi/attn.h, ...) never fail the build: they are
# written to <build>/docs/doxygen-warnings.log and their count is printed when the docs are built.
#
# This file has a second role: run as a script (cmake -DATTN_DOCS_STEP=run -P docs.cmake) it is the
# build step itself: doxygen, then doxygen's man page attn.h.3 renamed to attn.3 (name and title
# included), then the warning count.

if(CMAKE_SCRIPT_MODE_FILE)
  # ---------------------------------------------------------------------------------------------
  # Script mode. Inputs: DOXYGEN DOXYFILE OUT_DIR WARN_LOG STAMP.
  foreach(_v DOXYGEN DOXYFILE OUT_DIR WARN_LOG STAMP)
    if(NOT DEFINED ${_v})
      message(FATAL_ERROR "docs.cmake: -D${_v}=... is required")
    endif()
  endforeach()
  # A fresh output folder: nothing stale (a page of a removed function) survives a rebuild.
  file(REMOVE_RECURSE "${OUT_DIR}/html" "${OUT_DIR}/man")
  file(REMOVE "${WARN_LOG}")
  execute_process(COMMAND "${DOXYGEN}" "${DOXYFILE}" RESULT_VARIABLE _rc
                  OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "doxygen ${DOXYFILE} failed (${_rc}):\n${_out}\n${_err}")
  endif()
  set(_page "${OUT_DIR}/man/man3/attn.h.3")
  if(NOT EXISTS "${_page}" OR NOT EXISTS "${OUT_DIR}/html/index.html")
    message(FATAL_ERROR "doxygen did not write ${_page} and ${OUT_DIR}/html/index.html: is the "
                        "@file block of cmake/attn.dox still naming attn.h?")
  endif()
  # attn.h.3 -> attn.3: `man 3 attn`, and the page calls itself attn(3).
  file(READ "${_page}" _man)
  string(REGEX REPLACE "^\\.TH \"attn\\.h\" 3" ".TH \"attn\" 3" _man "${_man}")
  string(REPLACE "\n.SH NAME\nattn.h \\- " "\n.SH NAME\nattn \\- " _man "${_man}")
  file(WRITE "${OUT_DIR}/man/man3/attn.3" "${_man}")
  file(REMOVE "${_page}")
  # Doxygen writes one page per documented struct as well; the C API has none today, so attn.3
  # is the only page. Say so if that changes, rather than installing pages silently or not at all.
  file(GLOB _pages "${OUT_DIR}/man/man3/*")
  list(REMOVE_ITEM _pages "${OUT_DIR}/man/man3/attn.3")
  if(_pages)
    message(WARNING "doxygen wrote man pages that are not installed: ${_pages}")
  endif()
  set(_n 0)
  if(EXISTS "${WARN_LOG}")
    file(STRINGS "${WARN_LOG}" _warnings REGEX "warning:")
    list(LENGTH _warnings _n)
  endif()
  if(_n GREATER 0)
    message(STATUS "doxygen: ${_n} warning(s) about capi/attn.h, see ${WARN_LOG}")
  endif()
  file(TOUCH "${STAMP}")
  return()
endif()

# -----------------------------------------------------------------------------------------------
# Configure mode.
# ATTN_BUILD_DOCS and doxygen (DOXYGEN_EXECUTABLE): cmake/features.cmake.
if(NOT ATTN_BUILD_DOCS)
  return()
endif()

set(ATTN_DOCS_OUTPUT_DIR "${CMAKE_BINARY_DIR}/docs")
set(ATTN_DOCS_WARN_LOG "${ATTN_DOCS_OUTPUT_DIR}/doxygen-warnings.log")
set(_attn_docs_inputs "${PROJECT_SOURCE_DIR}/capi/attn.h" "${CMAKE_CURRENT_LIST_DIR}/attn.dox")
list(JOIN _attn_docs_inputs " " ATTN_DOCS_INPUT)
configure_file("${CMAKE_CURRENT_LIST_DIR}/Doxyfile.in" "${ATTN_DOCS_OUTPUT_DIR}/Doxyfile" @ONLY)

set(_attn_docs_stamp "${ATTN_DOCS_OUTPUT_DIR}/docs.stamp")
add_custom_command(
  OUTPUT "${_attn_docs_stamp}"
  BYPRODUCTS "${ATTN_DOCS_OUTPUT_DIR}/html/index.html" "${ATTN_DOCS_OUTPUT_DIR}/man/man3/attn.3"
             "${ATTN_DOCS_WARN_LOG}"
  COMMAND ${CMAKE_COMMAND} "-DDOXYGEN=${DOXYGEN_EXECUTABLE}"
          "-DDOXYFILE=${ATTN_DOCS_OUTPUT_DIR}/Doxyfile" "-DOUT_DIR=${ATTN_DOCS_OUTPUT_DIR}"
          "-DWARN_LOG=${ATTN_DOCS_WARN_LOG}" "-DSTAMP=${_attn_docs_stamp}"
          -P "${CMAKE_CURRENT_LIST_FILE}"
  DEPENDS ${_attn_docs_inputs} "${ATTN_DOCS_OUTPUT_DIR}/Doxyfile" "${CMAKE_CURRENT_LIST_FILE}"
  WORKING_DIRECTORY "${ATTN_DOCS_OUTPUT_DIR}"
  COMMENT "Doxygen: HTML reference and attn(3) from capi/attn.h"
  VERBATIM)
add_custom_target(attn_docs ALL DEPENDS "${_attn_docs_stamp}")

install(DIRECTORY "${ATTN_DOCS_OUTPUT_DIR}/html/" DESTINATION "${CMAKE_INSTALL_DOCDIR}/html"
        COMPONENT dev)
install(FILES "${ATTN_DOCS_OUTPUT_DIR}/man/man3/attn.3" DESTINATION "${CMAKE_INSTALL_MANDIR}/man3"
        COMPONENT dev)
