/* Plain C99 tests of the C API: versions, status strings, every bad-input case (status AND a
 * message naming the argument), thread-local error messages, descriptor life cycle.
 * Prints "N passed, M failed". */
#include <attn.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_passed, g_failed;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (cond)                                                                                  \
            ++g_passed;                                                                            \
        else {                                                                                     \
            ++g_failed;                                                                            \
            printf("FAIL %s:%d: %s (last error: \"%s\")\n", __FILE__, __LINE__, #cond,             \
                   attn_last_error());                                                             \
        }                                                                                          \
    } while (0)

/* The call returns `st` and the message mentions every word in `words` (NULL-terminated). */
static int fails_with(attn_status got, attn_status st, const char *w1, const char *w2) {
    const char *msg = attn_last_error();
    if (got != st) {
        printf("  expected status %d (%s), got %d; message \"%s\"\n", (int)st,
               attn_status_string(st), (int)got, msg);
        return 0;
    }
    if ((w1 && !strstr(msg, w1)) || (w2 && !strstr(msg, w2))) {
        printf("  message \"%s\" should mention \"%s\" and \"%s\"\n", msg, w1 ? w1 : "",
               w2 ? w2 : "");
        return 0;
    }
    return 1;
}

static void test_version_and_status(void) {
    EXPECT(attn_version_number() == ATTN_VERSION_NUMBER);
    EXPECT(strcmp(attn_version_string(), ATTN_VERSION_STRING) == 0);
    EXPECT(ATTN_VERSION_NUMBER ==
           ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH);
    EXPECT(strcmp(attn_status_string(ATTN_OK), "ok") == 0);
    EXPECT(strcmp(attn_status_string(ATTN_ERR_NULL_POINTER), "null pointer") == 0);
    EXPECT(strcmp(attn_status_string(ATTN_ERR_INVALID_ARGUMENT), "invalid argument") == 0);
    EXPECT(strcmp(attn_status_string(ATTN_ERR_OUT_OF_MEMORY), "out of memory") == 0);
    EXPECT(strcmp(attn_status_string(ATTN_ERR_UNSUPPORTED), "unsupported") == 0);
    EXPECT(strcmp(attn_status_string(ATTN_ERR_INTERNAL), "internal error") == 0);
    EXPECT(strcmp(attn_status_string((attn_status)42), "unknown status") == 0);
    EXPECT(strcmp(attn_status_string((attn_status)-1), "unknown status") == 0);
    EXPECT(attn_last_error() != NULL);
}

