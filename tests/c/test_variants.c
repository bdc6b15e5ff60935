/* Shared vectors of the extensible call (tests/vectors/variants.txt, storage.txt, backward.txt
 * and errors.txt, made by the float64 reference; format in tests/vectors/VARIANTS.md) through
 * attn_args / attn_run.
 * Usage: test_variants <vectors dir>.
 *
 * variants.txt: every case runs ATTN_OP_FORWARD (out, lse, and key_mass when mass=1) and
 * ATTN_OP_WEIGHTS with the default ISA and thread count, then again on every ISA this CPU
 * supports with 1 and 2 threads; each run is compared with the expected files (out and lse
 * within the line's tol when it gives one: a fast mode of ATTN_PARAM_COMPUTE), and the 2-thread
 * run must give the 1-thread run's bits on each ISA. The default run is appended to
 * $ATTN_XLANG_DIR/c.variants.bin (when that variable is set): the other languages must match it
 * byte for byte. storage.txt runs the same way with Q/K/V bound through the
 * 16-bit / int8 setters (c.storage.bin); backward.txt runs the forward, then ATTN_OP_BACKWARD
 * with the listed gradients (c.backward.bin).
 * errors.txt: every case is configured and run with its one break; the first failing call must
 * return the expected status with a message naming the expected word.
 * Prints "N passed, M failed" (cases of both files). */
#include <attn.h>

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Operand names (as the files spell them) and element types, indexed by attn_operand: the
 * library's own table, read with attn_operand_info at start-up (load_operands), so a new
 * operand needs no change here. */
#define MAX_OPERANDS 64
static struct {
    const char *name;
    unsigned in_types, out_types;
} k_operands[MAX_OPERANDS];
static int g_n_operands;
#define N_PARAMS 14

static void load_operands(void) {
    for (g_n_operands = 0; g_n_operands < MAX_OPERANDS; ++g_n_operands) {
        const int w = g_n_operands;
        if (attn_operand_info((attn_operand)w, &k_operands[w].name, &k_operands[w].in_types,
                              &k_operands[w].out_types, NULL, NULL) != ATTN_OK)
            return;
    }
    fprintf(stderr, "more than %d operands: raise MAX_OPERANDS\n", MAX_OPERANDS);
    exit(2);
}

/* Element type of operand w as an input file holds it: 'u' byte (u8), 'i' int32 (i32), 'f'
 * float32 (f32); 'o' for an operand that is never an input (a float32 output). */
static char kind_of(int w) {
    const unsigned in = k_operands[w].in_types;
    return in & (1u << ATTN_DTYPE_U8) ? 'u' : in & (1u << ATTN_DTYPE_I32) ? 'i' : in ? 'f' : 'o';
}

/* Storage of Q, K, V (storage.txt): 0 f32, then these. */
static const char *const k_store[4] = {"f32", "f16", "bf16", "i8"};
static const size_t k_store_bytes[4] = {4, 2, 2, 1};

/* Gradients (backward.txt), in the grads order. */
static const int k_grads[5] = {ATTN_DQ, ATTN_DK, ATTN_DV, ATTN_DBIAS, ATTN_DSINKS};

/* Parameters in the order they are set (VARIANTS.md), with their attn_param and kind. */
static const struct {
    const char *key;
    attn_param id;
    int is_float;
} k_params[N_PARAMS] = {
    {"causal", ATTN_PARAM_CAUSAL, 0},
    {"window_left", ATTN_PARAM_WINDOW_LEFT, 0},
    {"window_right", ATTN_PARAM_WINDOW_RIGHT, 0},
    {"softcap", ATTN_PARAM_SOFTCAP, 1},
    {"alibi", ATTN_PARAM_ALIBI, 0},
    {"softmax_plus_one", ATTN_PARAM_SOFTMAX_PLUS_ONE, 0},
    {"head_dim_v", ATTN_PARAM_HEAD_DIM_V, 0},
    {"bias_first", ATTN_PARAM_BIAS_FIRST, 0},
    {"weights_mode", ATTN_PARAM_WEIGHTS_MODE, 0},
    {"scale", ATTN_PARAM_SCALE, 1},
    {"varlen", ATTN_PARAM_VARLEN, 0},
    {"diagonal", ATTN_PARAM_DIAGONAL, 0},
    {"alibi_form", ATTN_PARAM_ALIBI_FORM, 0},
    {"compute", ATTN_PARAM_COMPUTE, 0},
};

