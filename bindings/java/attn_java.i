/* Java binding of libattn: SWIG module + Java typemaps, then the language-neutral allow-list.
 *
 * Generated at build time by cmake/java.cmake (UseSWIG, C++ wrapper, package org.libattn):
 *   AttnNative.java, AttnNativeJNI.java   raw wrappers, package-private (final class)
 *   attn_status.java, attn_causal.java,   raw enums, package-private; the public enums Status,
 *   attn_operand.java, attn_param.java,   Causal, Operand, Alibi, WeightsMode, Compute,
 *   attn_alibi.java, attn_weights_mode.java, attn_compute.java, attn_diagonal.java,
 *   attn_alibi_form.java, attn_op.java     Diagonal, AlibiForm and Op (bindings/java/src)
 *                                         map onto them
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
 *   [C] attn_desc *, const attn_desc *, attn_args *, const attn_args *  ->  long handle
 *       attn_desc **desc, attn_args **args                              ->  long[1] out parameter
 *   [D] size_t                                              ->  long (negative: exception)
 *       int64_t                                             ->  long
 *   [E] attn_status as a return value                       ->  void; a status other than
 *       ATTN_OK throws from the same native call, with attn_last_error() as the message:
 *       NULL_POINTER a NullPointerException, INVALID_ARGUMENT an IllegalArgumentException, any
 *       other status an org.libattn.AttentionException carrying it ("ret" typemap, after the arrays are released), so the message is always
 *       the failing call's own, read on its own thread.
 *   [F] enums                                               ->  package-private Java enums with
 *       the values of attn.h (%javaconst(1): no JNI getter per constant).
 *   [G] int64_t *value, double *value                       ->  long[1], double[1] out parameters
 *       int *is_float, double *min, double *max             ->  int[1], double[1], double[1],
 *                                                               each may be null (= not wanted)
 *   [H] (const float *data, size_t len), (float *data, size_t len),
 *       (const uint8_t *data, size_t len), (const int32_t *data, size_t len)  of the
 *       attn_args_set_* setters  ->  one Object: a direct FloatBuffer / ByteBuffer / IntBuffer
 *       (address + capacity) or null (unbind). attn_args keeps the pointer after the setter
 *       returns, so a Java array is refused here: the garbage collector may move it once the
 *       call is over. Arrays go through [I], which pins them for exactly one attn_run.
 *   [I] attn_jni_run / attn_jni_kv_append / attn_jni_merge / attn_jni_simple (defined below,
 *       not in attn.h): one JNI call that classifies every operand (float[], boolean[], byte[],
 *       int[] or a direct buffer; the operands come as an Object[] indexed by attn_operand
 *       value), pins every array with GetPrimitiveArrayCritical (an array passed twice is
 *       pinned once, so the library sees one address and reports "out overlaps q" even under
 *       -Xcheck:jni, which pins copies), binds them into the attn_args, runs attn_run /
 *       attn_kv_append / attn_merge (attn_simple), unbinds them and releases the pins (without
 *       an attn_args, attn_jni_run makes the 0.1 calls attn_forward / attn_weights, lengths
 *       checked here as they take none). No JNI call happens while anything is pinned. The face
 *       runs every call through these functions.
 *       attn_jni_run_typed is attn_jni_run with the storage types of Q, K and V (0.2): f16 /
 *       bf16 as short[] or a direct ShortBuffer (attn_args_set_f16 / _bf16), int8 K / V as byte[]
 *       or a direct ByteBuffer (attn_args_set_i8), pinned and bound the same way (zero copy).
 *       attn_jni_kv_append_args: attn_kv_append_args with the caches K and V (any storage type,
 *       their int8 scales) bound writable and pinned with copy-back, the new rows typed.
 *       attn_jni_convert / attn_jni_quantize_i8: attn_convert_* and attn_quantize_i8 with Java
 *       objects (arrays pinned, direct buffers by address) and element offsets, lengths checked
 *       here (the C functions take none).
 *   [J] the serving-layout enumerators (0.2): re-enabled here, not in the shared attn.i.
 *   [K] the backward's operands ATTN_DOUT .. ATTN_DSINKS and the int8 scales ATTN_K_SCALE /
 *       ATTN_V_SCALE (0.2): re-enabled here the same way.
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
static jclass attn_jni_byte_array;    /* byte[]                         */
static jclass attn_jni_int_array;     /* int[]                          */
static jclass attn_jni_short_array;   /* short[]                        */
static jclass attn_jni_float_buffer;  /* java.nio.FloatBuffer           */
static jclass attn_jni_byte_buffer;   /* java.nio.ByteBuffer            */
static jclass attn_jni_int_buffer;    /* java.nio.IntBuffer             */
static jclass attn_jni_short_buffer;  /* java.nio.ShortBuffer           */
static jclass attn_jni_exception;     /* org.libattn.AttentionException */
static jmethodID attn_jni_exception_of; /* AttentionException.forStatus(int, byte[]) */

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
    attn_jni_byte_array = attn_jni_global_class(env, "[B");
    attn_jni_int_array = attn_jni_global_class(env, "[I");
    attn_jni_short_array = attn_jni_global_class(env, "[S");
    attn_jni_float_buffer = attn_jni_global_class(env, "java/nio/FloatBuffer");
    attn_jni_byte_buffer = attn_jni_global_class(env, "java/nio/ByteBuffer");
    attn_jni_int_buffer = attn_jni_global_class(env, "java/nio/IntBuffer");
    attn_jni_short_buffer = attn_jni_global_class(env, "java/nio/ShortBuffer");
    attn_jni_exception = attn_jni_global_class(env, "org/libattn/AttentionException");
    if (!attn_jni_float_array || !attn_jni_bool_array || !attn_jni_byte_array ||
        !attn_jni_int_array || !attn_jni_float_buffer || !attn_jni_byte_buffer ||
        !attn_jni_int_buffer || !attn_jni_short_array || !attn_jni_short_buffer ||
        !attn_jni_exception)
        return JNI_ERR;
    attn_jni_exception_of = env->GetStaticMethodID(attn_jni_exception, "forStatus",
                                                   "(I[B)Ljava/lang/RuntimeException;");
    if (!attn_jni_exception_of) return JNI_ERR;
    return JNI_VERSION_1_8;
}

