/* libattn call benchmark, C reference for the per-language benches (bench/<lang>/).
 *
 * Prints exactly two lines:
 *   lang=c shape=tiny ns_per_call=<x>    attn_forward, B=1, H=1, n=16,   d=64, non-causal
 *   lang=c shape=large ns_per_call=<x>   attn_forward, B=1, H=1, n=2048, d=64, non-causal
 * Each figure is the best (lowest) mean over several timed loops, after a warm-up.
 * Threads and ISA are the library defaults (ATTN_NUM_THREADS / ATTN_ISA apply), the same as
 * every other language's bench, so the driver compares only the calling overhead. */
#define _POSIX_C_SOURCE 199309L
#include <attn.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Deterministic values in [-1, 1). */
static void fill(float *x, size_t len, unsigned seed) {
    unsigned s = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < len; ++i) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
    }
}

/* Best ns per call of attn_forward over `loops` timed loops of `calls` calls each.
 * Returns a negative value on failure (after printing the library's message). */
static double bench_shape(size_t n, size_t d, double target_loop_ns, int loops) {
    attn_desc *desc = NULL;
    attn_status st = attn_desc_create(&desc, 1, 1, 1, n, n, d);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn_desc_create: %s (%s)\n", attn_status_string(st), attn_last_error());
        return -1.0;
    }
    const size_t len = n * d;
    float *q = malloc(len * sizeof *q), *k = malloc(len * sizeof *k);
    float *v = malloc(len * sizeof *v), *out = malloc(len * sizeof *out);
    double best = -1.0;
    if (!q || !k || !v || !out) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    fill(q, len, 1);
    fill(k, len, 2);
    fill(v, len, 3);

    /* Warm-up (thread pool start, scratch allocation, caches) and calibration. */
    size_t calls = 1;
    for (;;) {
        const double t0 = now_ns();
        for (size_t c = 0; c < calls; ++c) {
            st = attn_forward(desc, q, k, v, NULL, NULL, out, NULL);
            if (st != ATTN_OK) {
                fprintf(stderr, "attn_forward: %s (%s)\n", attn_status_string(st),
                        attn_last_error());
                goto done;
            }
        }
        const double dt = now_ns() - t0;
        if (dt >= target_loop_ns || calls >= ((size_t)1 << 30)) break;
        calls = dt > 0.0 && dt * 4.0 < target_loop_ns ? calls * 4 : calls * 2;
    }

    for (int l = 0; l < loops; ++l) {
        const double t0 = now_ns();
        for (size_t c = 0; c < calls; ++c) attn_forward(desc, q, k, v, NULL, NULL, out, NULL);
        const double per_call = (now_ns() - t0) / (double)calls;
        if (best < 0.0 || per_call < best) best = per_call;
    }
    /* Keep the result observable. */
    volatile float sink = out[len - 1];
    (void)sink;

done:
    free(q);
    free(k);
    free(v);
    free(out);
    attn_desc_destroy(desc);
    return best;
}

int main(void) {
    const double tiny = bench_shape(16, 64, 50e6, 7);
    if (tiny < 0.0) return 1;
    const double large = bench_shape(2048, 64, 200e6, 5);
    if (large < 0.0) return 1;
    printf("lang=c shape=tiny ns_per_call=%.1f\n", tiny);
    printf("lang=c shape=large ns_per_call=%.1f\n", large);
    return 0;
}
