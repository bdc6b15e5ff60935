/* Shared test vectors (tests/vectors, made by the float64 reference) through the C API.
 * Usage: test_vectors <vectors dir>. Writes $ATTN_XLANG_DIR/c.bin (out, lse, weights of every
 * case, in index order) when that variable is set: the other languages must match it byte for
 * byte. Prints "N passed, M failed". */
#include <attn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[128];
    size_t dims[6]; /* batch heads_q heads_kv seq_q seq_k head_dim */
    int causal;
    int has_scale;
    float scale;
    int has_strides[4];
    size_t strides[4][3];
    int key_valid, allowed;
} vcase;

static const char *g_dir;

static void *load(const char *name, const char *part, size_t elem, size_t count) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", g_dir, name, part);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    void *buf = malloc(elem * count + 1);
    const size_t got = fread(buf, elem, count, f);
    const int extra = fgetc(f);
    fclose(f);
    if (got != count || extra != EOF) {
        fprintf(stderr, "%s: expected exactly %zu elements\n", path, count);
        exit(2);
    }
    return buf;
}

static int parse_line(char *line, vcase *c) {
    static const char *dim_keys[6] = {"batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim"};
    static const char *stride_keys[4] = {"q_strides", "k_strides", "v_strides", "out_strides"};
    memset(c, 0, sizeof *c);
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        char *eq = strchr(tok, '=');
        if (!eq) return 0;
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        if (!strcmp(key, "name")) snprintf(c->name, sizeof c->name, "%s", val);
        for (int x = 0; x < 6; ++x)
            if (!strcmp(key, dim_keys[x])) c->dims[x] = strtoull(val, NULL, 10);
        if (!strcmp(key, "causal")) c->causal = atoi(val);
        if (!strcmp(key, "scale") && strcmp(val, "default")) {
            c->has_scale = 1;
            c->scale = strtof(val, NULL);
        }
        for (int x = 0; x < 4; ++x)
            if (!strcmp(key, stride_keys[x]) && strcmp(val, "default")) {
                c->has_strides[x] = 1;
                if (sscanf(val, "%zu,%zu,%zu", &c->strides[x][0], &c->strides[x][1],
                           &c->strides[x][2]) != 3)
                    return 0;
            }
        if (!strcmp(key, "key_valid")) c->key_valid = atoi(val);
        if (!strcmp(key, "allowed")) c->allowed = atoi(val);
    }
    return c->name[0] != '\0';
}

/* |got - want| <= 1e-5 * max(1, |want|); infinities must match exactly. */
static int close_enough(float got, float want) {
    if (isinf(want) || isinf(got)) return got == want;
    if (isnan(want) || isnan(got)) return 0;
    return fabs((double)got - (double)want) <= 1e-5 * fmax(1.0, fabs((double)want));
}

static int compare(const char *name, const char *what, const float *got, const float *want,
                   size_t n) {
    for (size_t x = 0; x < n; ++x)
        if (!close_enough(got[x], want[x])) {
            printf("FAIL %s: %s[%zu] = %.9g, expected %.9g\n", name, what, x, got[x], want[x]);
            return 0;
        }
    return 1;
}

static int run_case(const vcase *c, FILE *xlang) {
    attn_desc *d = NULL;
    const size_t *n = c->dims;
    if (attn_desc_create(&d, n[0], n[1], n[2], n[3], n[4], n[5]) != ATTN_OK ||
        attn_desc_set_causal(d, (attn_causal)c->causal) != ATTN_OK ||
        (c->has_scale && attn_desc_set_scale(d, c->scale) != ATTN_OK)) {
        printf("FAIL %s: %s\n", c->name, attn_last_error());
        attn_desc_destroy(d);
        return 0;
    }
    for (int w = 0; w < 4; ++w)
        if (c->has_strides[w] &&
            attn_desc_set_strides(d, (attn_operand)w, c->strides[w][0], c->strides[w][1],
                                  c->strides[w][2]) != ATTN_OK) {
            printf("FAIL %s: %s\n", c->name, attn_last_error());
            attn_desc_destroy(d);
            return 0;
        }
    const size_t lq = attn_desc_required_len(d, ATTN_Q), lk = attn_desc_required_len(d, ATTN_K),
                 lv = attn_desc_required_len(d, ATTN_V), lo = attn_desc_required_len(d, ATTN_OUT),
                 ll = attn_desc_required_len(d, ATTN_LSE),
                 lw = attn_desc_required_len(d, ATTN_WEIGHTS);
    float *q = load(c->name, "q.f32", 4, lq), *k = load(c->name, "k.f32", 4, lk),
          *v = load(c->name, "v.f32", 4, lv);
    float *eo = load(c->name, "out.f32", 4, lo), *el = load(c->name, "lse.f32", 4, ll),
          *ew = load(c->name, "weights.f32", 4, lw);
    bool *kv = c->key_valid
                   ? load(c->name, "key_valid.u8", 1, attn_desc_required_len(d, ATTN_KEY_VALID))
                   : NULL;
    bool *al =
        c->allowed ? load(c->name, "allowed.u8", 1, attn_desc_required_len(d, ATTN_ALLOWED)) : NULL;
    float *out = calloc(lo, 4), *lse = calloc(ll, 4), *w = calloc(lw, 4);
    int ok = attn_forward(d, q, k, v, kv, al, out, lse) == ATTN_OK &&
             attn_weights(d, q, k, kv, al, w) == ATTN_OK;
    if (!ok) printf("FAIL %s: %s\n", c->name, attn_last_error());
    ok = ok && compare(c->name, "out", out, eo, lo) && compare(c->name, "lse", lse, el, ll) &&
         compare(c->name, "weights", w, ew, lw);
    for (size_t x = 0; ok && x < lw; ++x)
        if (ew[x] == 0.0f && w[x] != 0.0f) {
            printf("FAIL %s: hidden weight %zu is %g, not exactly 0\n", c->name, x, w[x]);
            ok = 0;
        }
    if (xlang) {
        fwrite(out, 4, lo, xlang);
        fwrite(lse, 4, ll, xlang);
        fwrite(w, 4, lw, xlang);
    }
    free(q), free(k), free(v), free(eo), free(el), free(ew), free(kv), free(al);
    free(out), free(lse), free(w);
    attn_desc_destroy(d);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <vectors dir>\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    char path[1024];
    snprintf(path, sizeof path, "%s/index.txt", g_dir);
    FILE *idx = fopen(path, "r");
    if (!idx) {
        fprintf(stderr, "cannot open %s\n", path);
        return 2;
    }
    FILE *xlang = NULL;
    const char *xdir = getenv("ATTN_XLANG_DIR");
    if (xdir && *xdir) {
        snprintf(path, sizeof path, "%s/c.bin", xdir);
        xlang = fopen(path, "wb");
        if (!xlang) {
            fprintf(stderr, "cannot write %s\n", path);
            return 2;
        }
    }
    char line[4096];
    int passed = 0, failed = 0;
    while (fgets(line, sizeof line, idx)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        vcase c;
        if (!parse_line(line, &c)) {
            fprintf(stderr, "bad index line\n");
            return 2;
        }
        if (run_case(&c, xlang))
            ++passed;
        else
            ++failed;
    }
    fclose(idx);
    if (xlang) fclose(xlang);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed >= 20 ? 0 : 1;
}