/* Throw the exception of status with the message of this thread's failing call
 * (AttentionException.forStatus: NullPointerException, IllegalArgumentException or
 * AttentionException). The message goes over as UTF-8 bytes (decoded in Java): NewStringUTF
 * would need modified UTF-8. */
static void attn_jni_throw(JNIEnv *jenv, attn_status status) {
    const char *msg = attn_jni_pin_failed ? attn_jni_pin_failed : attn_last_error();
    attn_jni_pin_failed = nullptr;
    if (jenv->ExceptionCheck()) return; /* e.g. OutOfMemoryError from a failed pin: keep it */
    if (!msg) msg = "";
    jsize len = (jsize)strlen(msg);
    jbyteArray bytes = jenv->NewByteArray(len);
    if (!bytes) return;
    jenv->SetByteArrayRegion(bytes, 0, len, (const jbyte *)msg);
    jobject ex =
        jenv->CallStaticObjectMethod(attn_jni_exception, attn_jni_exception_of, (jint)status, bytes);
    if (jenv->ExceptionCheck()) ex = nullptr; /* e.g. OutOfMemoryError: keep it */
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

/* ---- [C] descriptor and binding-object handles ------------------------------------------ */
%typemap(jni) attn_desc *, const attn_desc *, attn_args *, const attn_args * "jlong"
%typemap(jtype) attn_desc *, const attn_desc *, attn_args *, const attn_args * "long"
%typemap(jstype) attn_desc *, const attn_desc *, attn_args *, const attn_args * "long"
%typemap(javain) attn_desc *, const attn_desc *, attn_args *, const attn_args * "$javainput"
%typemap(in) attn_desc *, const attn_desc *, attn_args *, const attn_args *
  %{ $1 = ($1_ltype)(intptr_t)$input; %}

%define ATTN_JAVA_HANDLE_OUT(CTYPE, NAME)
%typemap(jni) CTYPE **NAME "jlongArray"
%typemap(jtype) CTYPE **NAME "long[]"
%typemap(jstype) CTYPE **NAME "long[]"
%typemap(javain) CTYPE **NAME "$javainput"
%typemap(in) CTYPE **NAME (CTYPE *handle = nullptr) %{
  if (!$input || jenv->GetArrayLength($input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "NAME: expected a long[1]");
    return $null;
  }
  $1 = &handle;
%}
%typemap(argout) CTYPE **NAME %{
  {
    jlong h = (jlong)(intptr_t)handle$argnum;
    jenv->SetLongArrayRegion($input, 0, 1, &h);
  }
%}
%enddef
ATTN_JAVA_HANDLE_OUT(attn_desc, desc)
ATTN_JAVA_HANDLE_OUT(attn_args, args)

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

%typemap(jni) int64_t "jlong"
%typemap(jtype) int64_t "long"
%typemap(jstype) int64_t "long"
%typemap(javain) int64_t "$javainput"
%typemap(in) int64_t %{ $1 = (int64_t)$input; %}

/* ---- [G] scalar out parameters (attn_desc_get_int/_float, attn_param_bounds) -------------- */
%define ATTN_JAVA_SCALAR_OUT(CTYPE, NAME, JNITYPE, JNIARRAY, JAVAARRAY, SETTER, REQUIRED)
%typemap(jni) CTYPE *NAME "JNIARRAY"
%typemap(jtype) CTYPE *NAME "JAVAARRAY"
%typemap(jstype) CTYPE *NAME "JAVAARRAY"
%typemap(javain) CTYPE *NAME "$javainput"
%typemap(in) CTYPE *NAME (CTYPE temp = 0) %{
  $1 = nullptr;
  if ($input && jenv->GetArrayLength($input) >= 1) {
    $1 = &temp;
  } else if ($input || REQUIRED) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                            "NAME: expected a JAVAARRAY of length 1");
    return $null;
  }
%}
%typemap(argout) CTYPE *NAME %{
  if ($1) {
    JNITYPE x = (JNITYPE)temp$argnum;
    jenv->SETTER($input, 0, 1, &x);
  }
%}
%enddef
ATTN_JAVA_SCALAR_OUT(int64_t, value, jlong, jlongArray, long[], SetLongArrayRegion, true)
ATTN_JAVA_SCALAR_OUT(double, value, jdouble, jdoubleArray, double[], SetDoubleArrayRegion, true)
ATTN_JAVA_SCALAR_OUT(int, is_float, jint, jintArray, int[], SetIntArrayRegion, false)
ATTN_JAVA_SCALAR_OUT(double, min, jdouble, jdoubleArray, double[], SetDoubleArrayRegion, false)
ATTN_JAVA_SCALAR_OUT(double, max, jdouble, jdoubleArray, double[], SetDoubleArrayRegion, false)

