/* Compiled (not linked) by the abi_header_* tests with -std=c99 -Wall -Wextra -pedantic -Werror:
 * the public header must be clean C99 on its own, and its pinned values must not move. */
#include "attn.h"

#include "pinned_values.h"

/* Uses of every declaration, so an unusable prototype is a compile error too. */
int attn_abi_header_probe(void);
int attn_abi_header_probe(void) {
    attn_desc *desc = NULL;
    attn_status st = attn_desc_create(&desc, 1, 1, 1, 1, 1, 1);
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    bool mask[1] = {true};
    st = attn_desc_set_causal(desc, ATTN_CAUSAL_TOP_LEFT);
    st = attn_desc_set_scale(desc, 1.0f);
    st = attn_desc_set_strides(desc, ATTN_Q, 1, 1, 1);
    st = attn_forward(desc, buf, buf, buf, mask, mask, buf + 1, buf + 2);
    st = attn_weights(desc, buf, buf, mask, mask, buf + 3);
    st = attn_simple(buf, buf, buf, 1, 1, false, mask, buf + 1);
    st = attn_set_num_threads(attn_get_num_threads());
    st = attn_set_isa(attn_isa());
    attn_desc_destroy(desc);
    return (int)st + (int)attn_desc_required_len(desc, ATTN_ALLOWED) + (int)attn_version_number() +
           (attn_version_string() != NULL) + (attn_status_string(ATTN_OK) != NULL) +
           (attn_last_error() != NULL);
}
