/* libattn demo: the main job on built-in data.
 *
 * 1. The original 3-token example: Q all zero, so every visible key gets the same weight;
 *    causal, so query i sees keys 0..i. out[1][0] = (10 + 20) / 2 = 15.
 * 2. A batch of three sequences of lengths 5, 3 and 4, padded to 5: padding keys get weight 0
 *    from every query, on top of the causal rule.
 *
 * Build and run: see README.md (scripts/demo.sh). */
#include <attn.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        attn_status st_ = (call);                                                                  \
        if (st_ != ATTN_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, attn_status_string(st_),                \
                    attn_last_error());                                                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Deterministic demo values in [-1, 1]. */
static float value(size_t b, size_t i, size_t d, size_t salt) {
    return (float)((b * 131 + i * 17 + d * 7 + salt) % 23) / 11.0f - 1.0f;
}

/* Weight table: rows = queries, columns = keys; "." marks a hidden key (weight exactly 0). */
static void print_weights(const float *w, size_t rows, size_t cols, const bool *key_valid) {
    printf("        ");
    for (size_t j = 0; j < cols; ++j)
        printf("  key%zu%s", j, key_valid && !key_valid[j] ? "*" : " ");
    printf("\n");
    for (size_t i = 0; i < rows; ++i) {
        printf("  q%-4zu", i);
        for (size_t j = 0; j < cols; ++j) {
            const float x = w[i * cols + j];
            if (x == 0.0f)
                printf("  %6s", ".");
            else
                printf("  %6.4f", x);
        }
        printf("\n");
    }
}

int main(void) {
    printf("libattn %s  (kernel: %s, threads: %zu)\n\n", attn_version_string(), attn_isa(),
           attn_get_num_threads());

    /* ---- 1. The seed example: attention(Q, K, V, causal=True) ---- */
    {
        const float q[3] = {0, 0, 0}, k[3] = {1, 2, 3}, v[3] = {10, 20, 30};
        float out[3], w[9];
        CHECK(attn_simple(q, k, v, 3, 1, true, NULL, out));

        attn_desc *desc = NULL;
        CHECK(attn_desc_create(&desc, 1, 1, 1, 3, 3, 1));
        CHECK(attn_desc_set_causal(desc, ATTN_CAUSAL_TOP_LEFT));
        CHECK(attn_weights(desc, q, k, NULL, NULL, w));
        attn_desc_destroy(desc);

        printf("1. Three tokens, Q = 0, V = [10, 20, 30], causal\n");
        printf("   weights (rows = queries, columns = keys, . = masked):\n");
        print_weights(w, 3, 3, NULL);
        printf("   out = [%g, %g, %g]   (out[1][0] = %g: the mean of V[0] and V[1])\n\n", out[0],
               out[1], out[2], out[1]);
    }

    /* ---- 2. A padded batch: lengths 5, 3, 4 padded to 5, causal ---- */
    {
        enum { B = 3, S = 5, D = 4 };
        const size_t lengths[B] = {5, 3, 4};
        float q[B * S * D], k[B * S * D], v[B * S * D], out[B * S * D], w[B * S * S];
        bool key_valid[B * S];
        for (size_t b = 0; b < B; ++b)
            for (size_t i = 0; i < S; ++i) {
                key_valid[b * S + i] = i < lengths[b];
                for (size_t d = 0; d < D; ++d) {
                    q[(b * S + i) * D + d] = value(b, i, d, 0);
                    k[(b * S + i) * D + d] = value(b, i, d, 5);
                    v[(b * S + i) * D + d] = value(b, i, d, 11);
                }
            }
        attn_desc *desc = NULL;
        CHECK(attn_desc_create(&desc, B, 1, 1, S, S, D));
        CHECK(attn_desc_set_causal(desc, ATTN_CAUSAL_TOP_LEFT));
        CHECK(attn_forward(desc, q, k, v, key_valid, NULL, out, NULL));
        CHECK(attn_weights(desc, q, k, key_valid, NULL, w));
        attn_desc_destroy(desc);

        printf("2. Batch of 3 sequences (lengths 5, 3, 4) padded to 5, causal; * = padding key\n");
        for (size_t b = 0; b < B; ++b) {
            printf("   sequence %zu (length %zu):\n", b, lengths[b]);
            print_weights(w + b * S * S, S, S, key_valid + b * S);
            printf("   out:\n");
            for (size_t i = 0; i < S; ++i) {
                printf("  q%-4zu", i);
                for (size_t d = 0; d < D; ++d) printf("  %8.5f", out[(b * S + i) * D + d]);
                printf("\n");
            }
        }
    }
    printf("\nkernel: %s, threads: %zu\n", attn_isa(), attn_get_num_threads());
    return 0;
}