/* ---- [H] (data, len) pairs of the attn_args setters: direct buffers only ------------------ */
%define ATTN_JAVA_BUFFER_PAIR(CTYPE, BUFFER_CLASS, KIND)
%typemap(jni) (CTYPE data, size_t len) "jobject"
%typemap(jtype) (CTYPE data, size_t len) "Object"
%typemap(jstype) (CTYPE data, size_t len) "Object"
%typemap(javain) (CTYPE data, size_t len) "$javainput"
%typemap(in) (CTYPE data, size_t len) %{
  $1 = nullptr;
  $2 = 0;
  if ($input) {
    if (!jenv->IsInstanceOf($input, BUFFER_CLASS)) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                              "data: expected a direct " KIND " or null (attn_args keeps the "
                              "pointer, and a Java array may move once this call returns: "
                              "pass arrays to attn_jni_run)");
      return $null;
    }
    $1 = ($1_ltype)jenv->GetDirectBufferAddress($input);
    if (!$1) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                              "data: the buffer is not direct");
      return $null;
    }
    if ((uintptr_t)$1 % sizeof(*$1) != 0) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                              "data: the buffer's address is not aligned to its element size");
      return $null;
    }
    $2 = (size_t)jenv->GetDirectBufferCapacity($input);
  }
%}
%enddef
ATTN_JAVA_BUFFER_PAIR(const float *, attn_jni_float_buffer, "FloatBuffer")
ATTN_JAVA_BUFFER_PAIR(float *, attn_jni_float_buffer, "FloatBuffer")
ATTN_JAVA_BUFFER_PAIR(const uint8_t *, attn_jni_byte_buffer, "ByteBuffer")
ATTN_JAVA_BUFFER_PAIR(const int32_t *, attn_jni_int_buffer, "IntBuffer")

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

/* ---- [J] the serving layouts (0.2), enabled for Java here: the operands ATTN_CU_SEQLENS_Q ..
 * ATTN_NEW_V and the parameters ATTN_PARAM_VARLEN .. ATTN_PARAM_BATCH_INVARIANT, then
 * ATTN_PARAM_COMPUTE (its values, attn_compute, are in attn.i's shared list like attn_alibi's).
 * Global-scope (::) renames are more specific than attn.i's `%ignore ""`, so they win although
 * they come first; the shared allow-list stays as it is (C# and Go enable them in their own
 * interfaces).
 * attn_kv_append and attn_merge themselves get no raw wrapper: the face calls them through
 * attn_jni_kv_append / attn_jni_merge ([I]), which pin arrays for exactly one call. ---- */
%rename("%s") ::ATTN_CU_SEQLENS_Q;
%rename("%s") ::ATTN_CU_SEQLENS_K;
%rename("%s") ::ATTN_BLOCK_TABLE;
%rename("%s") ::ATTN_NEW_K;
%rename("%s") ::ATTN_NEW_V;
%rename("%s") ::ATTN_PARAM_VARLEN;
%rename("%s") ::ATTN_PARAM_PAGE_SIZE;
%rename("%s") ::ATTN_PARAM_MAX_PAGES;
%rename("%s") ::ATTN_PARAM_BATCH_INVARIANT;
%rename("%s") ::ATTN_PARAM_COMPUTE;
%rename("%s") ::ATTN_PARAM_DIAGONAL;
%rename("%s") ::ATTN_PARAM_ALIBI_FORM;
/* [K] the backward's operands and the int8 scales (0.2), enabled for Java the same way. */
%rename("%s") ::ATTN_DOUT;
%rename("%s") ::ATTN_DQ;
%rename("%s") ::ATTN_DK;
%rename("%s") ::ATTN_DV;
%rename("%s") ::ATTN_DBIAS;
%rename("%s") ::ATTN_DSINKS;
%rename("%s") ::ATTN_K_SCALE;
%rename("%s") ::ATTN_V_SCALE;
%rename("%s") ::ATTN_NEW_K_SCALE;
%rename("%s") ::ATTN_NEW_V_SCALE;

%include "../attn.i"

/* ---- [I] one-call pinned calls (not in attn.h; the face's only path to the kernels) ------ */
%typemap(in, numinputs=0) JNIEnv *jenv %{ $1 = jenv; %}

