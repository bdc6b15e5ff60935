/* The model queries against the behaviour they describe: attn_operand_info's type sets against
 * what every setter accepts, attn_param_info against attn_param_bounds and against setting the
 * bounds, the defaults and values just outside them, attn_isa_info against attn_set_isa.
 * Prints "N passed, M failed". */
#include <attn.h>

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
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

/* Every setter, with the type it binds and its direction. */
enum { N_SETTERS = 14 };
static const struct {
    const char *name;
    attn_dtype type;
    int output;
} k_setters[N_SETTERS] = {
    {"attn_args_set_f32", ATTN_DTYPE_F32, 0},
    {"attn_args_set_f16", ATTN_DTYPE_F16, 0},
    {"attn_args_set_bf16", ATTN_DTYPE_BF16, 0},
    {"attn_args_set_i8", ATTN_DTYPE_I8, 0},
    {"attn_args_set_u8", ATTN_DTYPE_U8, 0},
    {"attn_args_set_i32", ATTN_DTYPE_I32, 0},
    {"attn_args_set_out_f32", ATTN_DTYPE_F32, 1},
    {"attn_args_set_out_f16", ATTN_DTYPE_F16, 1},
    {"attn_args_set_out_bf16", ATTN_DTYPE_BF16, 1},
    {"attn_args_set_out_i8", ATTN_DTYPE_I8, 1},
    {"attn_args_set_fp8", ATTN_DTYPE_FP8_E4M3, 0},
    {"attn_args_set_fp8", ATTN_DTYPE_FP8_E5M2, 0},
    {"attn_args_set_out_fp8", ATTN_DTYPE_FP8_E4M3, 1},
    {"attn_args_set_out_fp8", ATTN_DTYPE_FP8_E5M2, 1},
};

/* What attn.h says each setter binds, written out plainly: the independent reference the table
 * (and the setters, which follow the table) is checked against. -1 ends a list. */
static const int k_header_accepts[N_SETTERS][16] = {
    {ATTN_Q, ATTN_K, ATTN_V, ATTN_BIAS, ATTN_ALIBI_SLOPES, ATTN_SINKS, ATTN_NEW_K, ATTN_NEW_V,
     ATTN_DOUT, ATTN_K_SCALE, ATTN_V_SCALE, ATTN_NEW_K_SCALE, ATTN_NEW_V_SCALE, ATTN_Q_SCALE, -1},
    {ATTN_Q, ATTN_K, ATTN_V, ATTN_DOUT, ATTN_NEW_K, ATTN_NEW_V, -1},
    {ATTN_Q, ATTN_K, ATTN_V, ATTN_DOUT, ATTN_NEW_K, ATTN_NEW_V, -1},
    {ATTN_K, ATTN_V, ATTN_NEW_K, ATTN_NEW_V, -1},
    {ATTN_KEY_VALID, ATTN_ALLOWED, ATTN_QUERY_VALID, -1},
    {ATTN_SEQ_LENS_K, ATTN_CU_SEQLENS_Q, ATTN_CU_SEQLENS_K, ATTN_BLOCK_TABLE, -1},
    {ATTN_OUT, ATTN_LSE, ATTN_WEIGHTS, ATTN_KEY_MASS, ATTN_DQ, ATTN_DK, ATTN_DV, ATTN_DBIAS,
     ATTN_DSINKS, ATTN_K, ATTN_V, ATTN_K_SCALE, ATTN_V_SCALE, -1},
    {ATTN_K, ATTN_V, -1},
    {ATTN_K, ATTN_V, -1},
    {ATTN_K, ATTN_V, -1},
    {ATTN_K, ATTN_V, ATTN_NEW_K, ATTN_NEW_V, -1},
    {ATTN_K, ATTN_V, ATTN_NEW_K, ATTN_NEW_V, -1},
    {ATTN_K, ATTN_V, -1},
    {ATTN_K, ATTN_V, -1},
};
/* attn_desc_set_strides' list in attn.h */
static const int k_header_strided[] = {ATTN_Q,    ATTN_K,       ATTN_V,       ATTN_OUT,
                                       ATTN_BIAS, ATTN_K_SCALE, ATTN_V_SCALE, ATTN_ALIBI_SLOPES};

static int header_accepts(int s, int w) {
    for (int x = 0; k_header_accepts[s][x] >= 0; ++x)
        if (k_header_accepts[s][x] == w) return 1;
    return 0;
}

