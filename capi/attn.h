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
 *     NaN); so has a row whose visible keys all score -INFINITY (q . k = -INFINITY). Otherwise
 *     NaN/Inf in the K/V/Q values of visible keys propagate as IEEE arithmetic says.
 *   - Bool masks are one byte per element; any nonzero byte reads as true.
 *   - Alignment: float and int32 buffers 4 bytes (their natural alignment), byte masks none.
 *   - Scores: scale * q.k is computed so that it cannot overflow when the true value is finite
 *     (the scale is folded into q only when |scale| <= 1). On the SIMD kernels a visible weight
 *     smaller than FLT_MIN (about 1.2e-38) may be flushed to 0; the scalar kernel keeps it.
 *   - Environment: ATTN_NUM_THREADS (a whole number 1..256) and ATTN_ISA (a name that
 *     attn_set_isa accepts, exactly) set defaults; any other value is ignored with a one-time
 *     warning on stderr, so a typo is seen rather than silently dropped.
 *   - Every function reports failure through its attn_status and a thread-local message
 *     (attn_last_error) naming the argument and the problem. Nothing writes outside the
 *     buffers it was given; no C++ exception ever crosses this interface.
 *
 * Threads: any function may be called from many threads at once; a configured attn_desc may be
 * shared (attn_forward / attn_weights / attn_desc_required_len), and its configuration is
 * refused once it has been used. Destroying or re-binding an object (attn_desc_destroy,
 * attn_args_destroy, attn_args_set_*) while another thread's call uses it is undefined
 * behaviour (no lock detects it): wait for every call that uses an object to return first.
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
#define ATTN_VERSION_MINOR 2
#define ATTN_VERSION_PATCH 0
#define ATTN_VERSION_NUMBER                                                                        \
    (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH)
#define ATTN_VERSION_STRING "0.2.0"

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
    ATTN_V = 2,         /* [batch][heads_kv][seq_k][head_dim_v] strided */
    ATTN_OUT = 3,       /* [batch][heads_q][seq_q][head_dim_v] strided */
    ATTN_LSE = 4,       /* [batch][heads_q][seq_q]            contiguous */
    ATTN_WEIGHTS = 5,   /* [batch][heads_q][seq_q][seq_k]     contiguous */
    ATTN_KEY_VALID = 6, /* [batch][seq_k]                     contiguous bytes */
    ATTN_ALLOWED = 7,   /* [seq_q][seq_k]                     contiguous bytes */
    /* since 0.2, through attn_args / attn_run (see "Extensible call" below) */
    ATTN_BIAS = 8,         /* f32 [batch][heads_q][seq_q][seq_k] strided (0 broadcasts), input */
    ATTN_ALIBI_SLOPES = 9, /* f32 [heads_q] or [batch][heads_q]  strided (0 broadcasts), input */
    ATTN_SINKS = 10,       /* f32 [heads_q]                      contiguous, input */
    ATTN_QUERY_VALID = 11, /* u8  [batch][seq_q]                 contiguous bytes, input */
    ATTN_SEQ_LENS_K = 12,  /* i32 [batch]                        contiguous, input */
    ATTN_KEY_MASS = 13,    /* f32 [batch][heads_q][seq_k]        contiguous, output */
    /* since 0.2, serving layouts (see "Serving layouts" below) */
    ATTN_CU_SEQLENS_Q = 14, /* i32 [batch + 1] prefix sums of the query lengths (varlen) */
    ATTN_CU_SEQLENS_K = 15, /* i32 [batch + 1] prefix sums of the key lengths (varlen) */
    ATTN_BLOCK_TABLE = 16,  /* i32 [batch][max_pages] page ids of each sequence (paged K/V) */
    ATTN_NEW_K = 17, /* [tokens][heads_kv][head_dim] rows for attn_kv_append(_args): f32 (or the
                        cache's type, attn_kv_append_args) */
    ATTN_NEW_V = 18, /* [tokens][heads_kv][head_dim_v] rows, as ATTN_NEW_K */
    /* since 0.2, ATTN_OP_BACKWARD (see attn_run) */
    ATTN_DOUT = 19,   /* f32 gradient of OUT, in OUT's layout, input */
    ATTN_DQ = 20,     /* f32 gradient of Q, in Q's layout, output */
    ATTN_DK = 21,     /* f32 gradient of K, in K's layout, output */
    ATTN_DV = 22,     /* f32 gradient of V, in V's layout, output */
    ATTN_DBIAS = 23,  /* f32 gradient of BIAS, in BIAS's layout (broadcast dims summed), output */
    ATTN_DSINKS = 24, /* f32 [heads_q] gradient of SINKS, output */
    /* since 0.2, int8 K/V caches; since 0.3 also fp8 (see "Storage types" below) */
    ATTN_K_SCALE = 25, /* f32 [batch][heads_kv][seq_k] scale of each int8 / fp8 K row, strided
                          (zero strides: one per tensor or per KV head), input */
    ATTN_V_SCALE = 26, /* f32 [batch][heads_kv][seq_k] scale of each int8 / fp8 V row, as K's */
    /* since 0.3, int8 new rows for attn_kv_append_args */
    ATTN_NEW_K_SCALE = 27, /* f32 [tokens][heads_kv] scale of each int8 NEW_K row, contiguous */
    ATTN_NEW_V_SCALE = 28, /* f32 [tokens][heads_kv] scale of each int8 NEW_V row, contiguous */
    ATTN_Q_SCALE = 29 /* since 0.3: f32 [heads_q] factor on each head's Q (score pipeline), input */
} attn_operand;

/** Opaque problem descriptor: sizes, causal rule, scale and strides. Every setter of a
 *  descriptor or of an attn_args binding object either succeeds or changes nothing: a call that
 *  fails (whatever its status, ATTN_ERR_OUT_OF_MEMORY included) leaves the object as it was. */
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
 *  Examples, with H heads and D = head_dim. BHSD (the default): batch_stride = H*S*D,
 *  head_stride = S*D, row_stride = D. BSHD: batch_stride = S*H*D, head_stride = D,
 *  row_stride = H*D. In varlen mode (ATTN_PARAM_VARLEN) batch_stride of Q and OUT (and of K and
 *  V without paging) is not used; with a paged cache (ATTN_PARAM_PAGE_SIZE) batch_stride of K
 *  and V is the page stride and row_stride the token stride inside a page.
 *  ATTN_ALIBI_SLOPES (since 0.2) is [batch][heads_q] with no row dimension: slope (b, h) at
 *  b*batch_stride + h*head_stride, row_stride must be 0. Default (0, 1, 0): one [heads_q] row for
 *  every batch entry; (heads_q, 1, 0): per-batch slopes [batch][heads_q]; b is the sequence in
 *  varlen and paged calls. attn_desc_required_len(ATTN_ALIBI_SLOPES) follows the strides.
 *  ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (which is not
 *  Q/K/V/OUT/BIAS/K_SCALE/V_SCALE/ALIBI_SLOPES, the buffer size overflows, OUT strides do not
 *  nest, a nonzero row_stride for ALIBI_SLOPES, or the descriptor was already used).
 *  since 0.1 */
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
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc, q, k or weights); ATTN_ERR_INVALID_ARGUMENT (weights
 *  overlaps an input); ATTN_ERR_OUT_OF_MEMORY. since 0.1 */