/* Operands that take strides, in the order they are set. */
static const attn_operand k_strided[8] = {ATTN_Q,    ATTN_K,       ATTN_V,       ATTN_OUT,
                                          ATTN_BIAS, ATTN_K_SCALE, ATTN_V_SCALE, ATTN_ALIBI_SLOPES};

typedef struct {
    char name[128];
    size_t dims[6]; /* batch heads_q heads_kv seq_q seq_k head_dim */
    int has_param[N_PARAMS];
    char param[N_PARAMS][64];
    int has_strides[MAX_OPERANDS];
    size_t strides[MAX_OPERANDS][3];
    int in[MAX_OPERANDS]; /* bound inputs */
    int mass;
    double tol;             /* tolerance of the forward's out and lse (1e-5 unless given) */
    int store[3];           /* storage.txt: index into k_store of q, k, v */
    int grad[MAX_OPERANDS]; /* backward.txt: the gradients to compute */
    int has_grads;
    /* errors.txt only */
    attn_op op;
    int serving_op; /* 0: attn_run(op); 1: attn_kv_append; 2: attn_merge */
    char brk[128];
    int status;
    char names[64];
} vcase;

static const char *g_dir;

static int operand_id(const char *name, size_t len) {
    for (int w = 0; w < g_n_operands; ++w)
        if (strlen(k_operands[w].name) == len && !strncmp(k_operands[w].name, name, len)) return w;
    return -1;
}

static int param_index(const char *key, size_t len) {
    for (int x = 0; x < N_PARAMS; ++x)
        if (strlen(k_params[x].key) == len && !strncmp(k_params[x].key, key, len)) return x;
    return -1;
}

static int parse_strides(const char *val, size_t *s) {
    return sscanf(val, "%zu,%zu,%zu", &s[0], &s[1], &s[2]) == 3;
}

/* One line into *c; 0 on a malformed line. */
static int parse_line(char *line, vcase *c) {
    static const char *dim_keys[6] = {"batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim"};
    memset(c, 0, sizeof *c);
    c->op = ATTN_OP_FORWARD;
    c->status = -1;
    c->tol = 1e-5;
    int ndims = 0;
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        char *eq = strchr(tok, '=');
        if (!eq) return 0;
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        int known = 0, x;
        if (!strcmp(key, "name")) {
            snprintf(c->name, sizeof c->name, "%s", val);
            known = 1;
        }
        for (x = 0; x < 6; ++x)
            if (!strcmp(key, dim_keys[x])) {
                c->dims[x] = strtoull(val, NULL, 10);
                ++ndims;
                known = 1;
            }
        if ((x = param_index(key, strlen(key))) >= 0) {
            c->has_param[x] = 1;
            snprintf(c->param[x], sizeof c->param[x], "%s", val);
            known = 1;
        }
        if (!strncmp(key, "strides.", 8)) {
            const int w = operand_id(key + 8, strlen(key + 8));
            if (w < 0 || !parse_strides(val, c->strides[w])) return 0;
            c->has_strides[w] = 1;
            known = 1;
        }
        if (!strcmp(key, "in")) {
            for (const char *p = val; *p;) {
                const size_t n = strcspn(p, ",");
                const int w = operand_id(p, n);
                if (w < 0 || !k_operands[w].in_types) {
                    fprintf(stderr, "in: %.*s is not an input operand of the library\n", (int)n, p);
                    return 0;
                }
                c->in[w] = 1;
                p += n + (p[n] == ',');
            }
            known = 1;
        }
        if (!strcmp(key, "mass")) c->mass = atoi(val), known = 1;
        if (!strcmp(key, "tol")) {
            char *end;
            c->tol = strtod(val, &end);
            if (*end || !(c->tol > 0.0)) return 0;
            known = 1;
        }
        if (!strncmp(key, "store.", 6)) {
            const int w = operand_id(key + 6, strlen(key + 6));
            int t = -1;
            for (int x = 1; x < 4; ++x)
                if (!strcmp(val, k_store[x])) t = x;
            if (w < ATTN_Q || w > ATTN_V || t < 0) return 0;
            c->store[w] = t;
            known = 1;
        }
        if (!strcmp(key, "grads")) {
            for (const char *p = val; *p;) {
                const size_t n = strcspn(p, ",");
                const int w = operand_id(p, n);
                if (w < ATTN_DQ || w > ATTN_DSINKS) return 0;
                c->grad[w] = 1;
                p += n + (p[n] == ',');
            }
            c->has_grads = 1;
            known = 1;
        }
        if (!strcmp(key, "op")) {
            if (!strcmp(val, "forward"))
                c->op = ATTN_OP_FORWARD;
            else if (!strcmp(val, "weights"))
                c->op = ATTN_OP_WEIGHTS;
            else if (!strcmp(val, "kv_append"))
                c->serving_op = 1;
            else if (!strcmp(val, "merge"))
                c->serving_op = 2;
            else
                return 0;
            known = 1;
        }
        if (!strcmp(key, "break")) snprintf(c->brk, sizeof c->brk, "%s", val), known = 1;
        if (!strcmp(key, "status")) c->status = atoi(val), known = 1;
        if (!strcmp(key, "names")) snprintf(c->names, sizeof c->names, "%s", val), known = 1;
        if (!known) {
            fprintf(stderr, "unknown key %s\n", key);
            return 0;
        }
    }
    return c->name[0] != '\0' && ndims == 6;
}

