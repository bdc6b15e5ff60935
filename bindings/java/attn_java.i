/* Java binding of libattn: SWIG module + Java typemaps, then the language-neutral allow-list.
 *
 * Generated at build time by cmake/java.cmake (UseSWIG, C++ wrapper, package org.libattn):
 *   AttnNative.java, AttnNativeJNI.java   raw wrappers, package-private (final class)
 *   attn_status.java, attn_causal.java,   raw enums, package-private; the public enums Status,
 *   attn_operand.java                     Causal and Operand (bindings/java/src) map onto them
 * Nothing else may be generated: an unmapped pointer type would add a SWIGTYPE_p_* class, which
 * java.cmake does not compile, so the build fails loudly instead of exposing it.
 *
 * Typemap catalogue (the raw layer is only called by the face in bindings/java/src, which checks
 * kinds, byte order and lengths against attn_desc_required_len before calling; the checks here
 * are a second line of defence, so a mistake in the face gives an exception, not a wild pointer):
 *   [A] const float *q, *k, *v; float *out, *lse, *weights  ->  Object: float[] (critical
 *       array access, zero copy) or a direct FloatBuffer (GetDirectBufferAddress; its address
 *       must be 4-byte aligned, which a view of a ByteBuffer sliced at an odd offset is not),
 *       or null.
 *   [B] const bool *pad_mask, *key_valid, *allowed          ->  Object: boolean[] (critical) or
 *       a direct ByteBuffer, or null.
 *       Critical arrays are pinned in the "check" phase, after every "in" typemap has run, and
 *       released in "freearg"; no other JNI call happens in between, so -Xcheck:jni stays quiet.
 *       Inputs are released with JNI_ABORT (nothing to copy back), outputs with mode 0.
 *   [C] attn_desc *, const attn_desc *                       ->  long handle
 *       attn_desc **desc                                    ->  long[1] out parameter
 *   [D] size_t                                              ->  long (negative: exception)
 *   [E] attn_status as a return value                       ->  void; a status other than
 *       ATTN_OK throws org.libattn.AttentionException(status, attn_last_error()) from the same
 *       native call ("ret" typemap, after the arrays are released), so the message is always
 *       the failing call's own, read on its own thread.
 *   [F] enums                                               ->  package-private Java enums with
 *       the values of attn.h (%javaconst(1): no JNI getter per constant).
 */
%module AttnNative

%include "enums.swg"
%javaconst(1);

/* ---- [F] raw enums: package-private, fast code <-> constant lookup ---------------------- */
%typemap(javaclassmodifiers) enum SWIGTYPE "enum"
%typemap(javabody) enum SWIGTYPE %{
  final int swigValue() {
    return swigValue;
  }

  static $javaclassname swigToEnum(int swigValue) {
    $javaclassname[] all = SwigValues.ALL;
    if (swigValue >= 0 && swigValue < all.length && all[swigValue].swigValue == swigValue)
      return all[swigValue];
    for ($javaclassname e : all)
      if (e.swigValue == swigValue)
        return e;
    return null;
  }

  @SuppressWarnings("unused")
  private $javaclassname() {
    this.swigValue = SwigNext.next++;
  }

  @SuppressWarnings("unused")
  private $javaclassname(int swigValue) {
    this.swigValue = swigValue;
    SwigNext.next = swigValue + 1;
  }

  private final int swigValue;

  private static class SwigNext {
    private static int next = 0;
  }

  /* Initialised on first lookup, after the constants exist (values() is null while they are built). */
  private static class SwigValues {
    private static final $javaclassname[] ALL = $javaclassname.values();
  }
%}

/* ---- raw classes stay inside the package; the library is loaded once ----------------- */
%pragma(java) jniclassclassmodifiers = "final class"
%pragma(java) moduleclassmodifiers = "final class"
%pragma(java) jniclasscode = %{
  static {
    NativeLoader.load();
  }
%}