ATTN_API attn_status attn_weights(const attn_desc *desc, const float *q, const float *k,
                                  const bool *key_valid, const bool *allowed, float *weights);

/* ===========================  Extensible call (0.2)  ========================== */
/* One call carries every variant: static configuration lives on the descriptor (attn_param,
 * set through attn_desc_set_int / attn_desc_set_float), per-call tensors in an attn_args binding
 * object (typed setters that take the element count, so the library checks every length), and
 * attn_run executes an attn_op. attn_forward and attn_weights are thin wrappers over attn_run.
 *
 * The score pipeline, for batch b, query head h, query i, key j (every step optional):
 *   q_i = q_scale[h] * q_i                               ATTN_Q_SCALE (each element to fp32)
 *   s  = scale * q_i . k_j
 *   s  = softcap * tanh(s / softcap)                     ATTN_PARAM_SOFTCAP > 0
 *   s += bias[b][h][i][j]                                ATTN_BIAS (-INFINITY hides the key,
 *                                                        whatever s is: +INFINITY and NaN too)
 *   s += -slope(b, h) * (diag(i) - j)                    ALiBi (ATTN_ALIBI_SLOPES or the
 *                                                        standard slopes, ATTN_PARAM_ALIBI),
 *                                                        ATTN_PARAM_ALIBI_FORM = LINEAR
 *   s += -slope(b, h) * |diag(i) - j|                    ATTN_PARAM_ALIBI_FORM = SYMMETRIC
 *   key j hidden when it fails the causal rule, the sliding window, is padding (key_valid,
 *   seq_lens_k) or is not allowed; a padded query row (query_valid) is hidden entirely.
 *   w_ij = exp(s_ij - M) / (exp(sink_h - M) + sum_j' exp(s_ij' - M))   (sink term only with
 *                                                        ATTN_SINKS or ATTN_PARAM_SOFTMAX_PLUS_ONE)
 * where diag(i) is the diagonal the window and ALiBi measure from (ATTN_PARAM_DIAGONAL):
 *   ATTN_DIAGONAL_CAUSAL (default): the causal rule's, i for ATTN_CAUSAL_NONE and
 *     ATTN_CAUSAL_TOP_LEFT, i + len_k(b) - len_q(b) for ATTN_CAUSAL_BOTTOM_RIGHT;
 *   ATTN_DIAGONAL_TOP_LEFT: i, whatever the causal rule;
 *   ATTN_DIAGONAL_BOTTOM_RIGHT: i + len_k(b) - len_q(b), whatever the causal rule
 *     (FlashAttention's alignment of window_size and alibi_slopes, causal or not);
 * with len_k(b) = seq_lens_k[b] when that operand is given (varlen: the sequence's key length),
 * else seq_k, and len_q(b) = seq_q (varlen: the sequence's query length). The causal rule keeps
 * its own diagonal whatever ATTN_PARAM_DIAGONAL says: key j fails it iff j > i under TOP_LEFT,
 * j > i + len_k(b) - len_q(b) under BOTTOM_RIGHT; a key is visible only when it passes both the
 * causal rule and the window. slope(b, h) is ATTN_ALIBI_SLOPES[b * batch_stride + h *
 * head_stride] (strides (0, 1): the same [heads_q] slopes for every batch entry; (heads_q, 1):
 * [batch][heads_q], FlashAttention's per-batch alibi_slopes; b is the sequence in varlen and
 * paged calls) or the standard slope of head h. This order (softcap, then bias) is Gemma 2's,
 * FlashAttention's and the one ONNX's reference implementation and conformance data use. With
 * ATTN_PARAM_BIAS_FIRST = 1 the bias is added before the softcap instead, softcap(s + bias), the
 * order ONNX's operator text describes; a -INFINITY bias still hides its key in both orders.
 * Hidden keys get weight exactly 0 and padded keys (key_valid false, j >= seq_lens_k[b]) are
 * never read. A row with no visible key (every key hidden, or every score -INFINITY) has
 * output 0, weights 0 and lse -INFINITY, with or without a sink. */

/** Static parameters of a descriptor. Values are pinned and never renumbered. Each is read and
 *  written as an integer (attn_desc_set_int / attn_desc_get_int) or as a float
 *  (attn_desc_set_float / attn_desc_get_float); attn_param_bounds gives its kind and range. */