/* Sets parameter x from its decimal text; returns the status. */
static attn_status set_param(attn_desc *d, int x, const char *val) {
    if (k_params[x].is_float) return attn_desc_set_float(d, k_params[x].id, strtod(val, NULL));
    return attn_desc_set_int(d, k_params[x].id, (int64_t)strtoll(val, NULL, 10));
}

/* Creates the descriptor of a case: sizes, parameters in table order, then strides. The
 * errors' param: and strides: breaks are applied after the case's own. Returns the status of
 * the first failing call (*d may then be a descriptor to destroy, or NULL). */
static attn_status make_desc(const vcase *c, attn_desc **d) {
    const size_t *n = c->dims;
    attn_status st = attn_desc_create(d, n[0], n[1], n[2], n[3], n[4], n[5]);
    if (st != ATTN_OK) return st;
    for (int x = 0; x < N_PARAMS; ++x)
        if (c->has_param[x] && (st = set_param(*d, x, c->param[x])) != ATTN_OK) return st;
    if (!strncmp(c->brk, "param:", 6)) {
        const char *key = c->brk + 6, *eq = strchr(key, '=');
        const int x = eq ? param_index(key, (size_t)(eq - key)) : -1;
        if (x < 0) {
            fprintf(stderr, "%s: bad break %s\n", c->name, c->brk);
            exit(2);
        }
        if ((st = set_param(*d, x, eq + 1)) != ATTN_OK) return st;
    }
    for (int x = 0; x < 8; ++x) {
        const int w = k_strided[x];
        if (c->has_strides[w] &&
            (st = attn_desc_set_strides(*d, (attn_operand)w, c->strides[w][0], c->strides[w][1],
                                        c->strides[w][2])) != ATTN_OK)
            return st;
    }
    if (!strncmp(c->brk, "strides:", 8)) {
        const char *key = c->brk + 8, *eq = strchr(key, '=');
        const int w = eq ? operand_id(key, (size_t)(eq - key)) : -1;
        size_t s[3];
        if (w < 0 || !parse_strides(eq + 1, s)) {
            fprintf(stderr, "%s: bad break %s\n", c->name, c->brk);
            exit(2);
        }
        if ((st = attn_desc_set_strides(*d, (attn_operand)w, s[0], s[1], s[2])) != ATTN_OK)
            return st;
    }
    return ATTN_OK;
}

static size_t elem_size(int w) {
    return kind_of(w) == 'u' ? 1 : 4;
}

static const char *file_type(int w) {
    return kind_of(w) == 'u' ? "u8" : kind_of(w) == 'i' ? "i32" : "f32";
}

/* The file <name>.<operand>.<type> of `count` elements of `bytes` each (exactly). */
static void *load_as(const char *name, int w, const char *type, size_t bytes, size_t count) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s.%s", g_dir, name, k_operands[w].name, type);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    void *buf = malloc(bytes * count + 1);
    const size_t got = fread(buf, bytes, count, f);
    const int extra = fgetc(f);
    fclose(f);
    if (got != count || extra != EOF) {
        fprintf(stderr, "%s: expected exactly %zu elements\n", path, count);
        exit(2);
    }
    return buf;
}