static int header_strided(int w) {
    for (size_t x = 0; x < sizeof k_header_strided / sizeof k_header_strided[0]; ++x)
        if (k_header_strided[x] == w) return 1;
    return 0;
}

static attn_status call_setter(int s, attn_args *a, attn_operand w, void *buf) {
    switch (s) {
    case 0:
        return attn_args_set_f32(a, w, (const float *)buf, 1);
    case 1:
        return attn_args_set_f16(a, w, (const uint16_t *)buf, 1);
    case 2:
        return attn_args_set_bf16(a, w, (const uint16_t *)buf, 1);
    case 3:
        return attn_args_set_i8(a, w, (const int8_t *)buf, 1);
    case 4:
        return attn_args_set_u8(a, w, (const uint8_t *)buf, 1);
    case 5:
        return attn_args_set_i32(a, w, (const int32_t *)buf, 1);
    case 6:
        return attn_args_set_out_f32(a, w, (float *)buf, 1);
    case 7:
        return attn_args_set_out_f16(a, w, (uint16_t *)buf, 1);
    case 8:
        return attn_args_set_out_bf16(a, w, (uint16_t *)buf, 1);
    case 9:
        return attn_args_set_out_i8(a, w, (int8_t *)buf, 1);
    case 10:
    case 11:
        return attn_args_set_fp8(a, w, k_setters[s].type, (const uint8_t *)buf, 1);
    default:
        return attn_args_set_out_fp8(a, w, k_setters[s].type, (uint8_t *)buf, 1);
    }
}