typedef enum attn_param {
    /* int, attn_causal; the same as attn_desc_set_causal. Default ATTN_CAUSAL_NONE. */
    ATTN_PARAM_CAUSAL = 0,
    /* float, finite; the same as attn_desc_set_scale. Default 1.0f / sqrtf(head_dim) (the get
     * returns exactly the float the kernels use). */
    ATTN_PARAM_SCALE = 1,
    /* int, >= -1: sliding window, key j visible to query i only if
     * diag(i) - window_left <= j <= diag(i) + window_right; -1 = unbounded (default). diag(i)
     * as "The score pipeline" defines it (ATTN_PARAM_DIAGONAL). With the default diagonal the
     * semantics of ONNX's left/right_window_size, and of FlashAttention's window_size when
     * causal is BOTTOM_RIGHT or seq_q = seq_k; FlashAttention's window_size in every case is
     * ATTN_PARAM_DIAGONAL = ATTN_DIAGONAL_BOTTOM_RIGHT. */
    ATTN_PARAM_WINDOW_LEFT = 2,
    ATTN_PARAM_WINDOW_RIGHT = 3,
    /* float, >= 0: logit softcap c, s = c * tanh(s / c) (Gemma 2); 0 = off (default). s / c is
     * computed as s * (1 / c), or as a division for c below 2^-128 (subnormal), whose
     * reciprocal overflows: every c in the bounds maps a zero score to 0, never NaN. */
    ATTN_PARAM_SOFTCAP = 4,
    /* int, attn_alibi: ALiBi slopes. ATTN_ALIBI_NONE (default), ATTN_ALIBI_OPERAND (slopes
     * from the ATTN_ALIBI_SLOPES operand, required), ATTN_ALIBI_STANDARD (the geometric slopes
     * of Press et al. 2022 for heads_q heads: 2^(-8 (h + 1) / n) for a power of two n, then
     * interleaved slopes of 2n for the remaining heads, as BLOOM computes them; the call
     * computes them, one float per query head, kept by the calling thread for its next call). */
    ATTN_PARAM_ALIBI = 5,
    /* int, 0 or 1: "+1" quiet softmax, the same as a sink logit of 0 for every head. Cannot be
     * combined with the ATTN_SINKS operand. Default 0. */
    ATTN_PARAM_SOFTMAX_PLUS_ONE = 6,
    /* int, 1 .. 2^31-1: size of a V row and of an OUT row (DeepSeek MLA: 192 / 128). Default
     * head_dim. Setting it resets V and OUT to contiguous BHSD strides unless they were set with
     * attn_desc_set_strides (then they are checked again). */
    ATTN_PARAM_HEAD_DIM_V = 7,
    /* int, attn_weights_mode: what ATTN_OP_WEIGHTS writes. Default ATTN_WEIGHTS_SOFTMAX. */
    ATTN_PARAM_WEIGHTS_MODE = 8,
    /* int, 0 or 1: add the bias before the softcap instead of after it (default 0). */
    ATTN_PARAM_BIAS_FIRST = 9,
    /* int, 0 or 1: packed variable-length batch (FlashAttention's varlen layout); seq_q and
     * seq_k become the maximum lengths. See "Serving layouts". Default 0. */
    ATTN_PARAM_VARLEN = 10,
    /* int, 0 .. 2^31-1: tokens per page of a paged K/V cache; 0 = contiguous K/V (default). */
    ATTN_PARAM_PAGE_SIZE = 11,
    /* int, 0 .. 2^31-1: columns of ATTN_BLOCK_TABLE; 0 = ceil(seq_k / page_size) (default). */
    ATTN_PARAM_MAX_PAGES = 12,
    /* int, 0 or 1: batch invariance. A query's output bits then depend only on its own
     * sequence, never on its batch-mates, the batch size, the layout (padded, varlen, paged),
     * the prefill chunk it is in or the thread count: key tiles start at fixed key positions,
     * keys are never split across threads and decode rows take the same kernel as prefill
     * rows. Costs speed on decode-like calls (docs/serving.md). Default 0. */
    ATTN_PARAM_BATCH_INVARIANT = 13,
    /* int, an attn_compute: the arithmetic of ATTN_OP_FORWARD. Default ATTN_COMPUTE_EXACT.
     * since 0.2 */
    ATTN_PARAM_COMPUTE = 14,
    /* int, an attn_diagonal: the diagonal diag(i) the sliding window and ALiBi measure from
     * (see "The score pipeline"); the causal rule is not changed by it. Default
     * ATTN_DIAGONAL_CAUSAL. since 0.3 */
    ATTN_PARAM_DIAGONAL = 15,
    /* int, an attn_alibi_form: LINEAR s += -slope (diag(i) - j) (default; keys after the
     * diagonal get a positive bias), or SYMMETRIC s += -slope |diag(i) - j| (FlashAttention's
     * non-causal ALiBi). The two agree on every key a causal rule on the same diagonal
     * leaves. since 0.3 */
    ATTN_PARAM_ALIBI_FORM = 16
} attn_param;

/** ATTN_PARAM_DIAGONAL values: diag(i) for batch entry b, query i (see "The score pipeline").
 *  since 0.3 */
typedef enum attn_diagonal {
    ATTN_DIAGONAL_CAUSAL = 0,      /* the causal rule's: i + len_k(b) - len_q(b) under
                                      BOTTOM_RIGHT, else i (default) */
    ATTN_DIAGONAL_TOP_LEFT = 1,    /* i */
    ATTN_DIAGONAL_BOTTOM_RIGHT = 2 /* i + len_k(b) - len_q(b) */
} attn_diagonal;

/** ATTN_PARAM_ALIBI_FORM values. since 0.3 */
typedef enum attn_alibi_form {
    ATTN_ALIBI_LINEAR = 0,   /* s += -slope(b, h) * (diag(i) - j) (default) */
    ATTN_ALIBI_SYMMETRIC = 1 /* s += -slope(b, h) * |diag(i) - j| */
} attn_alibi_form;

/** ATTN_PARAM_COMPUTE values.
 *
 *  EXACT: everything in fp32 (16-bit and int8 operands widened on load); about 1e-6 relative to
 *  a float64 reference over the same (dequantized) values.
 *
 *  FP16: the fast path on CPUs with AVX512-FP16 (attn_isa() "avx512fp16"):
 *  scale * Q, K and V are rounded to fp16; Q.K^T and P.V run as fp16 multiply-adds whose
 *  partial sums are widened to fp32 every 32 head_dim steps (Q.K^T) and every 64 keys (P.V);
 *  the probabilities exp(s - max) are evaluated in fp16 (about 2^-11 relative), the softmax
 *  state (max, sum of those fp16 probabilities, rescaling) and the output accumulator are fp32.
 * Error: each score within ds = 2^-11 * 34 * scale * |q| |k| of the exact one, each output within
 * 2^-11 * 68 * max|v| + 2 (e^(2 ds) - 1) max|v| (a worst case no ordering of inputs is known to
 * reach), and within 1e-2 max|v| on every input tested: random, and adversarial ones (head_dim 256,
 * logits up to ~60, 4096 keys; measured at most 6e-3 max|v|, tests/core/test_compute.cpp). EXACT is
 * the mode for gradients and reference results. Applies to prefill-like calls (at least 16 query
 * rows per KV head) with fp32 or fp16 Q, K, V in dense or strided layouts, any causal rule,
 * windows, GQA and ATTN_SEQ_LENS_K; every other call (other variants, masks, varlen, pages, int8 /
 * bf16, decode, batch invariance, values whose fp16 products could overflow: |scale q| |k| * 32 or
 * |v| * 64 >= 2^15) and every CPU without AVX512-FP16 runs exactly as EXACT. The choice never
 * depends on the thread count. since 0.2
 *
 *  INT8: Q.K^T and P.V in integers (SageAttention's recipe, on the 16-bit multiply-add every
 *  x86-64 CPU has: pmaddwd, exact int32 sums; attn_compute_unit names it). K of each (batch
 *  entry, KV head) is smoothed (its channel mean over the real keys is subtracted: every score of
 *  a query moves by the same q.mean, which is added back, and outlier channels no longer set the
 *  step) and quantized per key to integers |k| <= 1023 with one fp32 scale; scale * Q per query
 *  row to |q| <= 2047; each score is the exact integer dot product times the two scales, plus
 *  q.mean in fp32, before softcap, bias, ALiBi, sinks, windows and masks, so they and the
 *  returned LSE see the true logits up to the quantization error: |ds| <= scale (|q|_1 step_k +
 *  |k'|_1 step_q) / 2 with step_k = max|k'| / 1023, step_q = max|scale q| / 2047, k' = k - mean.
 *  The softmax is fp32 as in EXACT (its running sum too); P.V takes V quantized per channel over
 *  each tile of keys (|v| <= 1023, one scale per channel and tile) and the probabilities
 *  exp(s - max) in [0, 1] rounded to multiples of 1/8191, summed exactly in int32 per tile and
 *  accumulated in fp32. Tested against float64: cosine >= 0.9995 and relative L1 <= 0.01 per
 *  (batch, head) on gaussian inputs and on keys with per-channel outliers (measured about 0.002).
 *  Applies to the row blocks of prefill-like calls (more than 4 query rows per KV head, head_dim
 *  <= 1024), every layout, storage type, mask and variant; decode-like calls, batch invariance,
 *  ATTN_KEY_MASS, a K with a non-finite value, and the ops other than ATTN_OP_FORWARD run
 *  exactly as EXACT (a non-finite V value: P.V in fp32). The choice never depends on the thread
 *  count. since 0.3
 *
 *  BF16: requested bf16 products; runs exactly as EXACT on every CPU this version supports.
 *  since 0.3 */