static void *load(const char *name, int w, size_t count) {
    return load_as(name, w, file_type(w), elem_size(w), count);
}

/* Binds operand w (buffer p of len elements) with the setter of its kind. */
static attn_status bind(attn_args *a, int w, void *p, size_t len) {
    switch (kind_of(w)) {
    case 'o':
        return attn_args_set_out_f32(a, (attn_operand)w, (float *)p, len);
    case 'u':
        return attn_args_set_u8(a, (attn_operand)w, (const uint8_t *)p, len);
    case 'i':
        return attn_args_set_i32(a, (attn_operand)w, (const int32_t *)p, len);
    default:
        return attn_args_set_f32(a, (attn_operand)w, (const float *)p, len);
    }
}

/* Binds Q, K or V in the storage `t` (index into k_store). */
static attn_status bind_stored(attn_args *a, int w, void *p, size_t len, int t) {
    switch (t) {
    case 1:
        return attn_args_set_f16(a, (attn_operand)w, (const uint16_t *)p, len);
    case 2:
        return attn_args_set_bf16(a, (attn_operand)w, (const uint16_t *)p, len);
    case 3:
        return attn_args_set_i8(a, (attn_operand)w, (const int8_t *)p, len);
    default:
        return bind(a, w, p, len);
    }
}

/* |got - want| <= tol * max(1, |want|); an expected 0 must be exactly 0 when exact_zero is set
 * and an expected infinity exactly that infinity. */
static int close_enough(float got, float want, double tol, int exact_zero) {
    /* not for gradients: a gradient may cancel to 0 in exact arithmetic and not quite in
       float32, so its zeros are not exact */
    if (want == 0.0f && exact_zero) return got == 0.0f;
    if (isinf(want) || isinf(got)) return got == want;
    if (isnan(want) || isnan(got)) return 0;
    return fabs((double)got - (double)want) <= tol * fmax(1.0, fabs((double)want));
}

static int compare_tol(const char *name, const char *cfg, const char *what, const float *got,
                       const float *want, size_t n, double tol, int exact_zero) {
    for (size_t x = 0; x < n; ++x)
        if (!close_enough(got[x], want[x], tol, exact_zero)) {
            printf("FAIL %s [%s]: %s[%zu] = %.9g, expected %.9g\n", name, cfg, what, x, got[x],
                   want[x]);
            return 0;
        }
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* variants.txt                                                                             */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    size_t len[MAX_OPERANDS];
    int store[MAX_OPERANDS];   /* storage of q, k, v (index into k_store), else 0 */
    void *in[MAX_OPERANDS];    /* loaded inputs (NULL when not bound) */
    float *want[MAX_OPERANDS]; /* expected out, lse, weights, key_mass */
    float *got[MAX_OPERANDS];  /* outputs of one run */
} vbufs;

static const int k_outputs[4] = {ATTN_OUT, ATTN_LSE, ATTN_WEIGHTS, ATTN_KEY_MASS};

/* One forward + weights run of a case into b->got (zero-filled first); 1 when the results
 * match the expected files. */
static int run_variant(const vcase *c, const attn_desc *d, vbufs *b, const char *cfg) {
    attn_args *a = NULL;
    if (attn_args_create(&a) != ATTN_OK) {
        printf("FAIL %s [%s]: attn_args_create: %s\n", c->name, cfg, attn_last_error());
        return 0;
    }
    int ok = 1;
    for (int w = 0; w < g_n_operands && ok; ++w)
        if (b->in[w] && bind_stored(a, w, b->in[w], b->len[w], b->store[w]) != ATTN_OK) ok = 0;
    for (int x = 0; x < 4 && ok; ++x) {
        const int w = k_outputs[x];
        if (!b->got[w]) continue;
        memset(b->got[w], 0, 4 * b->len[w]);
        if (bind(a, w, b->got[w], b->len[w]) != ATTN_OK) ok = 0;
    }
    if (ok && attn_run(d, ATTN_OP_FORWARD, a) != ATTN_OK) ok = 0;
    if (ok && attn_run(d, ATTN_OP_WEIGHTS, a) != ATTN_OK) ok = 0;
    if (!ok) printf("FAIL %s [%s]: %s\n", c->name, cfg, attn_last_error());
    attn_args_destroy(a);
    /* out and lse within the line's tol (a fast mode's); weights and key_mass, exact in every
       mode, within 1e-5 */
    for (int x = 0; x < 4 && ok; ++x) {
        const int w = k_outputs[x];
        if (b->got[w])
            ok = compare_tol(c->name, cfg, k_operands[w].name, b->got[w], b->want[w], b->len[w],
                             w == ATTN_OUT || w == ATTN_LSE ? c->tol : 1e-5, 1);
    }
    return ok;
}