%{
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attn.h"

/* Classes resolved once in JNI_OnLoad (global references, valid for the life of the VM). */
static jclass attn_jni_float_array;   /* float[]                        */
static jclass attn_jni_bool_array;    /* boolean[]                      */
static jclass attn_jni_float_buffer;  /* java.nio.FloatBuffer           */
static jclass attn_jni_byte_buffer;   /* java.nio.ByteBuffer            */
static jclass attn_jni_exception;     /* org.libattn.AttentionException */
static jmethodID attn_jni_exception_ctor; /* AttentionException(int, byte[]) */

/* Set when pinning a critical array failed in this thread's current call (almost impossible:
 * HotSpot only copies under -Xcheck:jni); the action is then skipped and this message thrown. */
static thread_local const char *attn_jni_pin_failed = nullptr;

static jclass attn_jni_global_class(JNIEnv *env, const char *name) {
    jclass local = env->FindClass(name);
    if (!local) return nullptr;
    jclass global = (jclass)env->NewGlobalRef(local);
    env->DeleteLocalRef(local);
    return global;
}

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *) {
    JNIEnv *env = nullptr;
    if (vm->GetEnv((void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    attn_jni_float_array = attn_jni_global_class(env, "[F");
    attn_jni_bool_array = attn_jni_global_class(env, "[Z");
    attn_jni_float_buffer = attn_jni_global_class(env, "java/nio/FloatBuffer");
    attn_jni_byte_buffer = attn_jni_global_class(env, "java/nio/ByteBuffer");
    attn_jni_exception = attn_jni_global_class(env, "org/libattn/AttentionException");
    if (!attn_jni_float_array || !attn_jni_bool_array || !attn_jni_float_buffer ||
        !attn_jni_byte_buffer || !attn_jni_exception)
        return JNI_ERR;
    attn_jni_exception_ctor = env->GetMethodID(attn_jni_exception, "<init>", "(I[B)V");
    if (!attn_jni_exception_ctor) return JNI_ERR;
    return JNI_VERSION_1_8;
}

/* Throw AttentionException(status, message of this thread's failing call). The message goes
 * over as UTF-8 bytes (decoded in Java): NewStringUTF would need modified UTF-8. */
static void attn_jni_throw(JNIEnv *jenv, attn_status status) {
    const char *msg = attn_jni_pin_failed ? attn_jni_pin_failed : attn_last_error();
    attn_jni_pin_failed = nullptr;
    if (jenv->ExceptionCheck()) return; /* e.g. OutOfMemoryError from a failed pin: keep it */
    if (!msg) msg = "";
    jsize len = (jsize)strlen(msg);
    jbyteArray bytes = jenv->NewByteArray(len);
    if (!bytes) return;
    jenv->SetByteArrayRegion(bytes, 0, len, (const jbyte *)msg);
    jobject ex = jenv->NewObject(attn_jni_exception, attn_jni_exception_ctor, (jint)status, bytes);
    if (ex) jenv->Throw((jthrowable)ex);
    jenv->DeleteLocalRef(bytes);
    if (ex) jenv->DeleteLocalRef(ex);
}
%}

/* ---- [A] [B] array parameters ------------------------------------------------------------- */
%define ATTN_JAVA_ARRAY(CTYPE, NAME, ARRAY_CLASS, BUFFER_CLASS, JAVA_KINDS, RELEASE_MODE)
%typemap(jni) CTYPE NAME "jobject"
%typemap(jtype) CTYPE NAME "Object"
%typemap(jstype) CTYPE NAME "Object"
%typemap(javain) CTYPE NAME "$javainput"
%typemap(in) CTYPE NAME (jarray crit = nullptr) %{
  $1 = nullptr;
  if ($input) {
    if (jenv->IsInstanceOf($input, ARRAY_CLASS)) {
      crit = (jarray)$input; /* pinned in the check phase, after every "in" has run */
    } else if (jenv->IsInstanceOf($input, BUFFER_CLASS)) {
      $1 = ($1_ltype)jenv->GetDirectBufferAddress($input);
      if (!$1) {
        SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                                "NAME: the buffer is not direct");
        return $null;
      }
      if ((uintptr_t)$1 % sizeof(*$1) != 0) {
        SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                                "NAME: the buffer's address is not aligned to its element size");
        return $null;
      }
    } else {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                              "NAME: expected " JAVA_KINDS);
      return $null;
    }
  }
%}
%typemap(check) CTYPE NAME %{
  if (crit$argnum && !attn_jni_pin_failed) {
    $1 = ($1_ltype)jenv->GetPrimitiveArrayCritical(crit$argnum, nullptr);
    if (!$1) attn_jni_pin_failed = "NAME: could not pin the Java array (GetPrimitiveArrayCritical)";
  }
%}
%typemap(freearg) CTYPE NAME %{
  if (crit$argnum && $1) jenv->ReleasePrimitiveArrayCritical(crit$argnum, (void *)$1, RELEASE_MODE);
%}
%enddef

ATTN_JAVA_ARRAY(const float *, q, attn_jni_float_array, attn_jni_float_buffer,
                "float[] or a direct FloatBuffer", JNI_ABORT)