typedef enum attn_compute {
    ATTN_COMPUTE_EXACT = 0,
    ATTN_COMPUTE_FP16 = 1,
    ATTN_COMPUTE_INT8 = 2,
    ATTN_COMPUTE_BF16 = 3
} attn_compute;

/** ATTN_PARAM_ALIBI values. */
typedef enum attn_alibi {
    ATTN_ALIBI_NONE = 0,
    ATTN_ALIBI_OPERAND = 1,
    ATTN_ALIBI_STANDARD = 2
} attn_alibi;

/** ATTN_PARAM_WEIGHTS_MODE values: the matrix ATTN_OP_WEIGHTS writes into ATTN_WEIGHTS,
 *  [batch][heads_q][seq_q][seq_k]: the probabilities, or the scores at one stage of the pipeline
 *  (every entry is written; padded keys, never read, hold -INFINITY, and so do hidden entries in
 *  the modes that apply the masks). ONNX's qk_matmul_output_mode as its reference implementation
 *  computes it: 0 = SCORES, 1 = SOFTCAPPED, 2 = CAPPED, 3 = SOFTMAX. */
typedef enum attn_weights_mode {
    ATTN_WEIGHTS_SOFTMAX = 0,   /* probabilities (default) */
    ATTN_WEIGHTS_SCORES = 1,    /* scale * q.k, no mask */
    ATTN_WEIGHTS_MASKED = 2,    /* scale * q.k + bias + ALiBi, masks applied, no softcap */
    ATTN_WEIGHTS_CAPPED = 3,    /* the final logits: every step of the pipeline, masks applied */
    ATTN_WEIGHTS_SOFTCAPPED = 4 /* softcap(scale * q.k), no bias, no mask */
} attn_weights_mode;

/** Set a parameter from an integer (a float parameter takes the integer's value). Refused once
 *  the descriptor was used. A call that fails changes nothing (as every setter of this header).
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc); ATTN_ERR_INVALID_ARGUMENT (unknown parameter, value out
 *  of attn_param_bounds, or the descriptor was already used). Setting a parameter allocates
 *  nothing: the standard ALiBi slopes are the calls' (their ATTN_ERR_OUT_OF_MEMORY). since 0.2 */
ATTN_API attn_status attn_desc_set_int(attn_desc *desc, attn_param param, int64_t value);

/** Set a parameter from a double (float parameters; integer parameters accept integral values).
 *  A call that fails changes nothing.
 *  ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (unknown parameter, NaN, out of
 *  range, not integral for an integer parameter, or the descriptor was already used).
 *  Allocates nothing (as attn_desc_set_int). since 0.2 */
ATTN_API attn_status attn_desc_set_float(attn_desc *desc, attn_param param, double value);

/** Read a parameter's current value (float parameters are rounded toward zero).
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc or value); ATTN_ERR_INVALID_ARGUMENT (unknown). since 0.2
 */
ATTN_API attn_status attn_desc_get_int(const attn_desc *desc, attn_param param, int64_t *value);

/** Read a parameter's current value as a double (exact for every parameter; ATTN_PARAM_SCALE
 *  gives the float the kernels multiply by). ATTN_OK; ATTN_ERR_NULL_POINTER;
 *  ATTN_ERR_INVALID_ARGUMENT (unknown parameter). since 0.2 */
ATTN_API attn_status attn_desc_get_float(const attn_desc *desc, attn_param param, double *value);

/** Kind and range of a parameter, so bindings can validate before calling: *is_float = 1 for a
 *  float parameter (set with attn_desc_set_float), 0 for an integer one; [*min, *max] is the
 *  closed range of accepted values (for integers, exact). Any output pointer may be NULL.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (unknown parameter). since 0.2 */
ATTN_API attn_status attn_param_bounds(attn_param param, int *is_float, double *min, double *max);

/** Operations of attn_run. Values are pinned. */
typedef enum attn_op {
    ATTN_OP_FORWARD = 0, /* reads Q, K, V (+ optional operands); writes OUT, optional LSE and
                            KEY_MASS */
    ATTN_OP_WEIGHTS = 1, /* reads Q, K (+ optional operands); writes WEIGHTS */
    ATTN_OP_BACKWARD = 2 /* reads Q, K, V, OUT, LSE (the forward's), DOUT; writes any of DQ,
                            DK, DV, DBIAS, DSINKS */
} attn_op;

/** Per-call tensors: a set of (operand -> pointer, element count). Not thread-safe to modify;
 *  one attn_args may be read by many concurrent attn_run calls once filled. The pointers are
 *  borrowed: the caller keeps the buffers alive until attn_run returns. */
typedef struct attn_args attn_args;

/** Create an empty binding object. ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_OUT_OF_MEMORY.
 *  since 0.2 */
ATTN_API attn_status attn_args_create(attn_args **args);

/** Free a binding object (not the buffers it names). NULL is a no-op. since 0.2 */
ATTN_API void attn_args_destroy(attn_args *args);

/** Forget every operand. ATTN_OK; ATTN_ERR_NULL_POINTER. since 0.2 */
ATTN_API attn_status attn_args_clear(attn_args *args);

/** Bind an input operand of element type float32 (Q, K, V, BIAS, ALIBI_SLOPES, SINKS, NEW_K,
 *  NEW_V, Q_SCALE; attn_operand_info lists each operand's types).
 *  data: the buffer; len: its length in elements, checked by attn_run against
 *  attn_desc_required_len (a longer buffer is fine: only the required prefix is read).
 *  data = NULL unbinds the operand (len must be 0).
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (args); ATTN_ERR_INVALID_ARGUMENT (which is not a float32
 *  input, or NULL data with a nonzero len). since 0.2 */
ATTN_API attn_status attn_args_set_f32(attn_args *args, attn_operand which, const float *data,
                                       size_t len);

/** Bind an output operand of element type float32 (OUT, LSE, WEIGHTS, KEY_MASS, the gradients).
 *  As attn_args_set_f32. Outputs must not overlap any other operand of the call.
 *  It also binds K, V, K_SCALE or V_SCALE writable: an fp32 K / V cache, or the scales of an
 *  int8 one, that attn_kv_append_args writes (attn_run reads such a binding as an input).
 *  since 0.2 */
ATTN_API attn_status attn_args_set_out_f32(attn_args *args, attn_operand which, float *data,
                                           size_t len);

/** Bind a byte-mask operand (KEY_VALID, ALLOWED, QUERY_VALID): one byte per element, nonzero =
 *  true. As attn_args_set_f32. since 0.2 */
ATTN_API attn_status attn_args_set_u8(attn_args *args, attn_operand which, const uint8_t *data,
                                      size_t len);