static void test_create(void) {
    attn_desc *d = (attn_desc *)(uintptr_t)1;
    EXPECT(
        fails_with(attn_desc_create(NULL, 1, 1, 1, 1, 1, 1), ATTN_ERR_NULL_POINTER, "desc", NULL));
    EXPECT(fails_with(attn_desc_create(&d, 0, 1, 1, 1, 1, 1), ATTN_ERR_INVALID_ARGUMENT, "batch",
                      NULL));
    EXPECT(d == NULL);
    EXPECT(fails_with(attn_desc_create(&d, 1, 0, 1, 1, 1, 1), ATTN_ERR_INVALID_ARGUMENT, "heads_q",
                      NULL));
    EXPECT(fails_with(attn_desc_create(&d, 1, 1, 0, 1, 1, 1), ATTN_ERR_INVALID_ARGUMENT, "heads_kv",
                      NULL));
    EXPECT(fails_with(attn_desc_create(&d, 1, 1, 1, 0, 1, 1), ATTN_ERR_INVALID_ARGUMENT, "seq_q",
                      NULL));
    EXPECT(fails_with(attn_desc_create(&d, 1, 1, 1, 1, 0, 1), ATTN_ERR_INVALID_ARGUMENT, "seq_k",
                      NULL));
    EXPECT(fails_with(attn_desc_create(&d, 1, 1, 1, 1, 1, 0), ATTN_ERR_INVALID_ARGUMENT, "head_dim",
                      NULL));
    EXPECT(fails_with(attn_desc_create(&d, 1, 6, 4, 1, 1, 1), ATTN_ERR_INVALID_ARGUMENT,
                      "heads_q (6) is not a multiple of heads_kv (4)", NULL));
    EXPECT(fails_with(attn_desc_create(&d, 1, 1, 1, (size_t)1 << 31, 1, 1),
                      ATTN_ERR_INVALID_ARGUMENT, "seq_q", "limit"));
    EXPECT(fails_with(attn_desc_create(&d, 1, 1, 1, 1, 1, SIZE_MAX), ATTN_ERR_INVALID_ARGUMENT,
                      "head_dim", "limit"));
    /* each size fits, their product does not */
    EXPECT(fails_with(attn_desc_create(&d, 0x7fffffff, 0x7fffffff, 1, 0x7fffffff, 1, 8),
                      ATTN_ERR_INVALID_ARGUMENT, "overflow", NULL));
    EXPECT(d == NULL);
    EXPECT(attn_desc_create(&d, 2, 4, 2, 3, 5, 8) == ATTN_OK && d != NULL);
    EXPECT(attn_desc_required_len(d, ATTN_Q) == 2 * 4 * 3 * 8);
    EXPECT(attn_desc_required_len(d, ATTN_K) == 2 * 2 * 5 * 8);
    EXPECT(attn_desc_required_len(d, ATTN_V) == 2 * 2 * 5 * 8);
    EXPECT(attn_desc_required_len(d, ATTN_OUT) == 2 * 4 * 3 * 8);
    EXPECT(attn_desc_required_len(d, ATTN_LSE) == 2 * 4 * 3);
    EXPECT(attn_desc_required_len(d, ATTN_WEIGHTS) == 2 * 4 * 3 * 5);
    EXPECT(attn_desc_required_len(d, ATTN_KEY_VALID) == 2 * 5);
    EXPECT(attn_desc_required_len(d, ATTN_ALLOWED) == 3 * 5);
    EXPECT(attn_desc_required_len(d, ATTN_BIAS) == 2 * 4 * 3 * 5);
    EXPECT(attn_desc_required_len(d, ATTN_ALIBI_SLOPES) == 4);
    EXPECT(attn_desc_required_len(d, ATTN_SINKS) == 4);
    EXPECT(attn_desc_required_len(d, ATTN_QUERY_VALID) == 2 * 3);
    EXPECT(attn_desc_required_len(d, ATTN_SEQ_LENS_K) == 2);
    EXPECT(attn_desc_required_len(d, ATTN_KEY_MASS) == 2 * 4 * 5);
    EXPECT(attn_desc_required_len(d, ATTN_K_SCALE) == 2 * 2 * 5);
    EXPECT(attn_desc_required_len(d, (attn_operand)255) == 0 &&
           strstr(attn_last_error(), "which (255)") != NULL);
    EXPECT(attn_desc_required_len(NULL, ATTN_Q) == 0 && strstr(attn_last_error(), "desc") != NULL);
    attn_desc_destroy(d);
    attn_desc_destroy(NULL); /* no-op */
}

static void test_setters(void) {
    attn_desc *d = NULL;
    EXPECT(attn_desc_create(&d, 2, 2, 1, 3, 4, 5) == ATTN_OK);
    EXPECT(fails_with(attn_desc_set_causal(NULL, ATTN_CAUSAL_NONE), ATTN_ERR_NULL_POINTER, "desc",
                      NULL));
    EXPECT(fails_with(attn_desc_set_causal(d, (attn_causal)3), ATTN_ERR_INVALID_ARGUMENT,
                      "causal (3)", NULL));
    EXPECT(fails_with(attn_desc_set_causal(d, (attn_causal)-1), ATTN_ERR_INVALID_ARGUMENT,
                      "causal (-1)", NULL));
    EXPECT(attn_desc_set_causal(d, ATTN_CAUSAL_BOTTOM_RIGHT) == ATTN_OK);
    EXPECT(fails_with(attn_desc_set_scale(NULL, 1.0f), ATTN_ERR_NULL_POINTER, "desc", NULL));
    EXPECT(fails_with(attn_desc_set_scale(d, NAN), ATTN_ERR_INVALID_ARGUMENT, "scale", "finite"));
    EXPECT(
        fails_with(attn_desc_set_scale(d, INFINITY), ATTN_ERR_INVALID_ARGUMENT, "scale", "finite"));
    EXPECT(fails_with(attn_desc_set_scale(d, -INFINITY), ATTN_ERR_INVALID_ARGUMENT, "scale",
                      "finite"));
    EXPECT(attn_desc_set_scale(d, 0.0f) == ATTN_OK);
    EXPECT(attn_desc_set_scale(d, -0.5f) == ATTN_OK);
    EXPECT(fails_with(attn_desc_set_strides(NULL, ATTN_Q, 1, 1, 1), ATTN_ERR_NULL_POINTER, "desc",
                      NULL));
    EXPECT(fails_with(attn_desc_set_strides(d, ATTN_LSE, 1, 1, 1), ATTN_ERR_INVALID_ARGUMENT,
                      "which (4)", NULL));
    EXPECT(fails_with(attn_desc_set_strides(d, (attn_operand)99, 1, 1, 1),
                      ATTN_ERR_INVALID_ARGUMENT, "which (99)", NULL));
    EXPECT(fails_with(attn_desc_set_strides(d, ATTN_K, SIZE_MAX / 2, 1, 1),
                      ATTN_ERR_INVALID_ARGUMENT, "k strides", "overflow"));
    EXPECT(fails_with(attn_desc_set_strides(d, ATTN_OUT, 30, 15, 4), ATTN_ERR_INVALID_ARGUMENT,
                      "out strides", "overlap"));
    EXPECT(fails_with(attn_desc_set_strides(d, ATTN_OUT, 0, 15, 5), ATTN_ERR_INVALID_ARGUMENT,
                      "out strides", "overlap"));
    /* inputs may broadcast (stride 0) and overlap */
    EXPECT(attn_desc_set_strides(d, ATTN_K, 0, 0, 5) == ATTN_OK);
    EXPECT(attn_desc_required_len(d, ATTN_K) == 3 * 5 + 5);
    /* BSHD output with gaps */
    EXPECT(attn_desc_set_strides(d, ATTN_OUT, 100, 5, 11) == ATTN_OK);
    EXPECT(attn_desc_required_len(d, ATTN_OUT) == 100 + 5 + 2 * 11 + 5);
    attn_desc_destroy(d);
}