%{
/* Element type and direction of each attn_operand (attn.h's table). U16 (short[] or a direct
 * ShortBuffer: f16 / bf16 bit patterns) and I8 (byte[] or a direct ByteBuffer) are the storage
 * types of Q, K and V (K and V only for I8), chosen per call by attn_jni_run_typed's `stores`. */
enum attn_jni_elem { ATTN_JNI_F32_IN, ATTN_JNI_F32_OUT, ATTN_JNI_U8, ATTN_JNI_I32, ATTN_JNI_U16,
                     ATTN_JNI_I8 };

/* Storage codes of attn_jni_run_typed's `stores`: 2 bits per storable operand, Q in bits 0-1,
 * K in 2-3, V in 4-5, DOUT in 6-7, NEW_K in 8-9, NEW_V in 10-11 (the Java face's StorageType
 * ordinals). */
enum attn_jni_store { ATTN_JNI_STORE_F32 = 0, ATTN_JNI_STORE_F16 = 1, ATTN_JNI_STORE_BF16 = 2,
                      ATTN_JNI_STORE_I8 = 3 };

static int attn_jni_store_of(int which, int stores) {
    const int slot = which <= ATTN_V ? which
                     : which == ATTN_DOUT ? 3
                     : which == ATTN_NEW_K ? 4
                     : which == ATTN_NEW_V ? 5
                                           : -1;
    return slot >= 0 ? (stores >> (2 * slot)) & 3 : ATTN_JNI_STORE_F32;
}

static attn_jni_elem attn_jni_elem_of(int which, int stores = 0) {
    switch (attn_jni_store_of(which, stores)) {
    case ATTN_JNI_STORE_F16: case ATTN_JNI_STORE_BF16: return ATTN_JNI_U16;
    case ATTN_JNI_STORE_I8: return ATTN_JNI_I8;
    default: break;
    }
    switch (which) {
    case ATTN_OUT: case ATTN_LSE: case ATTN_WEIGHTS: case ATTN_KEY_MASS:
    case ATTN_DQ: case ATTN_DK: case ATTN_DV: case ATTN_DBIAS: case ATTN_DSINKS:
        return ATTN_JNI_F32_OUT;
    case ATTN_KEY_VALID: case ATTN_ALLOWED: case ATTN_QUERY_VALID: return ATTN_JNI_U8;
    case ATTN_SEQ_LENS_K: case ATTN_CU_SEQLENS_Q: case ATTN_CU_SEQLENS_K: case ATTN_BLOCK_TABLE:
        return ATTN_JNI_I32;
    default: /* Q, K, V, BIAS, ALIBI_SLOPES, SINKS, NEW_K, NEW_V, DOUT, K_SCALE, V_SCALE */
        return ATTN_JNI_F32_IN;
    }
}

static const int attn_jni_operands = 29; /* ATTN_Q .. ATTN_NEW_V_SCALE */
static const char *const attn_jni_operand_names[attn_jni_operands] = {
    "q",    "k",            "v",     "out",         "lse",        "weights",  "key_valid",
    "allowed", "bias", "alibi_slopes", "sinks", "query_valid", "seq_lens_k", "key_mass",
    "cu_seqlens_q", "cu_seqlens_k", "block_table", "new_k", "new_v", "dout", "dq", "dk", "dv",
    "dbias", "dsinks", "k_scale", "v_scale", "new_k_scale", "new_v_scale"};

/* The most objects one call classifies: two operand sets (attn_jni_merge) and two caches
 * (attn_jni_kv_append; the conversions take three). Each element read from an Object[] is a local reference, held until
 * the call ends (the arrays among them must stay referenced while pinned): the helpers reserve
 * room for them first (EnsureLocalCapacity), so -Xcheck:jni sees no excess of local refs. */
static const int attn_jni_max_pins = 2 * attn_jni_operands + 2;

/* Where an empty Java array points: it is "given" (not NULL), holds nothing, is never read. */
static float attn_jni_empty[1];

/* The objects of one call: classified and checked first (JNI calls allowed), then every array
 * pinned at once, then plain C calls only, then every pin released, then the local references
 * this struct took deleted. */
struct attn_jni_pins {
    struct Pin {
        jarray arr;   /* a critical array, or nullptr for a direct buffer */
        void *ptr;
        size_t len;   /* elements: array length or buffer capacity */
        int root;     /* the pin holding this array (an array passed twice is pinned once) */
        bool output;  /* released with mode 0 (copy back) rather than JNI_ABORT */
        jobject local; /* a local reference this struct owns (from an Object[]), or nullptr */
    };
    JNIEnv *env;
    Pin pin[attn_jni_max_pins];
    int n = 0;
    int pinned = 0; /* pins [0, pinned) hold their critical arrays */

    explicit attn_jni_pins(JNIEnv *e) : env(e) {}
    ~attn_jni_pins() {
        release();
        for (int i = 0; i < n; ++i)
            if (pin[i].local) env->DeleteLocalRef(pin[i].local);
    }

    bool fail(const char *name, const char *what) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: %s", name, what);
        SWIG_JavaThrowException(env, SWIG_JavaIllegalArgumentException, msg);
        return false;
    }

    /* Classify obj (non-null) as operand element type e. owned: obj is a local reference to
     * delete at the end (also when this fails). output: written by the call (always for
     * ATTN_JNI_F32_OUT). false: an exception is pending. */
    bool add(jobject obj, attn_jni_elem e, const char *name, int *index, bool owned = false,
             bool output = false) {
        if (n == attn_jni_max_pins) {
            if (owned) env->DeleteLocalRef(obj);
            return fail(name, "too many objects in one call");
        }
        Pin &x = pin[n];
        x.arr = nullptr;
        x.ptr = nullptr;
        x.len = 0;
        x.root = n;
        x.output = output || e == ATTN_JNI_F32_OUT;
        x.local = owned ? obj : nullptr;
        ++n; /* counted at once, so the destructor deletes the reference whatever happens */
        size_t elem = 4;
        bool is_array = false, is_buffer = false;
        if (e == ATTN_JNI_F32_IN || e == ATTN_JNI_F32_OUT) {
            is_array = env->IsInstanceOf(obj, attn_jni_float_array);
            is_buffer = !is_array && env->IsInstanceOf(obj, attn_jni_float_buffer);
            if (!is_array && !is_buffer) return drop(name, "expected float[] or a direct FloatBuffer");
        } else if (e == ATTN_JNI_U8) {
            elem = 1;
            is_array = env->IsInstanceOf(obj, attn_jni_bool_array) ||
                       env->IsInstanceOf(obj, attn_jni_byte_array);
            is_buffer = !is_array && env->IsInstanceOf(obj, attn_jni_byte_buffer);
            if (!is_array && !is_buffer)
                return drop(name, "expected boolean[], byte[] or a direct ByteBuffer");
        } else if (e == ATTN_JNI_I8) {
            elem = 1;
            is_array = env->IsInstanceOf(obj, attn_jni_byte_array);
            is_buffer = !is_array && env->IsInstanceOf(obj, attn_jni_byte_buffer);
            if (!is_array && !is_buffer)
                return drop(name, "expected int8 values: byte[] or a direct ByteBuffer");
        } else if (e == ATTN_JNI_U16) {
            elem = 2;
            is_array = env->IsInstanceOf(obj, attn_jni_short_array);
            is_buffer = !is_array && env->IsInstanceOf(obj, attn_jni_short_buffer);
            if (!is_array && !is_buffer)
                return drop(name, "expected 16-bit values: short[] or a direct ShortBuffer");
        } else {
            is_array = env->IsInstanceOf(obj, attn_jni_int_array);
            is_buffer = !is_array && env->IsInstanceOf(obj, attn_jni_int_buffer);
            if (!is_array && !is_buffer) return drop(name, "expected int[] or a direct IntBuffer");
        }
        const int self = n - 1;
        if (is_array) {
            x.arr = (jarray)obj;
            x.len = (size_t)env->GetArrayLength(x.arr);
            for (int k = 0; k < self; ++k)
                if (pin[k].arr && pin[k].root == k && env->IsSameObject(pin[k].arr, obj)) {
                    x.root = k;
                    pin[k].output = pin[k].output || x.output;
                    break;
                }
        } else {
            x.ptr = env->GetDirectBufferAddress(obj);
            if (!x.ptr) return drop(name, "the buffer is not direct");
            if ((uintptr_t)x.ptr % elem != 0)
                return drop(name, "the buffer's address is not aligned to its element size");
            x.len = (size_t)env->GetDirectBufferCapacity(obj);
        }
        *index = self;
        return true;
    }

    /* add() failed after counting its pin: keep it (its reference is deleted at the end), but
     * as nothing to pin. */
    bool drop(const char *name, const char *what) {
        pin[n - 1].arr = nullptr;
        pin[n - 1].ptr = nullptr;
        return fail(name, what);
    }

    /* Reads ops, an Object[] indexed by attn_operand value (shorter: the rest is null), and
     * classifies every non-null element; index[w] = its pin, or -1. `who` prefixes the operand
     * names in messages ("", "acc's ", "part's "). false: an exception is pending. */
    bool collect(jobjectArray ops, int *index, const char *who, int stores = 0) {
        for (int w = 0; w < attn_jni_operands; ++w) index[w] = -1;
        if (!ops) return true;
        const jsize count = env->GetArrayLength(ops);
        if (count > attn_jni_operands) {
            char what[96];
            snprintf(what, sizeof what, "has %d elements, attn_operand has %d values", (int)count,
                     attn_jni_operands);
            return fail(*who ? who : "operands", what);
        }
        for (jsize w = 0; w < count; ++w) {
            jobject obj = env->GetObjectArrayElement(ops, w);
            if (env->ExceptionCheck()) return false;
            if (!obj) continue;
            char name[64];
            snprintf(name, sizeof name, "%s%s", who, attn_jni_operand_names[w]);
            if (!add(obj, attn_jni_elem_of(w, stores), name, &index[w], true)) return false;
        }
        return true;
    }

    /* Pin every array (only GetPrimitiveArrayCritical from here until release()). */
    bool pin_all() {
        for (int i = 0; i < n; ++i, pinned = i) {
            Pin &x = pin[i];
            if (!x.arr || x.root != i) continue;
            if (x.len == 0) {
                x.ptr = attn_jni_empty;
                continue;
            }
            x.ptr = env->GetPrimitiveArrayCritical(x.arr, nullptr);
            if (!x.ptr) {
                attn_jni_pin_failed = "could not pin a Java array (GetPrimitiveArrayCritical)";
                return false;
            }
        }
        pinned = n;
        for (int i = 0; i < n; ++i)
            if (pin[i].root != i) pin[i].ptr = pin[pin[i].root].ptr;
        return true;
    }

    void release() {
        for (int i = pinned - 1; i >= 0; --i) {
            Pin &x = pin[i];
            if (x.arr && x.root == i && x.ptr && x.ptr != attn_jni_empty)
                env->ReleasePrimitiveArrayCritical(x.arr, x.ptr, x.output ? 0 : JNI_ABORT);
        }
        pinned = 0;
    }

    void *ptr(int i) const { return i >= 0 ? pin[i].ptr : nullptr; }
    size_t len(int i) const { return i >= 0 ? pin[i].len : 0; }
};

