/* JNI glue of the Java binding: the calls that take Java arrays and direct buffers (declared in
 * attn_jni.h, wrapped by SWIG through attn_java.i, called only by the face in src/).
 *
 * Every call follows one order: classify each object (JNI calls allowed), pin every array at
 * once with GetPrimitiveArrayCritical, then plain C calls only (bind, run), then release every
 * pin. An array passed twice is pinned once, so the library sees one address and reports "out
 * overlaps q" even under -Xcheck:jni (which pins copies). Empty arrays point at a static dummy:
 * "given, 0 elements", so the library names them as too short. This file knows no operand: each
 * object comes with its attn_dtype and direction, and it checks only what C cannot see (that
 * the Java object holds that element type; lengths for the calls that take none). */
#include "attn_jni.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static jclass buffer_class;    /* java.nio.Buffer */
static jclass exception_class; /* org.libattn.AttentionException */
static jmethodID exception_of; /* AttentionException.forStatus(int, byte[]) */
/* The Java types of each attn_dtype (F32 F16 BF16 I8 U8 I32 FP8_E4M3 FP8_E5M2): arrays, then
 * buffers. */
enum { DTYPES = 8 };
static const char *const kind_names[DTYPES][3] = {
    {"[F", "java/nio/FloatBuffer", 0},   {"[S", "java/nio/ShortBuffer", 0},
    {"[S", "java/nio/ShortBuffer", 0},   {"[B", "java/nio/ByteBuffer", 0},
    {"[Z", "[B", "java/nio/ByteBuffer"}, {"[I", "java/nio/IntBuffer", 0},
    {"[B", "java/nio/ByteBuffer", 0},    {"[B", "java/nio/ByteBuffer", 0}};
static jclass kinds[DTYPES][3];

