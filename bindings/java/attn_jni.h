/* The Java binding's JNI glue (attn_jni.c), wrapped by SWIG (attn_java.i: the JNIEnv is the
 * caller's, an attn_status other than ATTN_OK becomes the exception of attn_jni_throw). Objects
 * are Java primitive arrays (pinned for the call, zero copy) or direct buffers (by address). */
#ifndef ATTN_JNI_H
#define ATTN_JNI_H

#include <jni.h>
#include <stdbool.h>
#include <stddef.h>

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attn_jni_call's operand codes: attn_dtype | ATTN_JNI_OUT (bound with attn_args_set_out_*). */
#define ATTN_JNI_OUT 8
/* attn_jni_call's calls besides the attn_op values (attn_run). */
#define ATTN_JNI_KV_APPEND 16      /* attn_kv_append: K and V of objs are the caches */
#define ATTN_JNI_KV_APPEND_ARGS 17 /* attn_kv_append_args */
#define ATTN_JNI_MERGE 18          /* attn_merge(desc, a, b) */

/* Throws the exception of status with this thread's attn_last_error(). */
void attn_jni_throw(JNIEnv *jenv, attn_status status);

/* Binds objs (Object[] by attn_operand value; null = not bound) with codes (int[] of the same
 * indexing) into a, and objs2 / codes2 into b, for this call only; runs `call`; unbinds. a NULL
 * (not for MERGE): an attn_args made for the call. */
attn_status attn_jni_call(JNIEnv *jenv, int call, const attn_desc *desc, attn_args *a,
                          jobjectArray objs, jintArray codes, attn_args *b, jobjectArray objs2,
                          jintArray codes2);

/* attn_simple with arrays or buffers (q, k, v, out: floats; pad_mask: booleans or bytes). */
attn_status attn_jni_simple(JNIEnv *jenv, jobject q, jobject k, jobject v, size_t n, size_t d,
                            bool causal, jobject pad_mask, jobject out);

/* attn_convert_*: kind 0 f32 -> f16, 1 f32 -> bf16, 2 f16 -> f32, 3 bf16 -> f32; n values from
 * element src_pos of src to element dst_pos of dst. */
attn_status attn_jni_convert(JNIEnv *jenv, int kind, jobject src, size_t src_pos, jobject dst,
                             size_t dst_pos, size_t n);

/* attn_quantize_i8 from element src_pos of src into dst (from dst_pos) and scales (from
 * scales_pos). */
attn_status attn_jni_quantize_i8(JNIEnv *jenv, jobject src, size_t src_pos, size_t rows, size_t dim,
                                 jobject dst, size_t dst_pos, jobject scales, size_t scales_pos);

/* attn_quantize_fp8 (widen 0: floats src to codes dst) or attn_dequantize_fp8 (widen 1: codes
 * src to floats dst), from element src_pos of src to element dst_pos of dst. */
attn_status attn_jni_fp8(JNIEnv *jenv, int widen, jobject src, size_t src_pos, size_t rows,
                         size_t dim, attn_dtype fmt, float scale, jobject dst, size_t dst_pos);

#ifdef __cplusplus
}
#endif
#endif