/* Room for every local reference a helper may hold (see attn_jni_max_pins). false: an
 * OutOfMemoryError is pending. */
static bool attn_jni_reserve(JNIEnv *env) {
    return env->EnsureLocalCapacity(attn_jni_max_pins + 8) == 0;
}

static attn_status attn_jni_bind(attn_args *a, int which, const attn_jni_pins::Pin &x,
                                 int stores) {
    const attn_operand w = (attn_operand)which;
    switch (attn_jni_store_of(which, stores)) {
    case ATTN_JNI_STORE_F16: return attn_args_set_f16(a, w, (const uint16_t *)x.ptr, x.len);
    case ATTN_JNI_STORE_BF16: return attn_args_set_bf16(a, w, (const uint16_t *)x.ptr, x.len);
    case ATTN_JNI_STORE_I8: return attn_args_set_i8(a, w, (const int8_t *)x.ptr, x.len);
    default: break;
    }
    switch (attn_jni_elem_of(which)) {
    case ATTN_JNI_F32_OUT: return attn_args_set_out_f32(a, w, (float *)x.ptr, x.len);
    case ATTN_JNI_U8: return attn_args_set_u8(a, w, (const uint8_t *)x.ptr, x.len);
    case ATTN_JNI_I32: return attn_args_set_i32(a, w, (const int32_t *)x.ptr, x.len);
    default: return attn_args_set_f32(a, w, (const float *)x.ptr, x.len);
    }
}

/* Binds the pinned operands index[] into a (cleared first), Q/K/V with their storage types. */
static attn_status attn_jni_bind_all(attn_args *a, const attn_jni_pins &pins, const int *index,
                                     int stores = 0) {
    attn_status st = attn_args_clear(a);
    for (int w = 0; w < attn_jni_operands && st == ATTN_OK; ++w)
        if (index[w] >= 0) st = attn_jni_bind(a, w, pins.pin[index[w]], stores);
    return st;
}
%}