/* backward.txt: the forward (out, lse checked), then ATTN_OP_BACKWARD with dout and the listed
 * gradients (zero-filled) into b->got; 1 when everything matches the expected files. */
static int run_backward(const vcase *c, const attn_desc *d, vbufs *b, const char *cfg) {
    attn_args *a = NULL;
    if (attn_args_create(&a) != ATTN_OK) {
        printf("FAIL %s [%s]: attn_args_create: %s\n", c->name, cfg, attn_last_error());
        return 0;
    }
    int ok = 1;
    for (int w = 0; w < g_n_operands && ok; ++w)
        if (b->in[w] && bind_stored(a, w, b->in[w], b->len[w], b->store[w]) != ATTN_OK) ok = 0;
    for (int w = 0; w < g_n_operands && ok; ++w) {
        if (!b->got[w]) continue;
        memset(b->got[w], 0, 4 * b->len[w]);
        if (w == ATTN_OUT || w == ATTN_LSE)
            if (bind(a, w, b->got[w], b->len[w]) != ATTN_OK) ok = 0;
    }
    if (ok && attn_run(d, ATTN_OP_FORWARD, a) != ATTN_OK) ok = 0;
    for (int w = ATTN_DQ; w <= ATTN_DSINKS && ok; ++w)
        if (b->got[w] && bind(a, w, b->got[w], b->len[w]) != ATTN_OK) ok = 0;
    if (ok && attn_run(d, ATTN_OP_BACKWARD, a) != ATTN_OK) ok = 0;
    if (!ok) printf("FAIL %s [%s]: %s\n", c->name, cfg, attn_last_error());
    attn_args_destroy(a);
    for (int w = 0; w < g_n_operands && ok; ++w)
        if (b->got[w])
            ok = compare_tol(c->name, cfg, k_operands[w].name, b->got[w], b->want[w], b->len[w],
                             w >= ATTN_DQ && w <= ATTN_DSINKS ? 1e-4 : 1e-5,
                             w < ATTN_DQ || w > ATTN_DSINKS);
    return ok;
}

/* The inputs of a case into b (Q/K/V in their storage, with the int8 scales). */
static void load_inputs(const vcase *c, vbufs *b) {
    for (int w = 0; w < g_n_operands; ++w) {
        if (!c->in[w]) continue;
        const int t = w <= ATTN_V ? c->store[w] : 0;
        b->store[w] = t;
        b->in[w] = t ? load_as(c->name, w, k_store[t], k_store_bytes[t], b->len[w])
                     : load(c->name, w, b->len[w]);
        if (t == 3) {
            const int sw = w == ATTN_K ? ATTN_K_SCALE : ATTN_V_SCALE;
            b->in[sw] = load(c->name, sw, b->len[sw]);
        }
    }
}

/* Sets ISA i (index into the names below) or returns 0 when the CPU lacks it. */
static const char *const k_isas[4] = {"scalar", "sse2", "avx2", "avx512"};

/* The run with t threads: t = 1 keeps a copy of every output in one[] (allocated on first use);
 * t = 2 must give those bits. */
static int same_bits(const vcase *c, const vbufs *b, float **one, size_t t, const char *cfg) {
    for (int w = 0; w < g_n_operands; ++w) {
        if (!b->got[w]) continue;
        if (t == 1) {
            if (!one[w]) one[w] = malloc(4 * b->len[w]);
            memcpy(one[w], b->got[w], 4 * b->len[w]);
        } else if (memcmp(one[w], b->got[w], 4 * b->len[w])) {
            printf("FAIL %s [%s]: %s differs from the 1-thread run's bits\n", c->name, cfg,
                   k_operands[w].name);
            return 0;
        }
    }
    return 1;
}

