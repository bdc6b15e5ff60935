# ctest <lang>_demo: run a language's demo, require exit 0, and require exactly the C demo's text.
#   cmake -DNAME=<language> "-DDEMO_CMD=<program>|<arg>|..." [-DC_DEMO=<attn_demo>]
#         [-DFAIL_REGEX=<regex>] -P demo_check.cmake
# DEMO_CMD separates the program and its arguments with "|" (a ";" would split the ctest argument).
# FAIL_REGEX fails the test when the demo's output or errors match it (e.g. -Xcheck:jni warnings).
# Without C_DEMO (C demo not built) only the demo's own check (out[1][0] == 15) applies.
string(REPLACE "|" ";" _cmd "${DEMO_CMD}")
execute_process(COMMAND ${_cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE demo_out ERROR_VARIABLE demo_err)
message("${demo_out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NAME} demo failed (exit ${rc}): ${demo_err}")
endif()
if(FAIL_REGEX AND "${demo_out}${demo_err}" MATCHES "${FAIL_REGEX}")
  message(FATAL_ERROR "${NAME} demo printed a forbidden message (${FAIL_REGEX}):\n${demo_err}")
endif()
if(C_DEMO)
  execute_process(COMMAND "${C_DEMO}" RESULT_VARIABLE rc OUTPUT_VARIABLE c_out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "C demo ${C_DEMO} failed (exit ${rc})")
  endif()
  if(NOT demo_out STREQUAL c_out)
    message(FATAL_ERROR "the ${NAME} demo's output differs from the C demo's:\n--- C ---\n${c_out}")
  endif()
  message("identical to the C demo's output")
endif()
