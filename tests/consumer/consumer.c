/* An outside program using the INSTALLED libattn (built by tests/consumer/run_consumer_test.cmake
 * once with pkg-config and once with find_package(attn)). Prints one line the test checks and
 * exits non-zero if any value is wrong. No libm: only the C API and plain arithmetic. */
#include <attn.h>

#include <math.h> /* NAN only: no libm function is called */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int near(float got, float want) {
    float d = got > want ? got - want : want - got;
    return d <= 1e-5f;
}

int main(void) {
    int failures = 0;

    /* The library must be the one whose header we compiled with. */
    if (strcmp(attn_version_string(), ATTN_VERSION_STRING) != 0 ||
        attn_version_number() != ATTN_VERSION_NUMBER) {
        fprintf(stderr, "header %s but library %s\n", ATTN_VERSION_STRING, attn_version_string());
        ++failures;
    }

    /* 1. The seed example, simple API: all scores 0, causal, so query i averages v[0..i]. */
    const float q[3] = {0.0f, 0.0f, 0.0f}, k[3] = {1.0f, 2.0f, 3.0f}, v[3] = {10.0f, 20.0f, 30.0f};
    float out[3] = {0.0f, 0.0f, 0.0f};
    attn_status st = attn_simple(q, k, v, 3, 1, true, NULL, out);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn_simple: %s: %s\n", attn_status_string(st), attn_last_error());
        return 1;
    }
    if (out[0] != 10.0f || out[1] != 15.0f || !near(out[2], 20.0f)) ++failures;

    /* 2. Descriptor API: 2 sequences, 1 head, 1 query, 2 keys, head_dim 1, scale 1.
     *    Sequence 0: scores (0, ln 3) -> weights (1/4, 3/4), v = (0, 4) -> out 3, lse ln 4.
     *    Sequence 1: key 1 is padding (its value is NaN and must never be read) -> out 5, lse 0. */
    const float ln3 = 1.09861228867f;
    const float dq[2] = {1.0f, 1.0f};
    const float dk[4] = {0.0f, ln3, 0.0f, ln3};
    float dv[4] = {0.0f, 4.0f, 5.0f, 0.0f};
    const bool key_valid[4] = {true, true, true, false};
    float dout[2] = {0.0f, 0.0f}, lse[2] = {0.0f, 0.0f};
    dv[3] = NAN; /* in the padded slot */
    attn_desc *desc = NULL;
    st = attn_desc_create(&desc, 2, 1, 1, 1, 2, 1);
    if (st == ATTN_OK) st = attn_desc_set_scale(desc, 1.0f);
    if (st == ATTN_OK) st = attn_forward(desc, dq, dk, dv, key_valid, NULL, dout, lse);
    attn_desc_destroy(desc);
    if (st != ATTN_OK) {
        fprintf(stderr, "descriptor API: %s: %s\n", attn_status_string(st), attn_last_error());
        return 1;
    }
    if (!near(dout[0], 3.0f) || dout[1] != 5.0f || !near(lse[0], 1.38629436f) || lse[1] != 0.0f)
        ++failures;

    printf("attn %s isa=%s threads=%zu\n", attn_version_string(), attn_isa(),
           attn_get_num_threads());
    printf("consumer: simple %.4f %.4f %.4f desc %.4f %.4f lse %.4f %.4f %s\n", out[0], out[1],
           out[2], dout[0], dout[1], lse[0], lse[1], failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