static int variant_case(const vcase *c, FILE *xlang) {
    attn_desc *d = NULL;
    if (make_desc(c, &d) != ATTN_OK) {
        printf("FAIL %s: %s\n", c->name, attn_last_error());
        attn_desc_destroy(d);
        return 0;
    }
    vbufs b;
    memset(&b, 0, sizeof b);
    for (int w = 0; w < g_n_operands; ++w) b.len[w] = attn_desc_required_len(d, (attn_operand)w);
    load_inputs(c, &b);
    /* the outputs checked (and written to the cross-language file, except a backward's
       forward) */
    int outs[MAX_OPERANDS] = {0};
    if (c->has_grads) {
        b.in[ATTN_DOUT] = load(c->name, ATTN_DOUT, b.len[ATTN_DOUT]);
        outs[ATTN_OUT] = outs[ATTN_LSE] = 1;
        for (int w = ATTN_DQ; w <= ATTN_DSINKS; ++w) outs[w] = c->grad[w];
    } else {
        outs[ATTN_OUT] = outs[ATTN_LSE] = outs[ATTN_WEIGHTS] = 1;
        outs[ATTN_KEY_MASS] = c->mass;
    }
    for (int w = 0; w < g_n_operands; ++w) {
        if (!outs[w]) continue;
        b.want[w] = load(c->name, w, b.len[w]);
        b.got[w] = malloc(4 * b.len[w]);
    }
    int (*runf)(const vcase *, const attn_desc *, vbufs *, const char *) =
        c->has_grads ? run_backward : run_variant;

    /* The default ISA and thread count first: its bytes go to the cross-language file. */
    attn_set_isa(NULL);
    attn_set_num_threads(0);
    char cfg[64];
    snprintf(cfg, sizeof cfg, "default %s", attn_isa());
    int ok = runf(c, d, &b, cfg);
    if (xlang && c->has_grads)
        for (int x = 0; x < 5; ++x) {
            const int w = k_grads[x];
            if (b.got[w]) fwrite(b.got[w], 4, b.len[w], xlang);
        }
    else if (xlang)
        for (int x = 0; x < 4; ++x) {
            const int w = k_outputs[x];
            if (b.got[w]) fwrite(b.got[w], 4, b.len[w], xlang);
        }
    /* the bits may differ between ISAs (a fast mode's do), never between thread counts */
    float *one[MAX_OPERANDS] = {0};
    const char *const *isas = k_isas;
    for (int i = 0; i < 4; ++i) {
        const attn_status st = attn_set_isa(isas[i]);
        if (st == ATTN_ERR_UNSUPPORTED) continue;
        if (st != ATTN_OK) {
            printf("FAIL %s: attn_set_isa(%s): %s\n", c->name, isas[i], attn_last_error());
            ok = 0;
            continue;
        }
        for (size_t t = 1; t <= 2; ++t) {
            attn_set_num_threads(t);
            snprintf(cfg, sizeof cfg, "%s, %zu thread%s", isas[i], t, t > 1 ? "s" : "");
            ok &= runf(c, d, &b, cfg);
            ok &= same_bits(c, &b, one, t, cfg);
        }
    }
    attn_set_isa(NULL);
    attn_set_num_threads(0);
    for (int w = 0; w < g_n_operands; ++w)
        free(b.in[w]), free(b.want[w]), free(b.got[w]), free(one[w]);
    attn_desc_destroy(d);
    return ok;
}

/* ---------------------------------------------------------------------------------------- */
/* errors.txt                                                                               */
/* ---------------------------------------------------------------------------------------- */

/* Does msg contain word, case-insensitively, with no letter or digit right before or after? */
static int has_word(const char *msg, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = msg; *p; ++p) {
        size_t x = 0;
        while (x < n && p[x] && tolower((unsigned char)p[x]) == tolower((unsigned char)word[x]))
            ++x;
        if (x == n && (p == msg || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[n]))
            return 1;
    }
    return 0;
}

