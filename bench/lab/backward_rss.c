/* Lab measurement (bench/README.md, "Lab tools"). Peak memory of the backward: n = 16384,
 * H = 8, d = 64, causal. The operands are allocated and touched first; the growth of the peak RSS
 * (VmHWM) over the forward and then the backward is the memory libattn itself takes (scratch,
 * pool), against the 1 GiB an n x n fp32 matrix per head would take.
 *   attn_backward_rss [threads]   (default 2) */
#include <attn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) v = atol(line + 6);
    fclose(f);
    return v;
}

static void check(attn_status st, const char *what) {
    if (st != ATTN_OK) {
        fprintf(stderr, "%s: %s\n", what, attn_last_error());
        exit(1);
    }
}

int main(int argc, char **argv) {
    const size_t n = 16384, h = 8, d = 64, len = h * n * d;
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    check(attn_set_num_threads((size_t)threads), "threads");
    attn_desc *desc = NULL;
    check(attn_desc_create(&desc, 1, h, h, n, n, d), "desc");
    check(attn_desc_set_int(desc, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_TOP_LEFT), "causal");
    float *buf[8]; /* q k v out dout dq dk dv */
    for (int b = 0; b < 8; ++b) {
        buf[b] = malloc(4 * len);
        if (!buf[b]) return 1;
        for (size_t x = 0; x < len; ++x)
            buf[b][x] = (float)((x * 2654435761u) % 1000) / 1000.f - .5f;
    }
    float *lse = calloc(h * n, 4);
    const long before = peak_rss_kib();
    attn_args *a = NULL;
    check(attn_args_create(&a), "args");
    const attn_operand in[3] = {ATTN_Q, ATTN_K, ATTN_V};
    for (int b = 0; b < 3; ++b) check(attn_args_set_f32(a, in[b], buf[b], len), "bind");
    check(attn_args_set_out_f32(a, ATTN_OUT, buf[3], len), "out");
    check(attn_args_set_out_f32(a, ATTN_LSE, lse, h * n), "lse");
    check(attn_run(desc, ATTN_OP_FORWARD, a), "forward");
    const long after_fwd = peak_rss_kib();
    check(attn_args_set_f32(a, ATTN_DOUT, buf[4], len), "dout");
    const attn_operand grad[3] = {ATTN_DQ, ATTN_DK, ATTN_DV};
    for (int b = 0; b < 3; ++b) check(attn_args_set_out_f32(a, grad[b], buf[5 + b], len), "grad");
    check(attn_run(desc, ATTN_OP_BACKWARD, a), "backward");
    const long after_bwd = peak_rss_kib();
    printf("n %zu, H %zu, d %zu, causal, %d thread(s): operands %.1f MiB; peak RSS %.1f MiB before "
           "the calls, +%.2f MiB after the forward, +%.2f MiB after the backward (an n x n fp32 "
           "matrix per head: %.0f MiB)\n",
           n, h, d, threads, (8.0 * len + h * n) * 4 / 1048576.0, before / 1024.0,
           (after_fwd - before) / 1024.0, (after_bwd - before) / 1024.0,
           (double)n * n * 4 / 1048576.0);
    attn_args_destroy(a);
    attn_desc_destroy(desc);
    for (int b = 0; b < 8; ++b) free(buf[b]);
    free(lse);
    return 0;
}