static void test_forward_errors(void) {
    attn_desc *d = NULL;
    EXPECT(attn_desc_create(&d, 1, 1, 1, 2, 3, 4) == ATTN_OK);
    float q[8] = {0}, k[12] = {0}, v[12] = {0}, out[8], lse[2], w[6];
    float big[64] = {0};
    bool kv[3] = {true, true, true};
    EXPECT(fails_with(attn_forward(NULL, q, k, v, NULL, NULL, out, NULL), ATTN_ERR_NULL_POINTER,
                      "desc", NULL));
    EXPECT(fails_with(attn_forward(d, NULL, k, v, NULL, NULL, out, NULL), ATTN_ERR_NULL_POINTER,
                      "q is NULL", NULL));
    EXPECT(fails_with(attn_forward(d, q, NULL, v, NULL, NULL, out, NULL), ATTN_ERR_NULL_POINTER,
                      "k is NULL", NULL));
    EXPECT(fails_with(attn_forward(d, q, k, NULL, NULL, NULL, out, NULL), ATTN_ERR_NULL_POINTER,
                      "v is NULL", NULL));
    EXPECT(fails_with(attn_forward(d, q, k, v, NULL, NULL, NULL, NULL), ATTN_ERR_NULL_POINTER,
                      "out is NULL", NULL));
    /* outputs must not alias inputs or each other */
    EXPECT(fails_with(attn_forward(d, big, k, v, NULL, NULL, big + 4, NULL),
                      ATTN_ERR_INVALID_ARGUMENT, "out overlaps q", NULL));
    EXPECT(fails_with(attn_forward(d, q, k, v, NULL, NULL, big, big + 7), ATTN_ERR_INVALID_ARGUMENT,
                      "overlaps", NULL));
    EXPECT(fails_with(attn_forward(d, q, k, v, (const bool *)(void *)out, NULL, out, NULL),
                      ATTN_ERR_INVALID_ARGUMENT, "key_valid", NULL));
    EXPECT(
        fails_with(attn_weights(NULL, q, k, NULL, NULL, w), ATTN_ERR_NULL_POINTER, "desc", NULL));
    EXPECT(fails_with(attn_weights(d, NULL, k, NULL, NULL, w), ATTN_ERR_NULL_POINTER, "q is NULL",
                      NULL));
    EXPECT(fails_with(attn_weights(d, q, NULL, NULL, NULL, w), ATTN_ERR_NULL_POINTER, "k is NULL",
                      NULL));
    EXPECT(fails_with(attn_weights(d, q, k, NULL, NULL, NULL), ATTN_ERR_NULL_POINTER,
                      "weights is NULL", NULL));
    EXPECT(fails_with(attn_weights(d, big, k, NULL, NULL, big + 2), ATTN_ERR_INVALID_ARGUMENT,
                      "weights overlaps q", NULL));
    /* q and k may alias each other (self-attention on one buffer) */
    EXPECT(attn_forward(d, k, k, v, kv, NULL, out, lse) == ATTN_OK);
    /* a used descriptor is immutable */
    EXPECT(fails_with(attn_desc_set_causal(d, ATTN_CAUSAL_TOP_LEFT), ATTN_ERR_INVALID_ARGUMENT,
                      "already used", NULL));
    EXPECT(
        fails_with(attn_desc_set_scale(d, 2.0f), ATTN_ERR_INVALID_ARGUMENT, "already used", NULL));
    EXPECT(fails_with(attn_desc_set_strides(d, ATTN_Q, 8, 8, 4), ATTN_ERR_INVALID_ARGUMENT,
                      "already used", NULL));
    attn_desc_destroy(d);
}