/* The operand named by "<what>:<operand>..." (up to '=' or '['), or -1. */
static int break_operand(const char *brk, const char *what) {
    const size_t wl = strlen(what);
    if (strncmp(brk, what, wl) || brk[wl] != ':') return -1;
    const char *p = brk + wl + 1;
    return operand_id(p, strcspn(p, "=["));
}

/* Configures, binds and runs an error case; returns the status of the first failing call. */
static attn_status error_run(const vcase *c) {
    attn_desc *d = NULL;
    attn_args *a = NULL, *part = NULL;
    float *part_out = NULL, *part_lse = NULL;
    void *buf[MAX_OPERANDS] = {0};
    int alias_a = -1; /* bound to alias_b's buffer (not freed separately) */
    attn_status st = make_desc(c, &d);
    if (st != ATTN_OK) goto done;
    if ((st = attn_args_create(&a)) != ATTN_OK) goto done;

    int bound[MAX_OPERANDS];
    memcpy(bound, c->in, sizeof bound);
    if (c->serving_op == 1) { /* k and v are the caches */
        bound[ATTN_Q] = 0;
    } else if (c->serving_op == 2) { /* acc: out and lse (+ cu_seqlens_q) */
        bound[ATTN_Q] = bound[ATTN_K] = bound[ATTN_V] = 0;
        bound[ATTN_OUT] = bound[ATTN_LSE] = 1;
    } else if (c->op == ATTN_OP_FORWARD) {
        bound[ATTN_OUT] = bound[ATTN_LSE] = 1;
        bound[ATTN_KEY_MASS] = c->mass;
    } else {
        bound[ATTN_WEIGHTS] = 1;
    }
    size_t len[MAX_OPERANDS];
    for (int w = 0; w < g_n_operands; ++w) len[w] = attn_desc_required_len(d, (attn_operand)w);

    const int shortw = break_operand(c->brk, "short"), nullw = break_operand(c->brk, "null");
    alias_a = break_operand(c->brk, "alias");
    const int alias_b =
        alias_a >= 0 ? operand_id(strchr(c->brk, '=') + 1, strlen(strchr(c->brk, '=') + 1)) : -1;
    const int setw = break_operand(c->brk, "set");
    int empty[MAX_OPERANDS] = {0}; /* empty:<a>,<b>,...: bound with 0 elements (not NULL) */
    if (!strncmp(c->brk, "empty:", 6))
        for (const char *p = c->brk + 6; *p;) {
            const size_t n = strcspn(p, ",");
            const int w = operand_id(p, n);
            if (w < 0) {
                fprintf(stderr, "%s: bad break %s\n", c->name, c->brk);
                exit(2);
            }
            empty[w] = 1;
            p += n + (p[n] == ',');
        }
    const int null_part = !strcmp(c->brk, "null:part");
    const attn_op op = !strcmp(c->brk, "op:backward") ? ATTN_OP_BACKWARD : c->op;
    if (alias_a >= 0 && (alias_b < 0 || elem_size(alias_a) != 4 || elem_size(alias_b) != 4 ||
                         !bound[alias_a] || !bound[alias_b])) {
        fprintf(stderr, "%s: bad break %s\n", c->name, c->brk);
        exit(2);
    }
    for (int w = 0; w < g_n_operands; ++w) {
        if (!bound[w] || w == alias_a) continue;
        size_t n = len[w];
        if (w == alias_b && len[alias_a] > n) n = len[alias_a];
        buf[w] = calloc(n ? n : 1, elem_size(w));
    }
    if (alias_a >= 0) buf[alias_a] = buf[alias_b];
    if (setw >= 0) {
        const char *lb = strchr(c->brk, '['), *eq = strchr(c->brk, '=');
        const size_t idx = lb ? strtoull(lb + 1, NULL, 10) : 0;
        if (!lb || !eq || !buf[setw] || idx >= len[setw] || kind_of(setw) != 'i') {
            fprintf(stderr, "%s: bad break %s\n", c->name, c->brk);
            exit(2);
        }
        ((int32_t *)buf[setw])[idx] = (int32_t)strtol(eq + 1, NULL, 10);
    }
    for (int w = 0; w < g_n_operands; ++w) {
        if (!bound[w] || w == nullw || (c->serving_op == 1 && (w == ATTN_K || w == ATTN_V)))
            continue;
        const size_t n = empty[w] ? 0 : w == shortw ? len[w] - 1 : len[w];
        if ((st = bind(a, w, buf[w], n)) != ATTN_OK) goto done;
    }
    if (c->serving_op == 1) {
        st = attn_kv_append(d, a, (float *)buf[ATTN_K], len[ATTN_K], (float *)buf[ATTN_V],
                            len[ATTN_V]);
    } else if (c->serving_op == 2) {
        /* the part: its own zero-filled out and lse */
        if (!null_part) {
            if ((st = attn_args_create(&part)) != ATTN_OK) goto done;
            part_out = (float *)calloc(len[ATTN_OUT], sizeof(float));
            part_lse = (float *)calloc(len[ATTN_LSE], sizeof(float));
            if ((st = attn_args_set_out_f32(part, ATTN_OUT, part_out, len[ATTN_OUT])) != ATTN_OK ||
                (st = attn_args_set_out_f32(part, ATTN_LSE, part_lse, len[ATTN_LSE])) != ATTN_OK)
                goto done;
        }
        st = attn_merge(d, a, part);
    } else {
        st = attn_run(d, op, a);
    }
done:
    for (int w = 0; w < g_n_operands; ++w)
        if (w != alias_a) free(buf[w]);
    free(part_out);
    free(part_lse);
    attn_args_destroy(part);
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return st;
}

