/* A plain C program using the INSTALLED libattn, built by ./Makefile with nothing but
 * `pkg-config --cflags --libs attn` (tests/consumer/deb/run_deb_test.cmake builds it against the
 * installed .deb and against the extracted .tar.gz, and runs it with an empty environment).
 *
 * The seed example: three tokens, Q = 0 (all scores 0), V = [10, 20, 30], causal: query i averages
 * v[0..i], so out = 10, 15, 20. Prints one line the test compares exactly; exits 1 if wrong. */
#include <attn.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    const float q[3] = {0.0f, 0.0f, 0.0f}, k[3] = {1.0f, 2.0f, 3.0f};
    const float v[3] = {10.0f, 20.0f, 30.0f};
    float out[3] = {0.0f, 0.0f, 0.0f};
    attn_status st = attn_simple(q, k, v, 3, 1, true, NULL, out);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn_simple: %s: %s\n", attn_status_string(st), attn_last_error());
        return 1;
    }
    /* The library must be the one whose header we compiled with. */
    int ok = strcmp(attn_version_string(), ATTN_VERSION_STRING) == 0 && out[0] == 10.0f &&
             out[1] == 15.0f && out[2] > 19.9999f && out[2] < 20.0001f;
    printf("app: attn %s simple %.4f %.4f %.4f %s\n", attn_version_string(), out[0], out[1], out[2],
           ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