static void test_simple(void) {
    const float q[3] = {0, 0, 0}, k[3] = {1, 2, 3}, v[3] = {10, 20, 30};
    float out[3];
    EXPECT(fails_with(attn_simple(NULL, k, v, 3, 1, true, NULL, out), ATTN_ERR_NULL_POINTER,
                      "attn_simple", "q is NULL"));
    EXPECT(fails_with(attn_simple(q, k, v, 3, 1, true, NULL, NULL), ATTN_ERR_NULL_POINTER,
                      "out is NULL", NULL));
    EXPECT(fails_with(attn_simple(q, k, v, 0, 1, true, NULL, out), ATTN_ERR_INVALID_ARGUMENT,
                      "n must be > 0", NULL));
    EXPECT(fails_with(attn_simple(q, k, v, 3, 0, true, NULL, out), ATTN_ERR_INVALID_ARGUMENT,
                      "d must be > 0", NULL));
    EXPECT(fails_with(attn_simple(q, k, v, (size_t)1 << 31, 1, true, NULL, out),
                      ATTN_ERR_INVALID_ARGUMENT, "n (2147483648)", "limit"));
    EXPECT(fails_with(attn_simple(q, k, v, 3, SIZE_MAX, true, NULL, out), ATTN_ERR_INVALID_ARGUMENT,
                      "d (", "limit"));
    EXPECT(attn_simple(q, k, v, 3, 1, true, NULL, out) == ATTN_OK);
    EXPECT(out[0] == 10.0f && out[1] == 15.0f);
    EXPECT(fabsf(out[2] - 20.0f) < 1e-5f);
    EXPECT(attn_simple(q, k, v, 3, 1, false, NULL, out) == ATTN_OK);
    EXPECT(fabsf(out[0] - 20.0f) < 1e-5f && fabsf(out[1] - 20.0f) < 1e-5f);
    const bool pad[3] = {true, true, false};
    EXPECT(attn_simple(q, k, v, 3, 1, false, pad, out) == ATTN_OK);
    EXPECT(out[0] == 15.0f && out[1] == 15.0f && out[2] == 15.0f);
    const bool none[3] = {false, false, false};
    EXPECT(attn_simple(q, k, v, 3, 1, true, none, out) == ATTN_OK);
    EXPECT(out[0] == 0.0f && out[1] == 0.0f && out[2] == 0.0f);
}

static void test_threads_and_isa(void) {
    EXPECT(fails_with(attn_set_num_threads(257), ATTN_ERR_INVALID_ARGUMENT, "n (257)", NULL));
    EXPECT(attn_set_num_threads(3) == ATTN_OK && attn_get_num_threads() == 3);
    EXPECT(attn_set_num_threads(0) == ATTN_OK && attn_get_num_threads() >= 1);
    EXPECT(fails_with(attn_set_isa("avx9000"), ATTN_ERR_INVALID_ARGUMENT, "avx9000", NULL));
    EXPECT(attn_set_isa("scalar") == ATTN_OK && strcmp(attn_isa(), "scalar") == 0);
    EXPECT(attn_set_isa(NULL) == ATTN_OK);
    const char *isa = attn_isa();
    EXPECT(!strcmp(isa, "scalar") || !strcmp(isa, "sse2") || !strcmp(isa, "avx2") ||
           !strcmp(isa, "avx512") || !strcmp(isa, "avx512fp16"));
    attn_status st = attn_set_isa("avx512");
    EXPECT(st == ATTN_OK || fails_with(st, ATTN_ERR_UNSUPPORTED, "avx512", NULL));
    attn_set_isa("");
}

/* Each thread's message is its own. */
static void *thread_error(void *arg) {
    (void)arg;
    attn_desc *d = NULL;
    attn_desc_create(&d, 1, 1, 1, 1, 1, 0);
    return (void *)(strstr(attn_last_error(), "head_dim must be > 0") != NULL ? (uintptr_t)1 : 0);
}