%rename("%s") attn_jni_run;
%rename("%s") attn_jni_run_typed;
%rename("%s") attn_jni_convert;
%rename("%s") attn_jni_quantize_i8;
%rename("%s") attn_jni_kv_append;
%rename("%s") attn_jni_kv_append_args;
%rename("%s") attn_jni_merge;
%rename("%s") attn_jni_simple;
%inline %{
/* attn_run with every operand given as a Java object: operands is an Object[] indexed by
 * attn_operand value (null elements, and those past its end, are not bound). Arrays are pinned
 * for this call only. The operands the operation does not read should be null (they would be
 * pinned for nothing). args = NULL makes the 0.1 call instead (attn_forward for FORWARD,
 * attn_weights for WEIGHTS, whose messages name those functions) with the eight 0.1 operands;
 * as those calls take no lengths, the lengths are checked here against attn_desc_required_len.
 * stores: the storage types of Q, K and V (attn_jni_store, 2 bits each: Q bits 0-1, K 2-3, V 4-5;
 * 0 = all fp32): f16 / bf16 operands are short[] or direct ShortBuffers bound with
 * attn_args_set_f16 / _bf16, int8 ones byte[] or direct ByteBuffers bound with attn_args_set_i8
 * (the library refuses what it does not accept, e.g. int8 Q, naming the operand). */
static attn_status attn_jni_run_typed(JNIEnv *jenv, const attn_desc *desc, attn_op op,
                                      attn_args *args, jobjectArray operands, int stores) {
    const bool legacy = !args;
    if (legacy && op != ATTN_OP_FORWARD && op != ATTN_OP_WEIGHTS) {
        SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                                "op: without an attn_args only FORWARD and WEIGHTS run");
        return ATTN_ERR_INVALID_ARGUMENT;
    }
    if (stores < 0 || stores >= 4096) {
        char msg[112];
        snprintf(msg, sizeof msg,
                 "stores (%d) is not 2 bits for each of q, k, v, dout, new_k and new_v", stores);
        SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, msg);
        return ATTN_ERR_INVALID_ARGUMENT;
    }
    if (legacy && stores != 0) {
        SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                                "stores: attn_forward / attn_weights take fp32 q, k and v only");
        return ATTN_ERR_INVALID_ARGUMENT;
    }
    if (!attn_jni_reserve(jenv)) return ATTN_ERR_OUT_OF_MEMORY;
    attn_jni_pins pins(jenv);
    int index[attn_jni_operands];
    if (!pins.collect(operands, index, "", stores)) return ATTN_ERR_INVALID_ARGUMENT;
    for (int w = 0; w < attn_jni_operands; ++w) {
        if (index[w] < 0) continue;
        const char *name = attn_jni_operand_names[w];
        if (legacy && w > ATTN_ALLOWED) {
            pins.fail(name, "is not an operand of attn_forward / attn_weights");
            return ATTN_ERR_INVALID_ARGUMENT;
        }
        const size_t need = legacy && desc ? attn_desc_required_len(desc, (attn_operand)w) : 0;
        if (pins.len(index[w]) < need) {
            char what[96];
            snprintf(what, sizeof what, "has %zu elements, needs at least %zu", pins.len(index[w]),
                     need);
            pins.fail(name, what);
            return ATTN_ERR_INVALID_ARGUMENT;
        }
    }
    if (!pins.pin_all()) return ATTN_ERR_OUT_OF_MEMORY;
    attn_status st;
    if (legacy) {
        void *p[8];
        for (int w = 0; w < 8; ++w) p[w] = pins.ptr(index[w]);
        if (op == ATTN_OP_FORWARD)
            st = attn_forward(desc, (const float *)p[0], (const float *)p[1], (const float *)p[2],
                              (const bool *)p[6], (const bool *)p[7], (float *)p[3],
                              (float *)p[4]);
        else
            st = attn_weights(desc, (const float *)p[0], (const float *)p[1], (const bool *)p[6],
                              (const bool *)p[7], (float *)p[5]);
    } else {
        st = attn_jni_bind_all(args, pins, index, stores);
        if (st == ATTN_OK) st = attn_run(desc, op, args);
        attn_args_clear(args); /* no pointer outlives its pin */
    }
    pins.release();
    return st;
}

/* attn_jni_run_typed with fp32 Q, K and V. */
static attn_status attn_jni_run(JNIEnv *jenv, const attn_desc *desc, attn_op op, attn_args *args,
                                jobjectArray operands) {
    return attn_jni_run_typed(jenv, desc, op, args, operands, 0);
}

/* attn_kv_append with Java objects: operands (as attn_jni_run's: new_k, new_v, seq_lens_k,
 * cu_seqlens_q / _k, block_table) are bound into args for this call only; k_cache and v_cache
 * (float[] or direct FloatBuffers, null = NULL) are written in place. An array given twice is
 * pinned once, so the library reports the overlap ("k_cache overlaps v_cache"). */
static attn_status attn_jni_kv_append(JNIEnv *jenv, const attn_desc *desc, attn_args *args,
                                      jobjectArray operands, jobject k_cache, jobject v_cache) {
    if (!attn_jni_reserve(jenv)) return ATTN_ERR_OUT_OF_MEMORY;
    attn_jni_pins pins(jenv);
    int index[attn_jni_operands], kc = -1, vc = -1;
    if (!pins.collect(operands, index, "")) return ATTN_ERR_INVALID_ARGUMENT;
    if (k_cache && !pins.add(k_cache, ATTN_JNI_F32_OUT, "k_cache", &kc))
        return ATTN_ERR_INVALID_ARGUMENT;
    if (v_cache && !pins.add(v_cache, ATTN_JNI_F32_OUT, "v_cache", &vc))
        return ATTN_ERR_INVALID_ARGUMENT;
    if (!pins.pin_all()) return ATTN_ERR_OUT_OF_MEMORY;
    attn_status st = args ? attn_jni_bind_all(args, pins, index) : ATTN_OK;
    if (st == ATTN_OK)
        st = attn_kv_append(desc, args, (float *)pins.ptr(kc), pins.len(kc), (float *)pins.ptr(vc),
                            pins.len(vc));
    if (args) attn_args_clear(args);
    pins.release();
    return st;
}