/** Bind an int32 operand (SEQ_LENS_K, CU_SEQLENS_Q, CU_SEQLENS_K, BLOCK_TABLE). As
 *  attn_args_set_f32. since 0.2 */
ATTN_API attn_status attn_args_set_i32(attn_args *args, attn_operand which, const int32_t *data,
                                       size_t len);

/** Element types, as bits (1u << t) in attn_operand_info's type sets. Values are pinned.
 *  since 0.3 */
typedef enum attn_dtype {
    ATTN_DTYPE_F32 = 0,      /* float (attn_args_set_f32, attn_args_set_out_f32) */
    ATTN_DTYPE_F16 = 1,      /* IEEE binary16 bit patterns (attn_args_set_f16, _out_f16) */
    ATTN_DTYPE_BF16 = 2,     /* bfloat16 bit patterns (attn_args_set_bf16, _out_bf16) */
    ATTN_DTYPE_I8 = 3,       /* symmetric int8 (attn_args_set_i8, _out_i8) */
    ATTN_DTYPE_U8 = 4,       /* byte masks (attn_args_set_u8) */
    ATTN_DTYPE_I32 = 5,      /* int32 (attn_args_set_i32) */
    ATTN_DTYPE_FP8_E4M3 = 6, /* OCP fp8 E4M3 bytes (attn_args_set_fp8, _out_fp8) */
    ATTN_DTYPE_FP8_E5M2 = 7  /* OCP fp8 E5M2 bytes (attn_args_set_fp8, _out_fp8) */
} attn_dtype;

/* Storage types. Q, K and V may be stored in 16 bits (IEEE binary16 "f16" or bfloat16 "bf16",
 * passed as uint16_t bit patterns), K and V also as symmetric int8 with one fp32 scale per
 * (token, KV head): the value of element x of a row is (float)q[x] * scale, rounded to fp32. The
 * setter that binds an operand sets its type; lengths and strides count elements, as for fp32.
 * Every value is widened to fp32 on load (F16C / AVX-512 conversions, a shift for bf16) and all
 * arithmetic is fp32: the result is fp32 attention over the widened values (on the decode path,
 * at most 4 query rows per KV head, an int8 row's scale multiplies the row's score and its
 * probability instead of each value: equal to that within fp32 rounding, not bit for bit; the same
 * kernels, masks and variants; padded keys are still never read). The int8 scales are the operands
 * ATTN_K_SCALE / ATTN_V_SCALE: [batch][heads_kv][seq_k] (K's shape with head_dim 1), strided
 * like K (attn_desc_set_strides; by default K's default layout with head_dim 1: BHS, token-major
 * [total_k][heads_kv] in varlen mode, [num_pages][page_size][heads_kv] with a paged cache).
 * K and V may also be fp8, one byte per value (OCP FP8 as vLLM stores its caches): E4M3 "fn"
 * (sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities, S.1111.111 is NaN, max
 * 448) or E5M2 (sign, 5 exponent bits with bias 15, 2 mantissa bits, IEEE-like: the upper byte
 * of a binary16; infinities and NaN as there). The value of a code is its exact fp32 value times
 * the scale of ATTN_K_SCALE / ATTN_V_SCALE, rounded to fp32 (as int8, and on the decode path
 * applied to the score and the probability as for int8); a NaN code reads as NaN. The scale is
 * optional for fp8 (none bound = 1) and read the way the int8 scales are, so strides (0, 0, 0)
 * give one scale per tensor (length 1) and (0, 1, 0) one per KV head (length heads_kv), as vLLM
 * keeps them; the default strides give one per row.
 * ATTN_OP_BACKWARD takes fp32, f16 or bf16 Q, K, V and DOUT (int8 / fp8 K / V:
 * ATTN_ERR_UNSUPPORTED): see attn_run. */

/** Bind Q, K, V or DOUT (ATTN_OP_BACKWARD), or NEW_K / NEW_V (attn_kv_append_args), stored as
 *  IEEE binary16 (f16) or bfloat16 (bf16) bit patterns. As attn_args_set_f32 (len in
 *  elements). ATTN_ERR_INVALID_ARGUMENT for any other operand. since 0.2 */
ATTN_API attn_status attn_args_set_f16(attn_args *args, attn_operand which, const uint16_t *data,
                                       size_t len);
/** As attn_args_set_f16, for bfloat16 bit patterns. since 0.2 */
ATTN_API attn_status attn_args_set_bf16(attn_args *args, attn_operand which, const uint16_t *data,
                                        size_t len);

/** Bind K or V stored as symmetric int8; its scales are ATTN_K_SCALE / ATTN_V_SCALE (bind them
 *  with attn_args_set_f32; attn_run requires them with an int8 K / V and refuses them
 *  otherwise). Also NEW_K / NEW_V as int8 rows for an int8 cache (attn_kv_append_args), their
 *  scales ATTN_NEW_K_SCALE / ATTN_NEW_V_SCALE. As attn_args_set_f32 (len in elements).
 *  ATTN_ERR_INVALID_ARGUMENT for any other operand. since 0.2 */
ATTN_API attn_status attn_args_set_i8(attn_args *args, attn_operand which, const int8_t *data,
                                      size_t len);

/** Bind a K or V cache that attn_kv_append_args writes, stored as f16 / bf16 bit patterns or as
 *  symmetric int8 (bind an int8 cache's scales, K_SCALE / V_SCALE, with attn_args_set_out_f32;
 *  an fp32 cache with attn_args_set_out_f32). attn_run reads such a binding as it reads one made
 *  with attn_args_set_f16 / _bf16 / _i8. As attn_args_set_f32 (len in elements).
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (args); ATTN_ERR_INVALID_ARGUMENT (which is not K or V, or NULL
 *  data with a nonzero len). since 0.3 */
ATTN_API attn_status attn_args_set_out_f16(attn_args *args, attn_operand which, uint16_t *data,
                                           size_t len);
/** As attn_args_set_out_f16, for bfloat16 bit patterns. since 0.3 */
ATTN_API attn_status attn_args_set_out_bf16(attn_args *args, attn_operand which, uint16_t *data,
                                            size_t len);
/** As attn_args_set_out_f16, for a symmetric int8 cache. since 0.3 */
ATTN_API attn_status attn_args_set_out_i8(attn_args *args, attn_operand which, int8_t *data,
                                          size_t len);

/** Bind K or V stored as fp8 of format fmt (ATTN_DTYPE_FP8_E4M3 or ATTN_DTYPE_FP8_E5M2, see
 *  "Storage types"), one byte per value; its optional scale is ATTN_K_SCALE / ATTN_V_SCALE.
 *  Also NEW_K / NEW_V as fp8 rows of the cache's format for attn_kv_append_args (codes under the
 *  cache's scale, copied as they are). As attn_args_set_f32 (len in elements = bytes).
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (args); ATTN_ERR_INVALID_ARGUMENT (fmt not an fp8 format,
 *  any other operand, NULL data with a nonzero len). since 0.3 */