static void test_thread_local_errors(void) {
    attn_desc *d = NULL;
    EXPECT(attn_desc_create(&d, 1, 6, 4, 1, 1, 1) == ATTN_ERR_INVALID_ARGUMENT);
    pthread_t t;
    void *ok = NULL;
    EXPECT(pthread_create(&t, NULL, thread_error, NULL) == 0);
    pthread_join(t, &ok);
    EXPECT(ok == (void *)(uintptr_t)1);
    EXPECT(strstr(attn_last_error(), "heads_q (6)") != NULL); /* unchanged by the other thread */
    /* success leaves the last message alone */
    EXPECT(attn_desc_create(&d, 1, 1, 1, 1, 1, 1) == ATTN_OK);
    EXPECT(strstr(attn_last_error(), "heads_q (6)") != NULL);
    attn_desc_destroy(d);
}

/* scale * (q . k) = 1e20 is finite, so is the answer, on every ISA: scale 1e30,
 * q = [1e10], k = [1e-20, 0], v = [1, 2] gives out 1, weights [1, 0], lse 1e20 (folding the scale
 * into q would overflow to inf and give NaN). */
static void test_large_scale(void) {
    const char *isas[] = {"scalar", "sse2", "avx2", "avx512"};
    const float q[1] = {1e10f}, k[2] = {1e-20f, 0.0f}, v[2] = {1.0f, 2.0f};
    size_t x;
    for (x = 0; x < 4; ++x) {
        attn_desc *d = NULL;
        float out = -1.0f, lse = -1.0f, w[2] = {-1.0f, -1.0f};
        if (attn_set_isa(isas[x]) != ATTN_OK) continue;
        EXPECT(attn_desc_create(&d, 1, 1, 1, 1, 2, 1) == ATTN_OK);
        EXPECT(attn_desc_set_scale(d, 1e30f) == ATTN_OK);
        EXPECT(attn_forward(d, q, k, v, NULL, NULL, &out, &lse) == ATTN_OK);
        EXPECT(attn_weights(d, q, k, NULL, NULL, w) == ATTN_OK);
        EXPECT(out == 1.0f);
        EXPECT(w[0] == 1.0f && w[1] == 0.0f);
        EXPECT(fabs((double)lse - 1e20) <= 1e14);
        attn_desc_destroy(d);
    }
    attn_set_isa(NULL);
}

/* What a descriptor shows: every parameter (as a double; the ids the library knows) and the
 * required length of every operand. */
#define SNAP_PARAMS 64
#define SNAP_OPERANDS 27
typedef struct {
    double param[SNAP_PARAMS];
    size_t len[SNAP_OPERANDS];
} desc_snapshot;

static desc_snapshot snapshot(const attn_desc *d) {
    desc_snapshot s;
    memset(&s, 0, sizeof s);
    for (int p = 0; p < SNAP_PARAMS; ++p)
        if (attn_desc_get_float(d, (attn_param)p, &s.param[p]) != ATTN_OK) s.param[p] = -12345;
    for (int w = 0; w < SNAP_OPERANDS; ++w) s.len[w] = attn_desc_required_len(d, (attn_operand)w);
    return s;
}

static int same_snapshot(const desc_snapshot *a, const desc_snapshot *b) {
    for (int p = 0; p < SNAP_PARAMS; ++p)
        if (memcmp(&a->param[p], &b->param[p], sizeof(double)) != 0) {
            printf("  parameter %d changed: %.17g -> %.17g\n", p, a->param[p], b->param[p]);
            return 0;
        }
    for (int w = 0; w < SNAP_OPERANDS; ++w)
        if (a->len[w] != b->len[w]) {
            printf("  required length of operand %d changed: %zu -> %zu\n", w, a->len[w],
                   b->len[w]);
            return 0;
        }
    return 1;
}

/* Every setter either succeeds or changes nothing (a failing call, whatever its status, leaves
 * the descriptor as it was). The out-of-memory case is in tests/hardening/test_oom.cpp. */