static jclass global_class(JNIEnv *env, const char *name) {
    jclass local = (*env)->FindClass(env, name);
    if (!local) return NULL;
    jclass global = (jclass)(*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    return global;
}

/* The attn_args of the one-call forms, one per thread, made at a thread's first such call and
 * destroyed when the thread ends: a call binds into it and clears it, so no pointer outlives
 * the call. Saves an allocation and a free per call. */
static pthread_key_t args_key;
static int args_key_made;

static void free_args(void *a) {
    attn_args_destroy((attn_args *)a);
}

/* This thread's attn_args, or NULL (out of memory, or no key: then the caller makes its own). */
static attn_args *thread_args(void) {
    if (!args_key_made) return NULL;
    attn_args *a = (attn_args *)pthread_getspecific(args_key);
    if (!a && attn_args_create(&a) == ATTN_OK && pthread_setspecific(args_key, a) != 0) {
        attn_args_destroy(a);
        a = NULL;
    }
    return a;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    JNIEnv *env = NULL;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    args_key_made = pthread_key_create(&args_key, free_args) == 0;
    if (!(buffer_class = global_class(env, "java/nio/Buffer")) ||
        !(exception_class = global_class(env, "org/libattn/AttentionException")))
        return JNI_ERR;
    for (int t = 0; t < DTYPES; ++t)
        for (int i = 0; i < 3 && kind_names[t][i]; ++i)
            if (!(kinds[t][i] = global_class(env, kind_names[t][i]))) return JNI_ERR;
    exception_of = (*env)->GetStaticMethodID(env, exception_class, "forStatus",
                                             "(I[B)Ljava/lang/RuntimeException;");
    return exception_of ? JNI_VERSION_1_8 : JNI_ERR;
}

/* Unloading keeps the threads' attn_args (a few hundred bytes each) rather than leave their
 * destructor pointing into unmapped code. */
JNIEXPORT void JNICALL JNI_OnUnload(JavaVM *vm, void *reserved) {
    (void)vm;
    (void)reserved;
    if (args_key_made) pthread_key_delete(args_key);
    args_key_made = 0;
}

/* The exception of status with attn_last_error() (sent as UTF-8 bytes, which NewStringUTF does
 * not take), unless one is pending already (e.g. an OutOfMemoryError). */
void attn_jni_throw(JNIEnv *env, attn_status status) {
    if ((*env)->ExceptionCheck(env)) return;
    const char *msg = attn_last_error();
    const jsize len = msg ? (jsize)strlen(msg) : 0;
    jbyteArray bytes = (*env)->NewByteArray(env, len);
    if (!bytes) return;
    (*env)->SetByteArrayRegion(env, bytes, 0, len, (const jbyte *)msg);
    jobject ex =
        (*env)->CallStaticObjectMethod(env, exception_class, exception_of, (jint)status, bytes);
    if (ex && !(*env)->ExceptionCheck(env)) (*env)->Throw(env, (jthrowable)ex);
    (*env)->DeleteLocalRef(env, bytes);
}

static void throw_iae(JNIEnv *env, const char *msg) {
    jclass c = (*env)->FindClass(env, "java/lang/IllegalArgumentException");
    if (c) (*env)->ThrowNew(env, c, msg);
}

/* ---- the objects of one call ---------------------------------------------------------------- */
enum { MAX_PINS = 2 * 64 + 4 };

typedef struct {
    jarray arr; /* a critical array, or NULL for a direct buffer */
    void *ptr;
    size_t len;    /* elements: array length or buffer capacity */
    int root;      /* the pin holding this array (an array passed twice is pinned once) */
    int out;       /* released with copy-back (mode 0) rather than JNI_ABORT */
    int code;      /* attn_dtype | ATTN_JNI_OUT: how bind() binds it */
    jobject local; /* a local reference to delete at the end, or NULL */
} pin;

typedef struct {
    JNIEnv *env;
    int n, pinned;
    pin p[MAX_PINS];
} pins;

static char empty_array[8]; /* where an empty array points */

static size_t elem_size(int dtype) {
    static const size_t size[DTYPES] = {4, 2, 2, 1, 1, 4, 1, 1}; /* by attn_dtype */
    return size[dtype];
}

/* Classifies obj, a primitive array or a direct buffer of attn_dtype `dtype`; -1 with an
 * exception pending when it cannot be used (name: for the message). */
static int add(pins *s, jobject obj, int dtype, int out, int owned, const char *name) {
    JNIEnv *env = s->env;
    const size_t size = dtype >= 0 && dtype < DTYPES ? elem_size(dtype) : 1;
    int ok = 0;
    char msg[128];
    for (int i = 0; dtype >= 0 && dtype < DTYPES && i < 3 && kinds[dtype][i] && !ok; ++i)
        ok = (*env)->IsInstanceOf(env, obj, kinds[dtype][i]);
    if (!ok || s->n == MAX_PINS) {
        snprintf(msg, sizeof msg, "%s: %s", name,
                 ok ? "too many arrays and buffers in one call" : "not of its element type");
        if (owned) (*env)->DeleteLocalRef(env, obj);
        throw_iae(env, msg);
        return -1;
    }
    pin *x = &s->p[s->n];
    memset(x, 0, sizeof *x);
    x->root = s->n;
    x->out = out;
    x->local = owned ? obj : NULL;
    const int self = s->n++;
    if ((*env)->IsInstanceOf(env, obj, buffer_class)) {
        x->ptr = (*env)->GetDirectBufferAddress(env, obj);
        if (!x->ptr || (uintptr_t)x->ptr % size != 0) {
            snprintf(msg, sizeof msg, "%s: %s", name,
                     x->ptr ? "the buffer's address is not aligned to its element size"
                            : "the buffer is not direct");
            x->ptr = NULL;
            throw_iae(env, msg);
            return -1;
        }
        x->len = (size_t)(*env)->GetDirectBufferCapacity(env, obj);
        return self;
    }
    x->arr = (jarray)obj;
    x->len = (size_t)(*env)->GetArrayLength(env, x->arr);
    for (int k = 0; k < self; ++k)
        if (s->p[k].arr && s->p[k].root == k && (*env)->IsSameObject(env, s->p[k].arr, obj)) {
            x->root = k;
            s->p[k].out |= out;
            break;
        }
    return self;
}

static void release(pins *s) {
    for (int i = s->pinned - 1; i >= 0; --i) {
        pin *x = &s->p[i];
        if (x->arr && x->root == i && x->ptr && x->ptr != empty_array)
            (*s->env)->ReleasePrimitiveArrayCritical(s->env, x->arr, x->ptr,
                                                     x->out ? 0 : JNI_ABORT);
    }
    s->pinned = 0;
}

/* Pins every array; false (nothing pinned, an OutOfMemoryError pending) if one cannot be. */
static int pin_all(pins *s) {
    for (int i = 0; i < s->n; ++i, s->pinned = i) {
        pin *x = &s->p[i];
        if (!x->arr || x->root != i) continue;
        x->ptr = x->len ? (*s->env)->GetPrimitiveArrayCritical(s->env, x->arr, NULL) : empty_array;
        if (!x->ptr) {
            release(s);
            jclass c = (*s->env)->FindClass(s->env, "java/lang/OutOfMemoryError");
            if (c) (*s->env)->ThrowNew(s->env, c, "could not pin a Java array");
            return 0;
        }
    }
    s->pinned = s->n;
    for (int i = 0; i < s->n; ++i)
        if (s->p[i].root != i) s->p[i].ptr = s->p[s->p[i].root].ptr;
    return 1;
}

static void done(pins *s) {
    release(s);
    for (int i = 0; i < s->n; ++i)
        if (s->p[i].local) (*s->env)->DeleteLocalRef(s->env, s->p[i].local);
}

/* Reads objs (by attn_operand value) and codes (attn_dtype | ATTN_JNI_OUT); index[w] = the pin
 * of operand w or -1. 0 with an exception pending on failure. */
static int collect(pins *s, jobjectArray objs, jintArray codes, int *index, int count) {
    JNIEnv *env = s->env;
    for (int w = 0; w < count; ++w) index[w] = -1;
    if (!objs) return 1;
    jint code[64];
    const jsize n = (*env)->GetArrayLength(env, objs);
    if (n > count || !codes || (*env)->GetArrayLength(env, codes) < n) {
        throw_iae(env, "operands: more than attn_operand has, or fewer codes");
        return 0;
    }
    (*env)->GetIntArrayRegion(env, codes, 0, n, code);
    for (jsize w = 0; w < n; ++w) {
        jobject obj = (*env)->GetObjectArrayElement(env, objs, w);
        if ((*env)->ExceptionCheck(env)) return 0;
        if (!obj) continue;
        const char *name = "operand";
        attn_operand_info((attn_operand)w, &name, NULL, NULL, NULL, NULL);
        index[w] = add(s, obj, code[w] & 7, code[w] & ATTN_JNI_OUT, 1, name);
        if (index[w] < 0) return 0;
        s->p[index[w]].code = code[w];
    }
    return 1;
}

static attn_status bind(attn_args *a, attn_operand w, int code, void *p, size_t n) {
    const int out = code & ATTN_JNI_OUT;
    switch (code & 7) {
    case ATTN_DTYPE_F16:
        return out ? attn_args_set_out_f16(a, w, p, n) : attn_args_set_f16(a, w, p, n);
    case ATTN_DTYPE_BF16:
        return out ? attn_args_set_out_bf16(a, w, p, n) : attn_args_set_bf16(a, w, p, n);
    case ATTN_DTYPE_I8:
        return out ? attn_args_set_out_i8(a, w, p, n) : attn_args_set_i8(a, w, p, n);
    case ATTN_DTYPE_U8:
        return attn_args_set_u8(a, w, p, n);
    case ATTN_DTYPE_I32:
        return attn_args_set_i32(a, w, p, n);
    case ATTN_DTYPE_FP8_E4M3:
    case ATTN_DTYPE_FP8_E5M2:
        return out ? attn_args_set_out_fp8(a, w, (attn_dtype)(code & 7), p, n)
                   : attn_args_set_fp8(a, w, (attn_dtype)(code & 7), p, n);
    default:
        return out ? attn_args_set_out_f32(a, w, p, n) : attn_args_set_f32(a, w, p, n);
    }
}

/* Binds the pinned operands into a (cleared first), but for K and V when `caches` is set. */
static attn_status bind_all(attn_args *a, const pins *s, const int *index, int count, int caches) {
    attn_status st = attn_args_clear(a);
    for (int w = 0; w < count && st == ATTN_OK; ++w) {
        if (index[w] < 0 || (caches && (w == ATTN_K || w == ATTN_V))) continue;
        const pin *x = &s->p[index[w]];
        st = bind(a, (attn_operand)w, x->code, x->ptr, x->len);
    }
    return st;
}

attn_status attn_jni_call(JNIEnv *env, int call, const attn_desc *desc, attn_args *a,
                          jobjectArray objs, jintArray codes, attn_args *b, jobjectArray objs2,
                          jintArray codes2) {
    enum { N = 64 };
    pins s;
    int ia[N], ib[N];
    s.env = env;
    s.n = s.pinned = 0;
    attn_args *own = NULL;
    attn_status st = ATTN_ERR_INVALID_ARGUMENT;
    if ((*env)->EnsureLocalCapacity(env, MAX_PINS + 8) != 0) return ATTN_ERR_OUT_OF_MEMORY;
    if (!collect(&s, objs, codes, ia, N) || !collect(&s, objs2, codes2, ib, N) || !pin_all(&s))
        goto out;
    if (!a && call != ATTN_JNI_MERGE) { /* the one-call forms: this thread's attn_args */
        if (!(a = thread_args())) {
            if ((st = attn_args_create(&own)) != ATTN_OK) goto out;
            a = own;
        }
    }
    /* attn_kv_append: K and V are the caches it writes, passed beside args */
    st = a ? bind_all(a, &s, ia, N, call == ATTN_JNI_KV_APPEND) : ATTN_OK;
    if (st == ATTN_OK && b) st = bind_all(b, &s, ib, N, 0);
    if (st == ATTN_OK) {
        switch (call) {
        case ATTN_JNI_KV_APPEND: {
            const pin *k = ia[ATTN_K] >= 0 ? &s.p[ia[ATTN_K]] : NULL;
            const pin *v = ia[ATTN_V] >= 0 ? &s.p[ia[ATTN_V]] : NULL;
            st = attn_kv_append(desc, a, k ? (float *)k->ptr : NULL, k ? k->len : 0,
                                v ? (float *)v->ptr : NULL, v ? v->len : 0);
            break;
        }
        case ATTN_JNI_KV_APPEND_ARGS:
            st = attn_kv_append_args(desc, a);
            break;
        case ATTN_JNI_MERGE:
            st = attn_merge(desc, a, b);
            break;
        default:
            st = attn_run(desc, (attn_op)call, a);
            break;
        }
    }
    if (a) attn_args_clear(a); /* no pointer outlives its pin */
    if (b) attn_args_clear(b);
out:
    done(&s);
    attn_args_destroy(own);
    return st;
}

/* Pins objs[0..n) (of attn_dtype dtype[i], outputs marked) and returns their addresses advanced
 * by pos[i] elements. These calls take no lengths, so each object must hold pos[i] + need[i]
 * elements (need[i] = SIZE_MAX: not checked). 0 with an exception pending on failure. */
static int pin_objects(pins *s, int n, jobject *objs, const int *dtype, const int *out,
                       const size_t *pos, const size_t *need, const char *const *names,
                       void **ptr) {
    int index[8];
    char msg[160];
    for (int i = 0; i < n; ++i) {
        index[i] = objs[i] ? add(s, objs[i], dtype[i], out[i], 0, names[i]) : -1;
        if (objs[i] && index[i] < 0) return 0;
        const size_t len = index[i] < 0 ? 0 : s->p[index[i]].len;
        if (index[i] >= 0 && need[i] != SIZE_MAX && (pos[i] > len || need[i] > len - pos[i])) {
            snprintf(msg, sizeof msg, "%s has %zu elements, needs at least %zu (%zu + %zu)",
                     names[i], len, pos[i] + need[i], pos[i], need[i]);
            throw_iae(s->env, msg);
            return 0;
        }
    }
    if (!pin_all(s)) return 0;
    for (int i = 0; i < n; ++i)
        ptr[i] = index[i] < 0 ? NULL : (char *)s->p[index[i]].ptr + pos[i] * elem_size(dtype[i]);
    return 1;
}

static size_t product(size_t a, size_t b) {
    return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; /* SIZE_MAX: the library refuses it */
}

attn_status attn_jni_simple(JNIEnv *env, jobject q, jobject k, jobject v, size_t n, size_t d,
                            bool causal, jobject pad_mask, jobject out) {
    pins s;
    s.env = env;
    s.n = s.pinned = 0;
    jobject objs[5] = {q, k, v, pad_mask, out};
    const char *const names[5] = {"q", "k", "v", "pad_mask", "out"};
    const int dtype[5] = {ATTN_DTYPE_F32, ATTN_DTYPE_F32, ATTN_DTYPE_F32, ATTN_DTYPE_U8,
                          ATTN_DTYPE_F32};
    const size_t nd = product(n, d), pos[5] = {0, 0, 0, 0, 0};
    const size_t need[5] = {nd, nd, nd, n, nd};
    const int outs[5] = {0, 0, 0, 0, 1};
    void *p[5];
    attn_status st = ATTN_ERR_INVALID_ARGUMENT;
    if (pin_objects(&s, 5, objs, dtype, outs, pos, need, names, p))
        st = attn_simple(p[0], p[1], p[2], n, d, causal, p[3], p[4]);
    done(&s);
    return st;
}

attn_status attn_jni_convert(JNIEnv *env, int kind, jobject src, size_t src_pos, jobject dst,
                             size_t dst_pos, size_t n) {
    pins s;
    s.env = env;
    s.n = s.pinned = 0;
    const int narrow = kind < 2;
    jobject objs[2] = {src, dst};
    const char *const names[2] = {"src", "dst"};
    const int dtype[2] = {narrow ? ATTN_DTYPE_F32 : ATTN_DTYPE_F16,
                          narrow ? ATTN_DTYPE_F16 : ATTN_DTYPE_F32};
    const size_t pos[2] = {src_pos, dst_pos};
    const size_t need[2] = {n, n};
    const int outs[2] = {0, 1};
    void *p[2];
    attn_status st = ATTN_ERR_INVALID_ARGUMENT;
    if (kind < 0 || kind > 3) {
        throw_iae(env, "kind: not 0 .. 3");
    } else if (pin_objects(&s, 2, objs, dtype, outs, pos, need, names, p)) {
        switch (kind) {
        case 0:
            st = attn_convert_f32_to_f16(p[0], p[1], n);
            break;
        case 1:
            st = attn_convert_f32_to_bf16(p[0], p[1], n);
            break;
        case 2:
            st = attn_convert_f16_to_f32(p[0], p[1], n);
            break;
        default:
            st = attn_convert_bf16_to_f32(p[0], p[1], n);
            break;
        }
    }
    done(&s);
    return st;
}

attn_status attn_jni_quantize_i8(JNIEnv *env, jobject src, size_t src_pos, size_t rows, size_t dim,
                                 jobject dst, size_t dst_pos, jobject scales, size_t scales_pos) {
    pins s;
    s.env = env;
    s.n = s.pinned = 0;
    jobject objs[3] = {src, dst, scales};
    const char *const names[3] = {"src", "dst", "scales"};
    const int dtype[3] = {ATTN_DTYPE_F32, ATTN_DTYPE_I8, ATTN_DTYPE_F32};
    const size_t pos[3] = {src_pos, dst_pos, scales_pos};
    const size_t need[3] = {product(rows, dim), product(rows, dim), rows};
    const int outs[3] = {0, 1, 1};
    void *p[3];
    attn_status st = ATTN_ERR_INVALID_ARGUMENT;
    if (pin_objects(&s, 3, objs, dtype, outs, pos, need, names, p))
        st = attn_quantize_i8(p[0], rows, dim, p[1], p[2]);
    done(&s);
    return st;
}

attn_status attn_jni_fp8(JNIEnv *env, int widen, jobject src, size_t src_pos, size_t rows,
                         size_t dim, attn_dtype fmt, float scale, jobject dst, size_t dst_pos) {
    pins s;
    s.env = env;
    s.n = s.pinned = 0;
    jobject objs[2] = {src, dst};
    const char *const names[2] = {"src", "dst"};
    /* the codes as bytes (I8's Java types); the library judges fmt */
    const int dtype[2] = {widen ? ATTN_DTYPE_I8 : ATTN_DTYPE_F32,
                          widen ? ATTN_DTYPE_F32 : ATTN_DTYPE_I8};
    const size_t pos[2] = {src_pos, dst_pos};
    const size_t need[2] = {product(rows, dim), product(rows, dim)};
    const int outs[2] = {0, 1};
    void *p[2];
    attn_status st = ATTN_ERR_INVALID_ARGUMENT;
    if (pin_objects(&s, 2, objs, dtype, outs, pos, need, names, p))
        st = widen ? attn_dequantize_fp8(p[0], rows, dim, fmt, scale, p[1])
                   : attn_quantize_fp8(p[0], rows, dim, fmt, scale, p[1]);
    done(&s);
    return st;
}