ATTN_API attn_status attn_args_set_fp8(attn_args *args, attn_operand which, attn_dtype fmt,
                                       const uint8_t *data, size_t len);
/** As attn_args_set_out_f16, for an fp8 cache of format fmt (its scale, if any, is only read:
 *  bind it with attn_args_set_f32). Errors as attn_args_set_fp8. since 0.3 */
ATTN_API attn_status attn_args_set_out_fp8(attn_args *args, attn_operand which, attn_dtype fmt,
                                           uint8_t *data, size_t len);

/** Conversions for filling 16-bit caches: n values, round to nearest even (overflow gives
 *  infinity, NaN stays NaN), vectorised; src and dst must not overlap.
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (src or dst NULL with n > 0); ATTN_ERR_INVALID_ARGUMENT
 *  (overlap). since 0.2 */
ATTN_API attn_status attn_convert_f32_to_f16(const float *src, uint16_t *dst, size_t n);
/** As attn_convert_f32_to_f16, to bfloat16. since 0.2 */
ATTN_API attn_status attn_convert_f32_to_bf16(const float *src, uint16_t *dst, size_t n);
/** The exact widening of n 16-bit values (as the kernels do it). Errors as above. since 0.2 */
ATTN_API attn_status attn_convert_f16_to_f32(const uint16_t *src, float *dst, size_t n);
/** As attn_convert_f16_to_f32, from bfloat16. since 0.2 */
ATTN_API attn_status attn_convert_bf16_to_f32(const uint16_t *src, float *dst, size_t n);

/** Symmetric int8 quantization of `rows` contiguous rows of `dim` floats (a K or V cache's
 *  rows, e.g. [tokens][heads_kv] rows of head_dim): per row scale = max|x| / 127 and
 *  q = x / scale rounded to nearest even (|q| <= 127); a row whose scale is 0 (all zeros) gets
 *  q = 0. dst: rows * dim int8, scales: rows floats (the scale operand in the row order of src).
 *  ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (a non-finite value, naming its
 *  row: rows before it are written; rows * dim overflows; buffers overlap). since 0.2 */
ATTN_API attn_status attn_quantize_i8(const float *src, size_t rows, size_t dim, int8_t *dst,
                                      float *scales);

/** fp8 quantization of `rows` contiguous rows of `dim` floats with one scale: each code is
 *  x / scale (an fp32 quotient) rounded to nearest even in format fmt, saturating to +-448
 *  (E4M3) or +-57344 (E5M2); dst: rows * dim bytes.
 *  ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (fmt not an fp8 format; scale not
 *  finite or not > 0; a non-finite value, naming its row: rows before it are written; rows *
 *  dim overflows; src and dst overlap). since 0.3 */
ATTN_API attn_status attn_quantize_fp8(const float *src, size_t rows, size_t dim, attn_dtype fmt,
                                       float scale, uint8_t *dst);
/** The exact widening of rows * dim fp8 codes times scale (value * scale rounded to fp32, as the
 *  kernels read them; a NaN code gives NaN). Errors as attn_quantize_fp8 (scale: finite). since
 *  0.3 */
ATTN_API attn_status attn_dequantize_fp8(const uint8_t *src, size_t rows, size_t dim,
                                         attn_dtype fmt, float scale, float *dst);

/** Run an operation with the descriptor's configuration and the bound operands.
 *
 *  Operands (element counts from attn_desc_required_len; shapes in attn_operand):
 *    ATTN_Q, ATTN_K                 required;  ATTN_V required for FORWARD
 *    ATTN_OUT                       required output of FORWARD; ATTN_LSE optional output
 *    ATTN_WEIGHTS                   required output of WEIGHTS
 *    ATTN_KEY_VALID, ATTN_ALLOWED   optional masks, as attn_forward
 *    ATTN_BIAS                      optional additive bias after scale and softcap; strides
 *                                   with attn_desc_set_strides(desc, ATTN_BIAS, b, h, row)
 *                                   (row = along seq_q, keys contiguous; 0 broadcasts)
 *    ATTN_ALIBI_SLOPES              [heads_q] (or [batch][heads_q] with its strides),
 *                                   required iff ATTN_PARAM_ALIBI = OPERAND
 *    ATTN_SINKS                     [heads_q] sink logits joining every row's denominator
 *    ATTN_QUERY_VALID               [batch][seq_q]: false = padded query; its OUT row is 0,
 *                                   its LSE -INFINITY, its weights 0 (-INFINITY in the score
 *                                   modes of ATTN_PARAM_WEIGHTS_MODE); it costs no compute
 *    ATTN_SEQ_LENS_K                [batch] int32 in [0, seq_k]: keys j >= seq_lens_k[b] are
 *                                   padding (never read); BOTTOM_RIGHT aligns to this length
 *    ATTN_KEY_MASS                  optional output of FORWARD: mass[b][h][j] = sum_i w_ij
 *                                   (attention each key received; 0 for hidden keys)
 *    ATTN_CU_SEQLENS_Q/_K, ATTN_BLOCK_TABLE   the serving layouts (see "Serving layouts")
 *    ATTN_DOUT, ATTN_DQ/_DK/_DV/_DBIAS/_DSINKS   the backward (ATTN_OP_BACKWARD): from the
 *                                   forward's OUT and LSE and the gradient DOUT, the gradients
 *                                   of Q, K, V (GQA: summed over a KV head's query heads),
 *                                   BIAS (broadcast dimensions summed) and SINKS; each optional,
 *                                   at least one bound. FlashAttention-2's algorithm: the
 *                                   probabilities are recomputed from Q, K and LSE, no n x n
 *                                   buffer. Hidden and padded keys get dK = dV = 0 (padded rows
 *                                   are written, never read); padded queries and rows with no
 *                                   visible key get dQ = 0. Every mask and variant, varlen
 *                                   packs; not with a paged cache. fp32 throughout:
 *                                   Q, K, V and DOUT may be f16 or bf16 (bound with
 *                                   attn_args_set_f16 / _bf16; each widened exactly to an fp32
 *                                   copy in its own layout for the call, its fp32 size in extra
 *                                   memory), the gradients are the fp32 gradients of the
 *                                   widened values, written as fp32 (attn_args_set_out_f32);
 *                                   OUT and LSE are fp32. NaN or Inf in DOUT or in the
 *                                   forward's OUT propagate into the gradients as IEEE
 *                                   arithmetic says (that row's dQ, the dK, dV and dBias of
 *                                   the keys it sees, dSinks), never zeroed. DBIAS rows that
 *                                   alias (broadcast, or overlapping through non-zero strides)
 *                                   are summed in a fixed order. Memory:
 *                                   one scratch block per thread; a call with fewer than 8
 *                                   (batch entry, KV head) pairs splits each pair's keys into
 *                                   up to 8 chunks of whole multiples of 1024 keys (so that it
 *                                   runs on every thread) and holds one dQ partial per chunk,
 *                                   at most 64 MiB in all (fewer chunks when they would not fit).
 *  An operand the operation does not read (V for WEIGHTS, say) is ignored.
 *  Results are bit-identical whatever the thread count.
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc, args, or a required operand not bound);
 *  ATTN_ERR_INVALID_ARGUMENT (unknown op, a buffer shorter than required, an output overlapping
 *  another operand, a seq_lens_k value out of range, ALiBi slopes missing or bound without
 *  ATTN_PARAM_ALIBI = OPERAND, sinks with SOFTMAX_PLUS_ONE; the message names the operand);
 *  ATTN_ERR_UNSUPPORTED (a combination the header marks as not supported);
 *  ATTN_ERR_OUT_OF_MEMORY. since 0.2 */