static void test_failing_setters_change_nothing(void) {
    attn_desc *d = NULL;
    EXPECT(attn_desc_create(&d, 2, 4, 2, 3, 5, 8) == ATTN_OK);
    /* a configured descriptor: custom strides, a few parameters away from their defaults */
    EXPECT(attn_desc_set_strides(d, ATTN_V, 200, 60, 12) == ATTN_OK);
    EXPECT(attn_desc_set_strides(d, ATTN_BIAS, 0, 15, 5) == ATTN_OK);
    EXPECT(attn_desc_set_int(d, ATTN_PARAM_ALIBI, ATTN_ALIBI_STANDARD) == ATTN_OK);
    EXPECT(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, 7.5) == ATTN_OK);
    EXPECT(attn_desc_set_int(d, ATTN_PARAM_WINDOW_LEFT, 2) == ATTN_OK);
    EXPECT(attn_desc_set_strides(d, ATTN_OUT, 200, 50, 10) == ATTN_OK);
    const desc_snapshot before = snapshot(d);
    int p;
    for (p = 0; p < SNAP_PARAMS; ++p) {
        int is_float = 0;
        double lo = 0, hi = 0;
        if (attn_param_bounds((attn_param)p, &is_float, &lo, &hi) != ATTN_OK) continue;
        /* below, above, NaN, and a fraction for an integer parameter */
        EXPECT(attn_desc_set_float(d, (attn_param)p, lo - 1.0 - fabs(lo)) != ATTN_OK);
        EXPECT(attn_desc_set_float(d, (attn_param)p, NAN) != ATTN_OK);
        if (hi < 1e300) EXPECT(attn_desc_set_float(d, (attn_param)p, hi * 2.0 + 1.0) != ATTN_OK);
        if (!is_float) EXPECT(attn_desc_set_float(d, (attn_param)p, lo + 0.5) != ATTN_OK);
        if (!is_float) EXPECT(attn_desc_set_int(d, (attn_param)p, INT64_MIN) != ATTN_OK);
        desc_snapshot now = snapshot(d);
        if (!same_snapshot(&before, &now)) printf("  after the failing sets of parameter %d\n", p);
        EXPECT(same_snapshot(&before, &now));
    }
    /* head_dim_v wider than the custom OUT rows (which then would not nest) */
    EXPECT(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, 11) != ATTN_OK);
    EXPECT(attn_desc_set_strides(d, ATTN_OUT, SIZE_MAX / 4, 1, 1) != ATTN_OK);
    EXPECT(attn_desc_set_strides(d, ATTN_OUT, 0, 3, 8) != ATTN_OK);
    EXPECT(attn_desc_set_strides(d, ATTN_Q, SIZE_MAX / 2, 1, 1) != ATTN_OK);
    EXPECT(attn_desc_set_strides(d, ATTN_LSE, 1, 1, 1) != ATTN_OK);
    EXPECT(attn_desc_set_causal(d, (attn_causal)7) != ATTN_OK);
    EXPECT(attn_desc_set_scale(d, INFINITY) != ATTN_OK);
    {
        desc_snapshot now = snapshot(d);
        EXPECT(same_snapshot(&before, &now));
    }
    /* layout switches refused because custom strides would overflow in the new layout */
    {
        attn_desc *e = NULL;
        EXPECT(attn_desc_create(&e, 3, 2, 1, 2, 9, 4) == ATTN_OK);
        /* rows of K that fit 9 keys of a batch entry, not a varlen pack of 3 x 9 tokens */
        EXPECT(attn_desc_set_strides(e, ATTN_K, 1, 3, SIZE_MAX / 64) == ATTN_OK);
        const desc_snapshot b = snapshot(e);
        EXPECT(attn_desc_set_int(e, ATTN_PARAM_VARLEN, 1) != ATTN_OK);
        desc_snapshot now = snapshot(e);
        EXPECT(same_snapshot(&b, &now));
        attn_desc_destroy(e);
    }
    attn_desc_destroy(d);
    /* an args object keeps its binding when a bind fails */
    {
        attn_args *a = NULL;
        float q[4] = {1, 2, 3, 4};
        attn_desc *e = NULL;
        EXPECT(attn_desc_create(&e, 1, 1, 1, 1, 1, 4) == ATTN_OK);
        EXPECT(attn_args_create(&a) == ATTN_OK);
        EXPECT(attn_args_set_f32(a, ATTN_Q, q, 4) == ATTN_OK);
        EXPECT(attn_args_set_f32(a, ATTN_Q, NULL, 4) != ATTN_OK);
        EXPECT(attn_args_set_u8(a, ATTN_Q, (const uint8_t *)q, 4) != ATTN_OK);
        EXPECT(attn_args_set_i8(a, ATTN_Q, (const int8_t *)q, 4) != ATTN_OK);
        EXPECT(attn_args_set_out_f32(a, ATTN_Q, q, 4) != ATTN_OK);
        /* q is still bound: the forward runs (k, v, out bound now) */
        float k[4] = {1, 0, 0, 0}, v[4] = {5, 6, 7, 8}, out[4] = {0};
        EXPECT(attn_args_set_f32(a, ATTN_K, k, 4) == ATTN_OK);
        EXPECT(attn_args_set_f32(a, ATTN_V, v, 4) == ATTN_OK);
        EXPECT(attn_args_set_out_f32(a, ATTN_OUT, out, 4) == ATTN_OK);
        EXPECT(attn_run(e, ATTN_OP_FORWARD, a) == ATTN_OK);
        EXPECT(out[0] == 5.0f && out[3] == 8.0f);
        attn_args_destroy(a);
        attn_desc_destroy(e);
    }
}