static void test_operands(void) {
    float buf[4] = {0};
    attn_args *a = NULL;
    EXPECT(attn_args_create(&a) == ATTN_OK);
    int count = 0;
    for (int w = 0;; ++w) {
        const char *name = NULL;
        unsigned in = 0, out = 0;
        int rank = -1, strided = -1;
        const attn_status st =
            attn_operand_info((attn_operand)w, &name, &in, &out, &rank, &strided);
        if (st != ATTN_OK) {
            EXPECT(st == ATTN_ERR_INVALID_ARGUMENT);
            EXPECT(strstr(attn_last_error(), "attn_operand_info") != NULL);
            break;
        }
        ++count;
        EXPECT(name != NULL && name[0] != '\0');
        EXPECT(in != 0 || out != 0);
        EXPECT((in | out) < (1u << (ATTN_DTYPE_FP8_E5M2 + 1)));
        EXPECT(rank >= 1 && rank <= 4);
        /* strided: attn_desc_set_strides accepts it (zero strides are valid for every operand
         * that takes strides, except OUT, whose rows must not overlap: its default strides) */
        EXPECT(strided == header_strided(w));
        attn_desc *d = NULL;
        EXPECT(attn_desc_create(&d, 1, 1, 1, 1, 1, 1) == ATTN_OK);
        const attn_status ss =
            attn_desc_set_strides(d, (attn_operand)w, 1, 1, w == ATTN_ALIBI_SLOPES ? 0 : 1);
        if (ss != (strided ? ATTN_OK : ATTN_ERR_INVALID_ARGUMENT))
            printf("  operand %s: strided %d but attn_desc_set_strides gave %d\n", name, strided,
                   (int)ss);
        EXPECT(ss == (strided ? ATTN_OK : ATTN_ERR_INVALID_ARGUMENT));
        attn_desc_destroy(d);
        /* every setter on this operand: accepted exactly when its type is in the set */
        for (int s = 0; s < N_SETTERS; ++s) {
            const unsigned set = k_setters[s].output ? out : in;
            const int want_ok = (set >> k_setters[s].type) & 1u;
            if (want_ok != header_accepts(s, w))
                printf("  operand %s with %s: the type set says %d, attn.h says %d\n", name,
                       k_setters[s].name, want_ok, header_accepts(s, w));
            EXPECT(want_ok == header_accepts(s, w));
            const attn_status got = call_setter(s, a, (attn_operand)w, buf);
            if ((got == ATTN_OK) != want_ok || (!want_ok && got != ATTN_ERR_INVALID_ARGUMENT))
                printf("  operand %s with %s: status %d, the type set says %s\n", name,
                       k_setters[s].name, (int)got, want_ok ? "accepted" : "refused");
            EXPECT((got == ATTN_OK) == want_ok);
            if (!want_ok) {
                /* the refusal names the operand and the setter, as the table spells them */
                EXPECT(got == ATTN_ERR_INVALID_ARGUMENT);
                EXPECT(strstr(attn_last_error(), name) != NULL);
                EXPECT(strstr(attn_last_error(), k_setters[s].name) != NULL);
            }
            EXPECT(attn_args_clear(a) == ATTN_OK);
        }
        /* the name is the one messages use: a NULL buffer with a length names it */
        {
            const int s = in ? (in & (1u << ATTN_DTYPE_U8)    ? 4
                                : in & (1u << ATTN_DTYPE_I32) ? 5
                                                              : 0)
                             : 6;
            attn_status got;
            switch (s) {
            case 4:
                got = attn_args_set_u8(a, (attn_operand)w, NULL, 3);
                break;
            case 5:
                got = attn_args_set_i32(a, (attn_operand)w, NULL, 3);
                break;
            case 6:
                got = attn_args_set_out_f32(a, (attn_operand)w, NULL, 3);
                break;
            default:
                got = attn_args_set_f32(a, (attn_operand)w, NULL, 3);
            }
            char want[64];
            snprintf(want, sizeof want, ": %s is NULL with len 3", name);
            EXPECT(got == ATTN_ERR_INVALID_ARGUMENT && strstr(attn_last_error(), want) != NULL);
        }
    }
    /* every operand of the header, no more */
    EXPECT(count == ATTN_Q_SCALE + 1);
    EXPECT(attn_operand_info((attn_operand)-1, NULL, NULL, NULL, NULL, NULL) ==
           ATTN_ERR_INVALID_ARGUMENT);
    /* spot checks against attn.h's shapes */
    {
        const char *name;
        unsigned in, out;
        int rank, strided;
        EXPECT(attn_operand_info(ATTN_LSE, &name, &in, &out, &rank, &strided) == ATTN_OK);
        EXPECT(!strcmp(name, "lse") && in == 0 && out == (1u << ATTN_DTYPE_F32) && rank == 3 &&
               strided == 0);
        EXPECT(attn_operand_info(ATTN_K, &name, &in, &out, &rank, &strided) == ATTN_OK);
        EXPECT(!strcmp(name, "k") && rank == 4 && strided == 1 && in == out &&
               in == ((1u << ATTN_DTYPE_F32) | (1u << ATTN_DTYPE_F16) | (1u << ATTN_DTYPE_BF16) |
                      (1u << ATTN_DTYPE_I8) | (1u << ATTN_DTYPE_FP8_E4M3) |
                      (1u << ATTN_DTYPE_FP8_E5M2)));
        EXPECT(attn_operand_info(ATTN_CU_SEQLENS_Q, &name, NULL, NULL, &rank, NULL) == ATTN_OK);
        EXPECT(!strcmp(name, "cu_seqlens_q") && rank == 1);
        EXPECT(attn_operand_info(ATTN_KEY_VALID, NULL, &in, NULL, &rank, NULL) == ATTN_OK);
        EXPECT(in == (1u << ATTN_DTYPE_U8) && rank == 2);
    }
    attn_args_destroy(a);
}

/* "ATTN_PARAM_" + the name in capitals: how messages name a parameter. */
static void id_name(const char *name, char *out, size_t n) {
    size_t x = (size_t)snprintf(out, n, "ATTN_PARAM_");
    for (; *name && x + 1 < n; ++name) out[x++] = (char)toupper((unsigned char)*name);
    out[x] = '\0';
}