ATTN_API attn_status attn_run(const attn_desc *desc, attn_op op, const attn_args *args);

/* ==============================  Serving layouts  ============================= */
/* Packed variable-length batches (ATTN_PARAM_VARLEN = 1), FlashAttention's varlen layout:
 *   ATTN_CU_SEQLENS_Q, ATTN_CU_SEQLENS_K: int32 [batch + 1], cu[0] = 0, non-decreasing, the
 *     length of sequence b is cu[b + 1] - cu[b] (0 allowed: it produces nothing) and at most
 *     seq_q (queries) or seq_k (keys) of the descriptor: those are max_seqlen_q / max_seqlen_k.
 *   Q and OUT are token-major [total_q][heads_q][head_dim(_v)], K and V
 *   [total_k][heads_kv][head_dim(_v)] (default strides head = head_dim, row = heads * head_dim;
 *   other head and row strides through attn_desc_set_strides). LSE is [heads_q][total_q].
 *   Masks and variants apply per sequence, with positions counted from the sequence's start:
 *   causal rules (BOTTOM_RIGHT aligns the sequence's last query with its last key), window,
 *   softcap, sinks, ALiBi, KEY_VALID ([batch][seq_k] by position) and ALLOWED ([seq_q][seq_k]).
 *   Not with varlen: BIAS, QUERY_VALID, KEY_MASS, ATTN_OP_WEIGHTS (ATTN_ERR_UNSUPPORTED).
 *   The work is planned over the real tokens only.
 * Paged K/V (ATTN_PARAM_PAGE_SIZE = page_size >= 1), the vLLM / FlashAttention block table:
 *   K and V are pools of pages: token t of a page p of KV head h is at
 *   p * batch_stride + h * head_stride + t * row_stride. Defaults are token-major pages
 *   [num_pages][page_size][heads_kv][head_dim] (FlashAttention's k_cache); head-major pages
 *   [num_pages][heads_kv][page_size][head_dim] (vLLM CPU, OpenVINO) are the strides
 *   (heads_kv * page_size * D, page_size * D, D). num_pages is what the bound buffers hold.
 *   ATTN_BLOCK_TABLE: int32 [batch][max_pages]; key j of sequence b lives in page
 *   block_table[b][j / page_size] at token j % page_size; -1 marks an unused slot.
 *   ATTN_SEQ_LENS_K (required): keys in the cache of each sequence, new ones included.
 *   Q is dense [batch][heads_q][seq_q][head_dim] or varlen (ATTN_CU_SEQLENS_Q; chunked
 *   prefill and decode in one call); ATTN_CU_SEQLENS_K is not used with pages.
 *   A page id outside [0, num_pages), a -1 among the used slots or a length beyond
 *   max_pages * page_size is ATTN_ERR_INVALID_ARGUMENT naming the sequence and the slot. */

/** Write new key and value rows into their cache positions (vLLM's reshape_and_cache): token t
 *  (0-based) of the n_b new tokens of sequence b goes to key position seq_lens_k[b] - n_b + t,
 *  i.e. seq_lens_k already counts the new tokens, so the same args then serve attn_run.
 *
 *  args: ATTN_NEW_K, ATTN_NEW_V: contiguous token-major rows [tokens][heads_kv][head_dim] and
 *        [tokens][heads_kv][head_dim_v]; tokens = cu_seqlens_q[batch] in varlen mode (n_b from
 *        ATTN_CU_SEQLENS_Q), else batch * seq_q (n_b = seq_q, tokens ordered [batch][seq_q]);
 *        ATTN_SEQ_LENS_K required; ATTN_BLOCK_TABLE required with a paged cache.
 *  k_cache, v_cache: the K and V buffers (the pools with a paged cache; dense K/V otherwise, in
 *        the descriptor's K/V layout); k_len, v_len their lengths in floats.
 *  Only the destination rows are written.
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc, args, a cache or a required operand);
 *  ATTN_ERR_INVALID_ARGUMENT (a buffer too short, seq_lens_k[b] < n_b or out of range, a bad
 *  page id, caches overlapping each other or the new rows, new rows bound in another type than
 *  fp32: attn_kv_append_args takes those); ATTN_ERR_OUT_OF_MEMORY. since 0.2 */
ATTN_API attn_status attn_kv_append(const attn_desc *desc, const attn_args *args, float *k_cache,
                                    size_t k_len, float *v_cache, size_t v_len);

/** attn_kv_append into caches of any storage type the attention reads: the caches are the K and
 *  V operands of args, bound writable, so the same args then serve attn_run unchanged.
 *
 *  args: ATTN_K, ATTN_V: the caches (the pools with a paged cache; dense K/V otherwise, in the
 *        descriptor's K/V layout), each bound writable: fp32 with attn_args_set_out_f32, f16 /
 *        bf16 with attn_args_set_out_f16 / _bf16, fp8 with attn_args_set_out_fp8 (its scale, if
 *        bound, read), int8 with attn_args_set_out_i8 plus its scales
 *        ATTN_K_SCALE / ATTN_V_SCALE ([batch][heads_kv][seq_k] in their layout, see "Storage
 *        types") with attn_args_set_out_f32; lengths in elements.
 *        ATTN_NEW_K, ATTN_NEW_V: the new rows as for attn_kv_append (contiguous token-major
 *        [tokens][heads_kv][head_dim] and [tokens][heads_kv][head_dim_v]), either fp32
 *        (attn_args_set_f32) or of the cache's own type (attn_args_set_f16 / _bf16 / _i8; int8
 *        rows with their scales ATTN_NEW_K_SCALE / ATTN_NEW_V_SCALE, f32 [tokens][heads_kv],
 *        attn_args_set_f32). K and V may differ in type; so may NEW_K and NEW_V.
 *        ATTN_SEQ_LENS_K (required), ATTN_CU_SEQLENS_Q (varlen), ATTN_CU_SEQLENS_K (varlen
 *        without pages), ATTN_BLOCK_TABLE (paged): as attn_kv_append.
 *  Each destination row is: a copy of a same-typed new row (an int8 row with its scale); else
 *  from an fp32 row: the row itself into an fp32 cache, converted with round to nearest even into
 *  f16 / bf16 (as attn_convert_f32_to_f16 / _bf16: overflow gives infinity, NaN stays NaN), or
 *  quantized into int8 as attn_quantize_i8 does (scale = max|x| / 127 written to the cache's
 *  scale slot, q = x / scale rounded to nearest even; an all-zero row gets scale 0 and q 0), or
 *  into fp8 with the cache's scale at that row as attn_quantize_fp8 does (fp8 new rows are
 *  copied).
 *  Only the destination rows (and their scales) are written; nothing is written when the call
 *  fails.
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER (desc, args, a cache, an int8 cache's or int8 new rows'
 *  scales, or another required operand); ATTN_ERR_INVALID_ARGUMENT (everything attn_kv_append
 *  refuses, naming the operand: a buffer too short, seq_lens_k[b] < n_b or out of range, a bad
 *  page id, buffers overlapping; a cache bound read-only; new rows neither fp32 nor the cache's
 *  type; scales bound for a cache or new rows that are not int8; a non-finite value in an fp32
 *  row bound for an int8 or fp8 cache, naming the operand, the row, its token and KV head; an
 *  fp8 cache's scale not finite or not > 0 at a row it quantizes into);
 *  ATTN_ERR_OUT_OF_MEMORY. since 0.3 */
