/*
 * libattn: exact, masked scaled dot-product attention on the CPU (fp32).
 *
 *   out_i = sum_j softmax_j(scale * q_i . k_j  | key j visible to query i) * v_j
 *
 * This header IS the public API: if it does not appear here, it is not published.
 * It compiles as C99 and as C++ and includes only <stdbool.h>, <stddef.h>, <stdint.h>.
 *
 * Conventions used by every function below
 *   - Shapes are written the way ggml writes them, outermost first:
 *     q: [batch][heads_q][seq_q][head_dim] means element (b, h, i, d) sits at
 *     q[b*batch_stride + h*head_stride + i*row_stride + d]. head_dim is always contiguous.
 *   - Rows are queries, columns are keys. A key j is HIDDEN from query i when any of these holds:
 *       (1) it fails the causal rule (attn_causal),
 *       (2) it is padding: key_valid[b][j] == false,
 *       (3) the caller forbids it: allowed[i][j] == false.
 *     Hidden keys get weight exactly 0.0f and are never read when they are padding (NaN or
 *     garbage in padded K/V rows cannot reach any output).
 *   - A query row with no visible key has output 0, weights 0 and log-sum-exp -INFINITY (never
 *     NaN). NaN/Inf in the K/V/Q values of visible keys propagate as IEEE arithmetic says.
 *   - Bool masks are one byte per element; any nonzero byte reads as true.
 *   - Every function reports failure through its attn_status and a thread-local message
 *     (attn_last_error) naming the argument and the problem. Nothing writes outside the
 *     buffers it was given; no C++ exception ever crosses this interface.
 *
 * Threads: all functions may be called from any number of threads at once. An attn_desc may be
 * shared by many threads for attn_forward / attn_weights / attn_desc_required_len once it is
 * configured; configuration (attn_desc_set_*) is refused once the descriptor has been used.
 */
#ifndef ATTN_H
#define ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ==================================  Export  ================================== */
#if defined(ATTN_STATIC)
#define ATTN_API
#elif defined(_WIN32)
#if defined(ATTN_BUILDING)
#define ATTN_API __declspec(dllexport)
#else
#define ATTN_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#define ATTN_API __attribute__((visibility("default")))
#else
#define ATTN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ==================================  Version  ================================= */
#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 1
#define ATTN_VERSION_PATCH 0
#define ATTN_VERSION_NUMBER                                                                        \
    (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH)
#define ATTN_VERSION_STRING "0.1.0"

/** The library's version as "MAJOR.MINOR.PATCH" (may differ from the header you compiled with).
 *  since 0.1 */
ATTN_API const char *attn_version_string(void);

/** The library's version as MAJOR*10000 + MINOR*100 + PATCH. since 0.1 */
ATTN_API unsigned attn_version_number(void);

/* ==================================  Status  ================================== */
/** Status codes. The values are pinned and never renumbered; new codes only get new values. */
typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_ERR_NULL_POINTER = 1,     /* a required pointer argument was NULL */
    ATTN_ERR_INVALID_ARGUMENT = 2, /* a size, stride, enum value or float is out of range */
    ATTN_ERR_OUT_OF_MEMORY = 3,    /* scratch or a descriptor could not be allocated */
    ATTN_ERR_UNSUPPORTED = 4,      /* valid request this build or CPU cannot serve */
    ATTN_ERR_INTERNAL = 5          /* a bug in libattn; please report it with the message */
} attn_status;

/** A short static description of a status ("ok", "null pointer", ...). Never NULL, also for
 *  values that are not in attn_status ("unknown status"). since 0.1 */
ATTN_API const char *attn_status_string(attn_status status);

/** The message of this thread's most recent failing call, naming the argument and the problem,
 *  e.g. "heads_q (6) is not a multiple of heads_kv (4)". "" if no call on this thread failed yet.
 *  Successful calls leave it unchanged. Valid until the next libattn call on this thread.
 *  since 0.1 */
ATTN_API const char *attn_last_error(void);