static void test_params(void) {
    int count = 0;
    for (int p = 0;; ++p) {
        const char *name = NULL;
        int is_float = -1, bf = -1;
        double mn = 0, mx = 0, def = 0, bmn = 0, bmx = 0;
        const attn_status st = attn_param_info((attn_param)p, &name, &is_float, &mn, &mx, &def);
        if (st != ATTN_OK) {
            EXPECT(st == ATTN_ERR_INVALID_ARGUMENT);
            EXPECT(attn_param_bounds((attn_param)p, NULL, NULL, NULL) == ATTN_ERR_INVALID_ARGUMENT);
            break;
        }
        ++count;
        /* the same facts as attn_param_bounds */
        EXPECT(attn_param_bounds((attn_param)p, &bf, &bmn, &bmx) == ATTN_OK);
        EXPECT(bf == is_float && bmn == mn && bmx == mx);
        EXPECT(name != NULL && name[0] != '\0');
        char idn[64];
        id_name(name, idn, sizeof idn);
        /* a new descriptor holds the default */
        attn_desc *d = NULL;
        EXPECT(attn_desc_create(&d, 2, 4, 2, 3, 5, 16) == ATTN_OK);
        double v = -12345;
        EXPECT(attn_desc_get_float(d, (attn_param)p, &v) == ATTN_OK);
        if (isnan(def)) {
            /* follows the shape: scale 1/sqrt(head_dim), head_dim_v = head_dim */
            EXPECT(p == ATTN_PARAM_SCALE || p == ATTN_PARAM_HEAD_DIM_V);
            EXPECT(v == (p == ATTN_PARAM_SCALE ? (double)(1.0f / sqrtf(16.0f)) : 16.0));
        } else {
            if (v != def) printf("  %s: default %g, a new descriptor holds %g\n", name, def, v);
            EXPECT(v == def);
        }
        attn_desc_destroy(d);
        /* min and max are accepted and read back; just outside is refused, naming the
         * parameter */
        const double edges[2] = {mn, mx};
        for (int e = 0; e < 2; ++e) {
            EXPECT(attn_desc_create(&d, 2, 4, 2, 3, 5, 16) == ATTN_OK);
            const attn_status s1 = attn_desc_set_float(d, (attn_param)p, edges[e]);
            if (s1 != ATTN_OK)
                printf("  %s = %.17g refused: %s\n", name, edges[e], attn_last_error());
            EXPECT(s1 == ATTN_OK);
            EXPECT(attn_desc_get_float(d, (attn_param)p, &v) == ATTN_OK);
            EXPECT(v == (is_float ? (double)(float)edges[e] : edges[e]));
            if (!is_float) {
                EXPECT(attn_desc_set_int(d, (attn_param)p, (int64_t)edges[e]) == ATTN_OK);
                const int64_t beyond = (int64_t)edges[e] + (e ? 1 : -1);
                EXPECT(attn_desc_set_int(d, (attn_param)p, beyond) == ATTN_ERR_INVALID_ARGUMENT);
                EXPECT(strstr(attn_last_error(), idn) != NULL);
            }
            /* the next double outside (below 0 for a float minimum of 0) */
            const double beyond = !is_float ? edges[e] + (e ? 1 : -1)
                                  : e       ? mx * 2
                                  : mn < 0  ? mn * 2
                                            : mn - 1e-300;
            EXPECT(attn_desc_set_float(d, (attn_param)p, beyond) == ATTN_ERR_INVALID_ARGUMENT);
            EXPECT(strstr(attn_last_error(), idn) != NULL);
            attn_desc_destroy(d);
        }
    }
    EXPECT(count == ATTN_PARAM_ALIBI_FORM + 1);
    EXPECT(attn_param_info((attn_param)-1, NULL, NULL, NULL, NULL, NULL) ==
           ATTN_ERR_INVALID_ARGUMENT);
    const char *name = NULL;
    EXPECT(attn_param_info(ATTN_PARAM_BATCH_INVARIANT, &name, NULL, NULL, NULL, NULL) == ATTN_OK);
    EXPECT(name && !strcmp(name, "batch_invariant"));
}

static void test_isas(void) {
    /* the names attn.h lists, in its order */
    static const char *const header[] = {"scalar", "sse2", "avx2", "avx512", "avx512fp16"};
    int count = 0;
    for (int i = 0;; ++i) {
        const char *name = NULL;
        int supported = -1;
        const attn_status st = attn_isa_info(i, &name, &supported);
        if (st != ATTN_OK) {
            EXPECT(st == ATTN_ERR_INVALID_ARGUMENT);
            break;
        }
        ++count;
        EXPECT(i < 5 && name && !strcmp(name, header[i]));
        EXPECT(supported == 0 || supported == 1);
        const attn_status set = attn_set_isa(name);
        EXPECT(set == (supported ? ATTN_OK : ATTN_ERR_UNSUPPORTED));
        if (set == ATTN_OK) EXPECT(!strcmp(attn_isa(), name));
        EXPECT(attn_set_isa(NULL) == ATTN_OK);
    }
    EXPECT(count == 5);
    int supported = 0;
    EXPECT(attn_isa_info(0, NULL, &supported) == ATTN_OK && supported == 1); /* scalar */
    EXPECT(attn_isa_info(-1, NULL, NULL) == ATTN_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(attn_last_error(), "scalar, sse2, avx2, avx512, avx512fp16") != NULL);
}