/* attn_kv_append_args with Java objects: operands (as attn_jni_run_typed's, with `stores`) are
 * bound into args for this call only, the caches K and V (and the int8 scales K_SCALE /
 * V_SCALE) writable with attn_args_set_out_*: their pins are released with copy-back. */
static attn_status attn_jni_kv_append_args(JNIEnv *jenv, const attn_desc *desc, attn_args *args,
                                           jobjectArray operands, int stores) {
    if (stores < 0 || stores >= 4096) {
        SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                                "stores: not 2 bits for each of q, k, v, dout, new_k and new_v");
        return ATTN_ERR_INVALID_ARGUMENT;
    }
    if (!attn_jni_reserve(jenv)) return ATTN_ERR_OUT_OF_MEMORY;
    attn_jni_pins pins(jenv);
    int index[attn_jni_operands];
    if (!pins.collect(operands, index, "", stores)) return ATTN_ERR_INVALID_ARGUMENT;
    const int caches[4] = {ATTN_K, ATTN_V, ATTN_K_SCALE, ATTN_V_SCALE};
    for (int c = 0; c < 4; ++c)
        if (index[caches[c]] >= 0) pins.pin[pins.pin[index[caches[c]]].root].output = true;
    if (!pins.pin_all()) return ATTN_ERR_OUT_OF_MEMORY;
    attn_status st = args ? attn_args_clear(args) : ATTN_OK;
    for (int w = 0; args && w < attn_jni_operands && st == ATTN_OK; ++w) {
        if (index[w] < 0) continue;
        const attn_jni_pins::Pin &x = pins.pin[index[w]];
        const attn_operand o = (attn_operand)w;
        if (w == ATTN_K || w == ATTN_V) {
            switch (attn_jni_store_of(w, stores)) {
            case ATTN_JNI_STORE_F16: st = attn_args_set_out_f16(args, o, (uint16_t *)x.ptr, x.len); break;
            case ATTN_JNI_STORE_BF16: st = attn_args_set_out_bf16(args, o, (uint16_t *)x.ptr, x.len); break;
            case ATTN_JNI_STORE_I8: st = attn_args_set_out_i8(args, o, (int8_t *)x.ptr, x.len); break;
            default: st = attn_args_set_out_f32(args, o, (float *)x.ptr, x.len); break;
            }
        } else if (w == ATTN_K_SCALE || w == ATTN_V_SCALE) {
            st = attn_args_set_out_f32(args, o, (float *)x.ptr, x.len);
        } else {
            st = attn_jni_bind(args, w, x, stores);
        }
    }
    if (st == ATTN_OK) st = attn_kv_append_args(desc, args);
    if (args) attn_args_clear(args);
    pins.release();
    return st;
}

/* attn_merge with Java objects: acc_operands (out, lse, cu_seqlens_q) are bound into acc and
 * part_operands (out, lse) into part, for this call only; acc's arrays are written in place.
 * An array in both is pinned once, so the library reports the overlap. */
static attn_status attn_jni_merge(JNIEnv *jenv, const attn_desc *desc, attn_args *acc,
                                  jobjectArray acc_operands, attn_args *part,
                                  jobjectArray part_operands) {
    if (!attn_jni_reserve(jenv)) return ATTN_ERR_OUT_OF_MEMORY;
    attn_jni_pins pins(jenv);
    int ia[attn_jni_operands], ip[attn_jni_operands];
    if (!pins.collect(acc_operands, ia, "acc's ") || !pins.collect(part_operands, ip, "part's "))
        return ATTN_ERR_INVALID_ARGUMENT;
    if (!pins.pin_all()) return ATTN_ERR_OUT_OF_MEMORY;
    attn_status st = acc ? attn_jni_bind_all(acc, pins, ia) : ATTN_OK;
    if (st == ATTN_OK && part) st = attn_jni_bind_all(part, pins, ip);
    if (st == ATTN_OK) st = attn_merge(desc, acc, part);
    if (acc) attn_args_clear(acc);
    if (part) attn_args_clear(part);
    pins.release();
    return st;
}

/* attn_simple with Java objects, pinned as attn_jni_run pins them. attn_simple takes no lengths:
 * q, k, v and out must hold n*d elements and pad_mask n (checked here; n*d is not computed when
 * it would overflow: attn_simple refuses those sizes itself). */
static attn_status attn_jni_simple(JNIEnv *jenv, jobject q, jobject k, jobject v, size_t n,
                                   size_t d, bool causal, jobject pad_mask, jobject out) {
    attn_jni_pins pins(jenv);
    jobject ops[5] = {q, k, v, pad_mask, out};
    const attn_jni_elem elem[5] = {ATTN_JNI_F32_IN, ATTN_JNI_F32_IN, ATTN_JNI_F32_IN, ATTN_JNI_U8,
                                   ATTN_JNI_F32_OUT};
    const char *names[5] = {"q", "k", "v", "pad_mask", "out"};
    int index[5];
    size_t nd = 0;
    const bool sized = !__builtin_mul_overflow(n, d, &nd);
    for (int x = 0; x < 5; ++x) {
        index[x] = -1;
        if (ops[x] && !pins.add(ops[x], elem[x], names[x], &index[x]))
            return ATTN_ERR_INVALID_ARGUMENT;
        const size_t need = x == 3 ? n : nd;
        if (ops[x] && sized && pins.pin[index[x]].len < need) {
            char what[96];
            snprintf(what, sizeof what, "has %zu elements, needs at least %zu", pins.pin[index[x]].len,
                     need);
            pins.fail(names[x], what);
            return ATTN_ERR_INVALID_ARGUMENT;
        }
    }
    if (!pins.pin_all()) return ATTN_ERR_OUT_OF_MEMORY;
    void *p[5];
    for (int x = 0; x < 5; ++x) p[x] = pins.ptr(index[x]);
    attn_status st = attn_simple((const float *)p[0], (const float *)p[1], (const float *)p[2], n,
                                 d, causal, (const bool *)p[3], (float *)p[4]);
    pins.release();
    return st;
}

