# ctest csharp_demo: run the C# demo, require exit 0, and require exactly the C demo's text.
#   cmake -DMONO=<mono> -DDEMO=<AttnDemo.exe> [-DC_DEMO=<attn_demo>] -P csharp_demo_check.cmake
# Without C_DEMO (C demo not built) only the C# demo's own check (out[1][0] == 15) applies.
execute_process(COMMAND ${MONO} ${DEMO} RESULT_VARIABLE rc OUTPUT_VARIABLE cs_out
                ERROR_VARIABLE cs_err)
message("${cs_out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "C# demo failed (exit ${rc}): ${cs_err}")
endif()
if(C_DEMO)
  execute_process(COMMAND ${C_DEMO} RESULT_VARIABLE rc OUTPUT_VARIABLE c_out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "C demo ${C_DEMO} failed (exit ${rc})")
  endif()
  if(NOT cs_out STREQUAL c_out)
    message(FATAL_ERROR "the C# demo's output differs from the C demo's:\n--- C ---\n${c_out}")
  endif()
  message("identical to the C demo's output")
endif()