/* The shapes attn.h gives each operand, written out plainly (the reference of attn_operand_dims).
 */
static const char *const k_header_dims[] = {
    "batch heads_q seq_q head_dim",
    "batch heads_kv seq_k head_dim",
    "batch heads_kv seq_k head_dim_v",
    "batch heads_q seq_q head_dim_v",
    "batch heads_q seq_q",
    "batch heads_q seq_q seq_k",
    "batch seq_k",
    "seq_q seq_k",
    "batch heads_q seq_q seq_k",
    "heads_q",
    "heads_q",
    "batch seq_q",
    "batch",
    "batch heads_q seq_k",
    "batch+1",
    "batch+1",
    "batch max_pages",
    "batch*seq_q heads_kv head_dim",
    "batch*seq_q heads_kv head_dim_v",
    "batch heads_q seq_q head_dim_v",
    "batch heads_q seq_q head_dim",
    "batch heads_kv seq_k head_dim",
    "batch heads_kv seq_k head_dim_v",
    "batch heads_q seq_q seq_k",
    "heads_q",
    "batch heads_kv seq_k",
    "batch heads_kv seq_k",
    "batch*seq_q heads_kv",
    "batch*seq_q heads_kv",
    "heads_q",
};

/* The value of one word of a dims string for the descriptor below. */
static size_t dim_value(const char *w, size_t n) {
    static const struct {
        const char *name;
        size_t value;
    } k[] = {{"batch", 2},   {"heads_q", 6},     {"heads_kv", 3},   {"seq_q", 5},
             {"seq_k", 7},   {"head_dim", 11},   {"head_dim_v", 4}, {"max_pages", 9},
             {"batch+1", 3}, {"batch*seq_q", 10}};
    for (size_t x = 0; x < sizeof k / sizeof k[0]; ++x)
        if (strlen(k[x].name) == n && strncmp(k[x].name, w, n) == 0) return k[x].value;
    return 0;
}

/* attn_operand_dims: the header's shapes, `rank` words each, whose product is each operand's
 * required length in a dense descriptor. */
static void test_dims(void) {
    attn_desc *d = NULL;
    EXPECT(attn_desc_create(&d, 2, 6, 3, 5, 7, 11) == ATTN_OK);
    EXPECT(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, 4) == ATTN_OK);
    EXPECT(attn_desc_set_int(d, ATTN_PARAM_PAGE_SIZE, 4) == ATTN_OK);
    EXPECT(attn_desc_set_int(d, ATTN_PARAM_MAX_PAGES, 9) == ATTN_OK);
    const int n = (int)(sizeof k_header_dims / sizeof k_header_dims[0]);
    for (int w = 0; w < n; ++w) {
        const char *dims = NULL;
        int rank = -1, words = 0;
        EXPECT(attn_operand_dims((attn_operand)w, &dims) == ATTN_OK && dims != NULL);
        EXPECT(attn_operand_info((attn_operand)w, NULL, NULL, NULL, &rank, NULL) == ATTN_OK);
        if (!dims) continue;
        EXPECT(strcmp(dims, k_header_dims[w]) == 0);
        size_t product = 1;
        for (const char *s = dims; *s;) {
            const size_t len = strcspn(s, " ");
            product *= dim_value(s, len);
            ++words;
            s += len + (s[len] == ' ');
        }
        EXPECT(words == rank);
        /* K, V and their scales are page pools with a paged cache: their length is not a shape */
        if (w != ATTN_K && w != ATTN_V && w != ATTN_K_SCALE && w != ATTN_V_SCALE && w != ATTN_DK &&
            w != ATTN_DV)
            EXPECT(attn_desc_required_len(d, (attn_operand)w) == product);
    }
    const char *dims = NULL;
    EXPECT(attn_operand_dims((attn_operand)n, &dims) == ATTN_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(attn_last_error(), "attn_operand_dims: which (") != NULL);
    EXPECT(attn_operand_dims(ATTN_Q, NULL) == ATTN_ERR_NULL_POINTER);
    attn_desc_destroy(d);
}

int main(void) {
    test_operands();
    test_dims();
    test_params();
    test_isas();
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