/* src_pos + n elements of a pin (false: the message is thrown). */
static bool attn_jni_span(attn_jni_pins &pins, int i, const char *name, size_t pos, size_t n) {
    const size_t len = pins.len(i);
    if (pos > len || n > len - pos) {
        char what[128];
        snprintf(what, sizeof what, "has %zu elements, needs at least %zu (position) + %zu", len,
                 pos, n);
        return pins.fail(name, what);
    }
    return true;
}

/* attn_convert_* with Java objects, pinned as attn_jni_run pins them: n values from element
 * src_pos of src to element dst_pos of dst (lengths checked here: the C functions take none).
 * kind: 0 f32 -> f16, 1 f32 -> bf16 (src float[] / FloatBuffer, dst short[] / ShortBuffer),
 * 2 f16 -> f32, 3 bf16 -> f32 (the other way round). null src / dst reach C as NULL. */
static attn_status attn_jni_convert(JNIEnv *jenv, int kind, jobject src, size_t src_pos,
                                    jobject dst, size_t dst_pos, size_t n) {
    if (kind < 0 || kind > 3) {
        SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException,
                                "kind: expected 0 (f32 -> f16), 1 (f32 -> bf16), 2 (f16 -> f32) "
                                "or 3 (bf16 -> f32)");
        return ATTN_ERR_INVALID_ARGUMENT;
    }
    const bool narrow = kind < 2;
    attn_jni_pins pins(jenv);
    int is = -1, id = -1;
    if (src && !pins.add(src, narrow ? ATTN_JNI_F32_IN : ATTN_JNI_U16, "src", &is))
        return ATTN_ERR_INVALID_ARGUMENT;
    if (dst && !pins.add(dst, narrow ? ATTN_JNI_U16 : ATTN_JNI_F32_OUT, "dst", &id, false, true))
        return ATTN_ERR_INVALID_ARGUMENT;
    if ((is >= 0 && !attn_jni_span(pins, is, "src", src_pos, n)) ||
        (id >= 0 && !attn_jni_span(pins, id, "dst", dst_pos, n)))
        return ATTN_ERR_INVALID_ARGUMENT;
    if (!pins.pin_all()) return ATTN_ERR_OUT_OF_MEMORY;
    char *s = (char *)pins.ptr(is), *d = (char *)pins.ptr(id);
    if (s) s += src_pos * (narrow ? 4 : 2);
    if (d) d += dst_pos * (narrow ? 2 : 4);
    attn_status st;
    switch (kind) {
    case 0: st = attn_convert_f32_to_f16((const float *)s, (uint16_t *)d, n); break;
    case 1: st = attn_convert_f32_to_bf16((const float *)s, (uint16_t *)d, n); break;
    case 2: st = attn_convert_f16_to_f32((const uint16_t *)s, (float *)d, n); break;
    default: st = attn_convert_bf16_to_f32((const uint16_t *)s, (float *)d, n); break;
    }
    pins.release();
    return st;
}

/* attn_quantize_i8 with Java objects: rows * dim floats from element src_pos of src (float[] /
 * FloatBuffer) into dst (byte[] / ByteBuffer) from dst_pos and rows scales into scales (float[] /
 * FloatBuffer) from scales_pos. Lengths checked here (unless rows * dim overflows: the library
 * refuses that itself). */
static attn_status attn_jni_quantize_i8(JNIEnv *jenv, jobject src, size_t src_pos, size_t rows,
                                        size_t dim, jobject dst, size_t dst_pos, jobject scales,
                                        size_t scales_pos) {
    attn_jni_pins pins(jenv);
    int is = -1, id = -1, isc = -1;
    if (src && !pins.add(src, ATTN_JNI_F32_IN, "src", &is)) return ATTN_ERR_INVALID_ARGUMENT;
    if (dst && !pins.add(dst, ATTN_JNI_I8, "dst", &id, false, true))
        return ATTN_ERR_INVALID_ARGUMENT;
    if (scales && !pins.add(scales, ATTN_JNI_F32_OUT, "scales", &isc))
        return ATTN_ERR_INVALID_ARGUMENT;
    size_t n = 0;
    if (!__builtin_mul_overflow(rows, dim, &n) &&
        ((is >= 0 && !attn_jni_span(pins, is, "src", src_pos, n)) ||
         (id >= 0 && !attn_jni_span(pins, id, "dst", dst_pos, n)) ||
         (isc >= 0 && !attn_jni_span(pins, isc, "scales", scales_pos, rows))))
        return ATTN_ERR_INVALID_ARGUMENT;
    if (!pins.pin_all()) return ATTN_ERR_OUT_OF_MEMORY;
    float *s = (float *)pins.ptr(is), *sc = (float *)pins.ptr(isc);
    int8_t *d = (int8_t *)pins.ptr(id);
    if (s) s += src_pos;
    if (d) d += dst_pos;
    if (sc) sc += scales_pos;
    attn_status st = attn_quantize_i8(s, rows, dim, d, sc);
    pins.release();
    return st;
}
%}