/* ================================  Simple API  ================================ */
/** The original one-sequence, one-head attention(Q, K, V, causal, pad_mask).
 *
 *  q:        [n][d] queries, row-major, contiguous
 *  k:        [n][d] keys
 *  v:        [n][d] values
 *  n:        sequence length (> 0); d: vector size (> 0); scale is 1/sqrt(d)
 *  causal:   true = query i sees keys j <= i (ATTN_CAUSAL_TOP_LEFT); false = no causal rule
 *  pad_mask: [n], true = real token, false = padding (never attended, never read); NULL = none
 *  out:      [n][d] written; must not overlap q, k, v or pad_mask
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (q, k, v or out NULL); ATTN_ERR_INVALID_ARGUMENT (n or d is 0,
 *  n*d overflows, out overlaps an input); ATTN_ERR_OUT_OF_MEMORY. since 0.1 */
ATTN_API attn_status attn_simple(const float *q, const float *k, const float *v, size_t n, size_t d,
                                 bool causal, const bool *pad_mask, float *out);

/* ================================  Descriptor  ================================ */
/** Causal rule: which keys j query i may see (before padding and the allowed mask). */
typedef enum attn_causal {
    ATTN_CAUSAL_NONE = 0,     /* every key */
    ATTN_CAUSAL_TOP_LEFT = 1, /* j <= i                      (PyTorch is_causal, ONNX w/o cache) */
    ATTN_CAUSAL_BOTTOM_RIGHT = 2 /* j <= i + (seq_k - seq_q)    (KV-cache / decode alignment) */
} attn_causal;

/** Operands, for attn_desc_set_strides and attn_desc_required_len. Values are pinned. */
typedef enum attn_operand {
    ATTN_Q = 0,         /* [batch][heads_q][seq_q][head_dim]  strided */
    ATTN_K = 1,         /* [batch][heads_kv][seq_k][head_dim] strided */
    ATTN_V = 2,         /* [batch][heads_kv][seq_k][head_dim] strided */
    ATTN_OUT = 3,       /* [batch][heads_q][seq_q][head_dim]  strided */
    ATTN_LSE = 4,       /* [batch][heads_q][seq_q]            contiguous */
    ATTN_WEIGHTS = 5,   /* [batch][heads_q][seq_q][seq_k]     contiguous */
    ATTN_KEY_VALID = 6, /* [batch][seq_k]                     contiguous bytes */
    ATTN_ALLOWED = 7    /* [seq_q][seq_k]                     contiguous bytes */
} attn_operand;

/** Opaque problem descriptor: sizes, causal rule, scale and strides. */
typedef struct attn_desc attn_desc;

/** Create a descriptor with the default configuration: ATTN_CAUSAL_NONE, scale 1/sqrt(head_dim),
 *  contiguous BHSD strides for Q, K, V and OUT.
 *
 *  desc:     receives the new descriptor (set to NULL on failure); free with attn_desc_destroy
 *  batch, heads_q, heads_kv, seq_q, seq_k, head_dim: all > 0; heads_q a multiple of heads_kv
 *            (query head h reads key/value head h / (heads_q / heads_kv): MHA, GQA and MQA)
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc); ATTN_ERR_INVALID_ARGUMENT (a size is 0 or above
 *  2^31-1, heads_q not a multiple of heads_kv, a buffer size overflows size_t);
 *  ATTN_ERR_OUT_OF_MEMORY. since 0.1 */
ATTN_API attn_status attn_desc_create(attn_desc **desc, size_t batch, size_t heads_q,
                                      size_t heads_kv, size_t seq_q, size_t seq_k, size_t head_dim);

/** Free a descriptor. NULL is a no-op. since 0.1 */
ATTN_API void attn_desc_destroy(attn_desc *desc);

/** Set the causal rule.
 *  ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (not an attn_causal value, or the
 *  descriptor was already used). since 0.1 */
ATTN_API attn_status attn_desc_set_causal(attn_desc *desc, attn_causal causal);

/** Set the score scale (applied to q.k before masking and softmax). Any finite value, 0 included.
 *  ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (NaN or infinite, or the descriptor
 *  was already used). since 0.1 */
ATTN_API attn_status attn_desc_set_scale(attn_desc *desc, float scale);

