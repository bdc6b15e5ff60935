# ctest java_demo: run the Java demo (under -Xcheck:jni), require exit 0 and no JNI warning, and
# require exactly the C demo's text.
#   cmake -DJAVA=<java> -DLIBDIR=<dir of libattn_java.so> -DCLASSPATH=<attn.jar:demo.jar>
#         [-DC_DEMO=<attn_demo>] -P java_demo_check.cmake
# Without C_DEMO (C demo not built) only the Java demo's own check (out[1][0] == 15) applies.
execute_process(
  COMMAND "${JAVA}" -Xcheck:jni "-Djava.library.path=${LIBDIR}" -cp "${CLASSPATH}" Demo
  RESULT_VARIABLE rc OUTPUT_VARIABLE java_out ERROR_VARIABLE java_err)
message("${java_out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "Java demo failed (exit ${rc}): ${java_err}")
endif()
if("${java_out}${java_err}" MATCHES "WARNING in native method|Warning: Calling other JNI|JNI local refs")
  message(FATAL_ERROR "-Xcheck:jni complained while the Java demo ran")
endif()
if(C_DEMO)
  execute_process(COMMAND "${C_DEMO}" RESULT_VARIABLE rc OUTPUT_VARIABLE c_out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "C demo ${C_DEMO} failed (exit ${rc})")
  endif()
  if(NOT java_out STREQUAL c_out)
    message(FATAL_ERROR "the Java demo's output differs from the C demo's:\n--- C ---\n${c_out}")
  endif()
  message("identical to the C demo's output")
endif()