ATTN_JAVA_ARRAY(const float *, k, attn_jni_float_array, attn_jni_float_buffer,
                "float[] or a direct FloatBuffer", JNI_ABORT)
ATTN_JAVA_ARRAY(const float *, v, attn_jni_float_array, attn_jni_float_buffer,
                "float[] or a direct FloatBuffer", JNI_ABORT)
ATTN_JAVA_ARRAY(float *, out, attn_jni_float_array, attn_jni_float_buffer,
                "float[] or a direct FloatBuffer", 0)
ATTN_JAVA_ARRAY(float *, lse, attn_jni_float_array, attn_jni_float_buffer,
                "float[] or a direct FloatBuffer", 0)
ATTN_JAVA_ARRAY(float *, weights, attn_jni_float_array, attn_jni_float_buffer,
                "float[] or a direct FloatBuffer", 0)
ATTN_JAVA_ARRAY(const bool *, pad_mask, attn_jni_bool_array, attn_jni_byte_buffer,
                "boolean[] or a direct ByteBuffer", JNI_ABORT)
ATTN_JAVA_ARRAY(const bool *, key_valid, attn_jni_bool_array, attn_jni_byte_buffer,
                "boolean[] or a direct ByteBuffer", JNI_ABORT)
ATTN_JAVA_ARRAY(const bool *, allowed, attn_jni_bool_array, attn_jni_byte_buffer,
                "boolean[] or a direct ByteBuffer", JNI_ABORT)

/* Functions taking arrays: skip the C call if a pin failed (the "ret" typemap then throws). */
%define ATTN_JAVA_PINNED_CALL(NAME)
%exception NAME %{
  if (attn_jni_pin_failed) {
    result = ATTN_ERR_OUT_OF_MEMORY;
  } else {
    $action
  }
%}
%enddef
ATTN_JAVA_PINNED_CALL(attn_simple)
ATTN_JAVA_PINNED_CALL(attn_forward)
ATTN_JAVA_PINNED_CALL(attn_weights)

/* ---- [C] descriptor handles -------------------------------------------------------------- */
%typemap(jni) attn_desc *, const attn_desc * "jlong"
%typemap(jtype) attn_desc *, const attn_desc * "long"
%typemap(jstype) attn_desc *, const attn_desc * "long"
%typemap(javain) attn_desc *, const attn_desc * "$javainput"
%typemap(in) attn_desc *, const attn_desc * %{ $1 = ($1_ltype)(intptr_t)$input; %}

%typemap(jni) attn_desc **desc "jlongArray"
%typemap(jtype) attn_desc **desc "long[]"
%typemap(jstype) attn_desc **desc "long[]"
%typemap(javain) attn_desc **desc "$javainput"
%typemap(in) attn_desc **desc (attn_desc *handle = nullptr) %{
  if (!$input || jenv->GetArrayLength($input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "desc: expected a long[1]");
    return $null;
  }
  $1 = &handle;
%}
%typemap(argout) attn_desc **desc %{
  {
    jlong h = (jlong)(intptr_t)handle$argnum;
    jenv->SetLongArrayRegion($input, 0, 1, &h);
  }
%}

/* ---- [D] size_t as long ------------------------------------------------------------------ */
%typemap(jni) size_t "jlong"
%typemap(jtype) size_t "long"
%typemap(jstype) size_t "long"
%typemap(javain) size_t "$javainput"
%typemap(javaout) size_t { return $jnicall; }
%typemap(in) size_t %{
  if ($input < 0) {
    char attn_msg[96];
    snprintf(attn_msg, sizeof attn_msg, "$1_name (%lld) is negative", (long long)$input);
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, attn_msg);
    return $null;
  }
  $1 = (size_t)$input;
%}
%typemap(out) size_t %{ $result = (jlong)$1; %}

/* ---- [E] status returns become exceptions ------------------------------------------------ */
%typemap(jni) attn_status "void"
%typemap(jtype) attn_status "void"
%typemap(jstype) attn_status "void"
%typemap(javaout) attn_status { $jnicall; }
%typemap(out) attn_status ""
%typemap(ret) attn_status %{
  if ($1 != ATTN_OK) attn_jni_throw(jenv, $1);
%}
/* ... but attn_status_string(attn_status status) takes it as a plain enum */
%typemap(jni) attn_status status "jint"
%typemap(jtype) attn_status status "int"
%typemap(jstype) attn_status status "attn_status"
%typemap(javain) attn_status status "$javainput.swigValue()"
%typemap(in) attn_status status %{ $1 = (attn_status)$input; %}

%include "../attn.i"