/** Set the element strides of Q, K, V or OUT: element (b, h, s, d) is at
 *  b*batch_stride + h*head_stride + s*row_stride + d. Inputs may use any strides (0 broadcasts).
 *  OUT's strides must nest so that no two rows can overlap: taken from smallest to largest
 *  (ignoring dimensions of size 1), each stride is at least the extent of the dimensions inside
 *  it (the innermost at least head_dim). Every BHSD/BSHD-like layout, padded or not, nests.
 * Examples, with H heads and D = head_dim: BHSD (default): batch_stride = H*S*D, head_stride = S*D,
 * row_stride = D BSHD:           batch_stride = S*H*D, head_stride = D,   row_stride = H*D ATTN_OK;
 * ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (which is not Q/K/V/OUT, the buffer size
 * overflows, OUT strides do not nest, or the descriptor was already used). since 0.1 */
ATTN_API attn_status attn_desc_set_strides(attn_desc *desc, attn_operand which, size_t batch_stride,
                                           size_t head_stride, size_t row_stride);

/** Number of elements (floats, or bytes for masks) the buffer for `which` must hold: from the
 *  dimensions and strides. 0 when desc is NULL or which is not an attn_operand (the message is
 *  set). since 0.1 */
ATTN_API size_t attn_desc_required_len(const attn_desc *desc, attn_operand which);

/* ================================  Attention  ================================= */
/** Attention forward pass: out = softmax(scale * q k^T | visible) v, without ever materialising
 *  a seq_q x seq_k matrix.
 *
 *  q:         [batch][heads_q][seq_q][head_dim]  (strides: ATTN_Q)
 *  k:         [batch][heads_kv][seq_k][head_dim] (strides: ATTN_K)
 *  v:         [batch][heads_kv][seq_k][head_dim] (strides: ATTN_V)
 *  key_valid: [batch][seq_k] bytes, true = real token, false = padding; NULL = all real
 *  allowed:   [seq_q][seq_k] bytes, true = query i may see key j, broadcast over batch and heads;
 *             NULL = all allowed
 *  out:       [batch][heads_q][seq_q][head_dim]  (strides: ATTN_OUT) written; only the elements
 *             the strides address are written; must not overlap any other argument
 *  lse:       [batch][heads_q][seq_q] natural-log log-sum-exp of the scaled visible scores
 *             (-INFINITY for a row with no visible key); NULL = not wanted
 *  Results are bit-identical whatever the thread count.
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc, q, k, v or out); ATTN_ERR_INVALID_ARGUMENT (out or lse
 *  overlaps another argument); ATTN_ERR_OUT_OF_MEMORY (scratch). since 0.1 */
ATTN_API attn_status attn_forward(const attn_desc *desc, const float *q, const float *k,
                                  const float *v, const bool *key_valid, const bool *allowed,
                                  float *out, float *lse);

/** The attention weight matrix: weights[b][h][i][j] = softmax over visible keys j of
 *  scale * q_i . k_j; hidden keys get exactly 0.0f; each row with a visible key sums to 1.
 *
 *  q, k, key_valid, allowed: as attn_forward
 *  weights:   [batch][heads_q][seq_q][seq_k] contiguous, written; must not overlap an input
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc, q, k or weights); ATTN_ERR_INVALID_ARGUMENT (weights
 *  overlaps an input); ATTN_ERR_OUT_OF_MEMORY. since 0.1 */
ATTN_API attn_status attn_weights(const attn_desc *desc, const float *q, const float *k,
                                  const bool *key_valid, const bool *allowed, float *weights);

/* ==============================  Threads and ISA  ============================= */
/** Set the number of threads attention calls use (the caller counts as one). 0 = the default:
 *  the ATTN_NUM_THREADS environment variable if set, else the hardware thread count. Safe to
 *  call while other threads compute: running calls finish with the count they started with.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (n > 256); ATTN_ERR_OUT_OF_MEMORY. since 0.1 */
ATTN_API attn_status attn_set_num_threads(size_t n);

/** The number of threads attention calls use now. since 0.1 */
ATTN_API size_t attn_get_num_threads(void);

/** Name of the kernel in use: "scalar", "sse2", "avx2" or "avx512". It is the best the CPU
 *  supports, capped by the ATTN_ISA environment variable or attn_set_isa. since 0.1 */
ATTN_API const char *attn_isa(void);

/** Cap the kernel (process-wide) at `name` ("scalar", "sse2", "avx2", "avx512"), or restore the
 *  default with NULL or "". Affects calls that start afterwards.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (unknown name); ATTN_ERR_UNSUPPORTED (this CPU or build
 *  lacks it). since 0.1 */
ATTN_API attn_status attn_set_isa(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_H */