static int error_case(const vcase *c) {
    if (c->status < 0 || !c->brk[0] || (c->status != ATTN_OK && !c->names[0])) {
        fprintf(stderr, "%s: errors.txt lines need break, status and names\n", c->name);
        exit(2);
    }
    const attn_status st = error_run(c);
    const char *msg = attn_last_error();
    if ((int)st != c->status) {
        printf("FAIL %s (%s): status %d (%s), expected %d; message \"%s\"\n", c->name, c->brk,
               (int)st, attn_status_string(st), c->status, msg);
        return 0;
    }
    if (st != ATTN_OK && !has_word(msg, c->names)) {
        printf("FAIL %s (%s): message \"%s\" does not name \"%s\"\n", c->name, c->brk, msg,
               c->names);
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------- */

/* Runs every case of one file; returns the number that passed (*failed gets the others). */
static int run_file(const char *file, int errors, FILE *xlang, int *failed) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    char line[4096];
    int passed = 0;
    *failed = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        vcase c;
        if (!parse_line(line, &c)) {
            fprintf(stderr, "%s: bad line\n", path);
            exit(2);
        }
        if (errors ? error_case(&c) : variant_case(&c, xlang))
            ++passed;
        else
            ++*failed;
    }
    fclose(f);
    printf("%s: %d passed, %d failed\n", file, passed, *failed);
    return passed;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <vectors dir>\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    load_operands();
    printf("default ISA %s; every case also runs on:", attn_isa());
    for (int i = 0; i < 4; ++i)
        if (attn_set_isa(k_isas[i]) == ATTN_OK) printf(" %s", k_isas[i]);
    attn_set_isa(NULL);
    printf(" (1 and 2 threads each)\n");
    /* file, its cross-language output, the fewest cases it must hold */
    static const struct {
        const char *file, *xlang;
        int min_cases;
    } files[3] = {{"variants.txt", "c.variants.bin", 30},
                  {"storage.txt", "c.storage.bin", 6},
                  {"backward.txt", "c.backward.bin", 6}};
    const char *xdir = getenv("ATTN_XLANG_DIR");
    int pass = 0, fail = 0, short_file = 0;
    for (int x = 0; x < 3; ++x) {
        FILE *xlang = NULL;
        if (xdir && *xdir) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", xdir, files[x].xlang);
            xlang = fopen(path, "wb");
            if (!xlang) {
                fprintf(stderr, "cannot write %s\n", path);
                return 2;
            }
        }
        int f;
        const int p = run_file(files[x].file, 0, xlang, &f);
        if (xlang) fclose(xlang);
        pass += p;
        fail += f;
        short_file |= p < files[x].min_cases;
    }
    int efail;
    const int epass = run_file("errors.txt", 1, NULL, &efail);
    printf("%d passed, %d failed\n", pass + epass, fail + efail);
    return fail + efail == 0 && !short_file && epass >= 40 ? 0 : 1;
}