ATTN_API attn_status attn_kv_append_args(const attn_desc *desc, const attn_args *args);

/** Exact merge of partial results computed over disjoint key sets (split-KV, ring attention,
 *  prefix caching): acc <- merge(acc, part), row by row,
 *    lse = log(exp(lse_acc) + exp(lse_part)),
 *    out = exp(lse_acc - lse) out_acc + exp(lse_part - lse) out_part.
 *  A part with lse -INFINITY contributes nothing; both -INFINITY gives out 0, lse -INFINITY.
 *  Folding parts one after another in a fixed order gives bit-identical results.
 *
 *  acc, part: ATTN_OUT and ATTN_LSE (both required in each) in the descriptor's OUT and LSE
 *  layouts (dense, or varlen with ATTN_CU_SEQLENS_Q bound in acc). acc is updated in place;
 *  part is only read (bind its buffers with attn_args_set_out_f32 too).
 *
 *  ATTN_OK; ATTN_ERR_NULL_POINTER; ATTN_ERR_INVALID_ARGUMENT (a buffer too short, acc and part
 *  buffers overlapping, bad cu_seqlens_q). since 0.2 */
ATTN_API attn_status attn_merge(const attn_desc *desc, const attn_args *acc, const attn_args *part);

/* ===============================  Introspection  ============================== */
/* The library's own tables (capi/operands.def, capi/params.def, the ISA names), for bindings. */

/** Facts of operand `which` from the library's one operand table:
 *  name:      its lowercase name as messages use it ("q", "k_scale"), in static storage
 *  in_types:  bit set (1u << attn_dtype) of the types it may be bound with as an input
 *             (attn_args_set_f32 / _f16 / _bf16 / _i8 / _u8 / _i32); 0 if never an input
 *  out_types: the same as an output (attn_args_set_out_*; K, V, K_SCALE and V_SCALE: the caches
 *             attn_kv_append_args writes); 0 if never an output
 *  rank:      dimensions of its dense shape (the words of attn_operand_dims)
 *  strided:   1 if attn_desc_set_strides accepts it, else 0
 *  Any output pointer may be NULL.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (not an attn_operand: a loop from 0 until this status
 *  lists every operand). since 0.3 */
ATTN_API attn_status attn_operand_info(attn_operand which, const char **name, unsigned *in_types,
                                       unsigned *out_types, int *rank, int *strided);

/** Operand `which`'s dense shape, outermost first, in this header's names, space-separated, in
 *  static storage: "batch heads_q seq_q head_dim" (Q), "batch+1" (CU_SEQLENS_Q), "batch*seq_q
 *  heads_kv" (NEW_K_SCALE: one per new row). ATTN_OK; ATTN_ERR_NULL_POINTER (dims);
 *  ATTN_ERR_INVALID_ARGUMENT (not an attn_operand). since 0.3 */
ATTN_API attn_status attn_operand_dims(attn_operand which, const char **dims);

/** Facts of parameter `param` from the library's one parameter table:
 *  name:          lowercase without the prefix ("causal", "window_left"), in static storage
 *  is_float, min, max: as attn_param_bounds
 *  default_value: its value in a new descriptor; NaN where the default follows the shape
 *                 (ATTN_PARAM_SCALE: 1/sqrt(head_dim); ATTN_PARAM_HEAD_DIM_V: head_dim)
 *  Any output pointer may be NULL.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (not an attn_param: a loop from 0 until this status lists
 *  every parameter). since 0.3 */
ATTN_API attn_status attn_param_info(attn_param param, const char **name, int *is_float,
                                     double *min, double *max, double *default_value);

/** ISA `index` of the ones this build knows, weakest first ("scalar", "sse2", "avx2", "avx512",
 *  "avx512fp16"):
 *  name:      what attn_set_isa and the ATTN_ISA environment variable accept; static storage
 *  supported: 1 if this CPU and build run it (attn_set_isa(name) then succeeds), else 0
 *  Any output pointer may be NULL.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (index negative or past the last: a loop from 0 until
 *  this status lists every ISA). since 0.3 */
ATTN_API attn_status attn_isa_info(int index, const char **name, int *supported);

/* ==============================  Threads and ISA  ============================= */
/** Set the number of threads attention calls use (the caller counts as one). 0 = the default:
 *  the ATTN_NUM_THREADS environment variable if set, else the hardware thread count. Safe to
 *  call while other threads compute: running calls finish with the count they started with.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (n > 256); ATTN_ERR_OUT_OF_MEMORY. since 0.1 */
ATTN_API attn_status attn_set_num_threads(size_t n);

/** The number of threads attention calls use now. since 0.1 */
ATTN_API size_t attn_get_num_threads(void);

/** Name of the kernel in use: "scalar", "sse2", "avx2", "avx512" or "avx512fp16" (the avx512
 *  kernels plus the fp16 fast path of ATTN_PARAM_COMPUTE, on CPUs with AVX512-FP16; since 0.2).
 *  It is the best the CPU supports, capped by the ATTN_ISA environment variable or
 *  attn_set_isa. since 0.1 */
ATTN_API const char *attn_isa(void);

/** The unit ATTN_PARAM_COMPUTE = `mode` (an attn_compute) runs its products on with the kernel
 *  in use (attn_isa), in static storage: "fp32 vfmadd (avx2)", "int16 vpmaddwd (avx2)",
 *  "fp16 vfmadd*ph (avx512fp16)"; a mode that runs as EXACT on this CPU names EXACT's unit.
 *  NULL for a value that is not an attn_compute. since 0.3 */
ATTN_API const char *attn_compute_unit(int mode);

/** Cap the kernel (process-wide) at `name` ("scalar", "sse2", "avx2", "avx512", "avx512fp16";
 *  "avx512" keeps FP16 requests exact), or restore the default with NULL or "". Affects calls
 *  that start afterwards.
 *  ATTN_OK; ATTN_ERR_INVALID_ARGUMENT (unknown name); ATTN_ERR_UNSUPPORTED (this CPU or build
 *  lacks it). since 0.1 */
ATTN_API attn_status attn_set_isa(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_H */