/* E4M3 code c by its definition (finite codes): 2^(e-7) * (1 + m/8), subnormal m * 2^-9 */
static double e4m3(int c) {
    const int e = (c >> 3) & 15, m = c & 7;
    const double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return (c & 0x80) ? -v : v;
}

/* fp8 K / V from C: the bindings, the scale strides and their required lengths, the converters,
 * and one decode step against a float64 computation written out here. */
static void test_fp8(void) {
    attn_desc *d = NULL;
    attn_args *a = NULL;
    /* batch 1, 2 query heads on 2 KV heads, 1 query, 3 keys, head_dim 2 */
    EXPECT(attn_desc_create(&d, 1, 2, 2, 1, 3, 2) == ATTN_OK);
    EXPECT(attn_args_create(&a) == ATTN_OK);
    uint8_t k[12] = {0x38, 0x30, 0xb8, 0x40, 0x3c, 0x01, 0x44, 0xc0, 0x00, 0x7e, 0x34, 0x38};
    uint8_t v[12] = {0x38, 0x48, 0x40, 0xb0, 0x3a, 0x3e, 0x50, 0x30, 0x28, 0xc4, 0x31, 0x39};
    float q[4] = {0.5f, -0.25f, 0.125f, 1.0f}, out[4] = {0}, ks[2] = {0.5f, 0.03125f},
          vs[2] = {2.0f, 0.25f};
    EXPECT(fails_with(attn_args_set_fp8(a, ATTN_K, ATTN_DTYPE_I8, k, 12), ATTN_ERR_INVALID_ARGUMENT,
                      "attn_args_set_fp8", "fmt (3)"));
    EXPECT(fails_with(attn_args_set_fp8(a, ATTN_Q, ATTN_DTYPE_FP8_E4M3, k, 12),
                      ATTN_ERR_INVALID_ARGUMENT, "q cannot be bound", "fp8 storage is for K"));
    EXPECT(fails_with(attn_args_set_fp8(a, ATTN_K, ATTN_DTYPE_FP8_E4M3, NULL, 12),
                      ATTN_ERR_INVALID_ARGUMENT, "k is NULL with len 12", NULL));
    EXPECT(fails_with(attn_args_set_out_fp8(NULL, ATTN_K, ATTN_DTYPE_FP8_E5M2, k, 12),
                      ATTN_ERR_NULL_POINTER, "attn_args_set_out_fp8", "args"));
    /* the scale lengths: one per row by default, one per tensor / per KV head by zero strides */
    EXPECT(attn_desc_required_len(d, ATTN_K_SCALE) == 6);
    EXPECT(attn_desc_set_strides(d, ATTN_K_SCALE, 0, 0, 0) == ATTN_OK);
    EXPECT(attn_desc_required_len(d, ATTN_K_SCALE) == 1);
    EXPECT(attn_desc_set_strides(d, ATTN_K_SCALE, 0, 1, 0) == ATTN_OK);
    EXPECT(attn_desc_required_len(d, ATTN_K_SCALE) == 2);
    EXPECT(attn_desc_set_strides(d, ATTN_V_SCALE, 0, 1, 0) == ATTN_OK);
    EXPECT(attn_args_set_f32(a, ATTN_Q, q, 4) == ATTN_OK);
    EXPECT(attn_args_set_fp8(a, ATTN_K, ATTN_DTYPE_FP8_E4M3, k, 12) == ATTN_OK);
    EXPECT(attn_args_set_fp8(a, ATTN_V, ATTN_DTYPE_FP8_E4M3, v, 12) == ATTN_OK);
    EXPECT(attn_args_set_out_f32(a, ATTN_OUT, out, 4) == ATTN_OK);
    EXPECT(attn_args_set_f32(a, ATTN_K_SCALE, ks, 1) == ATTN_OK);
    EXPECT(attn_args_set_f32(a, ATTN_V_SCALE, vs, 2) == ATTN_OK);
    EXPECT(fails_with(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_INVALID_ARGUMENT,
                      "k_scale has 1 elements", "needs at least 2"));
    EXPECT(attn_args_set_f32(a, ATTN_K_SCALE, ks, 2) == ATTN_OK);
    /* a failed bind keeps the binding */
    EXPECT(attn_args_set_fp8(a, ATTN_K, (attn_dtype)99, k, 12) == ATTN_ERR_INVALID_ARGUMENT);
    EXPECT(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
    double worst = 0;
    for (int h = 0; h < 2; ++h) {
        double s[3], m = -INFINITY, den = 0;
        for (int j = 0; j < 3; ++j) {
            const uint8_t *kr = k + (h * 3 + j) * 2;
            s[j] = (q[h * 2] * (double)(float)(e4m3(kr[0]) * ks[h]) +
                    q[h * 2 + 1] * (double)(float)(e4m3(kr[1]) * ks[h])) /
                   sqrt(2.0);
            if (s[j] > m) m = s[j];
        }
        for (int j = 0; j < 3; ++j) den += (s[j] = exp(s[j] - m));
        for (int e = 0; e < 2; ++e) {
            double o = 0;
            for (int j = 0; j < 3; ++j)
                o += s[j] / den * (double)(float)(e4m3(v[(h * 3 + j) * 2 + e]) * vs[h]);
            const double err = fabs(o - out[h * 2 + e]) / (fabs(o) > 1 ? fabs(o) : 1);
            if (err > worst) worst = err;
        }
    }
    EXPECT(worst <= 1e-6);
    /* a scale on an fp32 K is refused; none on an fp8 K reads as 1 */
    float kf[12] = {0};
    EXPECT(attn_args_set_f32(a, ATTN_K, kf, 12) == ATTN_OK);
    EXPECT(fails_with(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_INVALID_ARGUMENT,
                      "k_scale is bound but k is not int8 or fp8", NULL));
    EXPECT(attn_args_set_fp8(a, ATTN_K, ATTN_DTYPE_FP8_E5M2, k, 12) == ATTN_OK);
    EXPECT(attn_args_set_f32(a, ATTN_K_SCALE, NULL, 0) == ATTN_OK);
    EXPECT(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
    attn_args_destroy(a);
    attn_desc_destroy(d);
    /* the converters */
    float x[6] = {1.0f, -448.0f, 1e6f, 0.0f, NAN, 2.0f}, y[6];
    uint8_t c[6] = {0};
    EXPECT(attn_quantize_fp8(x, 2, 2, ATTN_DTYPE_FP8_E4M3, 1.0f, c) == ATTN_OK);
    EXPECT(c[0] == 0x38 && c[1] == 0xfe && c[2] == 0x7e && c[3] == 0x00);
    EXPECT(attn_dequantize_fp8(c, 2, 2, ATTN_DTYPE_FP8_E4M3, 0.5f, y) == ATTN_OK);
    EXPECT(y[0] == 0.5f && y[1] == -224.0f && y[2] == 224.0f && y[3] == 0.0f);
    EXPECT(fails_with(attn_quantize_fp8(x, 3, 2, ATTN_DTYPE_FP8_E5M2, 1.0f, c),
                      ATTN_ERR_INVALID_ARGUMENT, "attn_quantize_fp8", "src row 2"));
    EXPECT(c[0] == 0x3c && c[3] == 0x00); /* the rows before it are written (E5M2 1.0, 0) */
    EXPECT(fails_with(attn_quantize_fp8(x, 2, 2, ATTN_DTYPE_FP8_E4M3, 0.0f, c),
                      ATTN_ERR_INVALID_ARGUMENT, "scale (0)", "> 0"));
    EXPECT(fails_with(attn_dequantize_fp8(c, 2, 2, (attn_dtype)0, 1.0f, y),
                      ATTN_ERR_INVALID_ARGUMENT, "attn_dequantize_fp8", "not an fp8 format"));
}

int main(void) {
    test_version_and_status();
    test_create();
    test_setters();
    test_forward_errors();
    test_simple();
    test_threads_and_isa();
    test_thread_local_errors();
    test_large_scale();
    test_failing_setters_change_nothing();
    test_fp8();
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
