/* Pinned values of the public header checked at compile time (pinned_values.h) AND against the
 * built library at run time: status strings, version, required lengths per operand index. */
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "pinned_values.h"

static int failures = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

int main(void) {
    /* Runtime mirror of the compile-time pins (an enum compiled into the library as a switch
     * must agree with the header a client compiled against). */
    static const struct {
        int value;
        const char *text;
    } statuses[] = {
        {0, "ok"},          {1, "null pointer"},  {2, "invalid argument"}, {3, "out of memory"},
        {4, "unsupported"}, {5, "internal error"}};
    size_t x;
    attn_desc *desc = NULL;
    for (x = 0; x < sizeof statuses / sizeof statuses[0]; ++x) {
        const char *s = attn_status_string((attn_status)statuses[x].value);
        CHECK(s != NULL && strcmp(s, statuses[x].text) == 0);
    }
    CHECK(strcmp(attn_status_string((attn_status)6), "unknown status") == 0);
    CHECK(strcmp(attn_status_string((attn_status)-1), "unknown status") == 0);
    CHECK(attn_version_number() == ATTN_VERSION_NUMBER);
    CHECK(strcmp(attn_version_string(), ATTN_VERSION_STRING) == 0);

    /* Operand indices as the library reads them: batch 2, heads_q 3, heads_kv 1, seq_q 5,
     * seq_k 7, head_dim 11 gives a distinct length per operand. */
    CHECK(attn_desc_create(&desc, 2, 3, 1, 5, 7, 11) == ATTN_OK);
    CHECK(attn_desc_required_len(desc, (attn_operand)0) == 2 * 3 * 5 * 11); /* Q */
    CHECK(attn_desc_required_len(desc, (attn_operand)1) == 2 * 1 * 7 * 11); /* K */
    CHECK(attn_desc_required_len(desc, (attn_operand)2) == 2 * 1 * 7 * 11); /* V */
    CHECK(attn_desc_required_len(desc, (attn_operand)3) == 2 * 3 * 5 * 11); /* OUT */
    CHECK(attn_desc_required_len(desc, (attn_operand)4) == 2 * 3 * 5);      /* LSE */
    CHECK(attn_desc_required_len(desc, (attn_operand)5) == 2 * 3 * 5 * 7);  /* WEIGHTS */
    CHECK(attn_desc_required_len(desc, (attn_operand)6) == 2 * 7);          /* KEY_VALID */
    CHECK(attn_desc_required_len(desc, (attn_operand)7) == 5 * 7);          /* ALLOWED */
    CHECK(attn_desc_required_len(desc, (attn_operand)8) == 2 * 3 * 5 * 7);  /* BIAS */
    CHECK(attn_desc_required_len(desc, (attn_operand)9) == 3);              /* ALIBI_SLOPES */
    CHECK(attn_desc_required_len(desc, (attn_operand)10) == 3);             /* SINKS */
    CHECK(attn_desc_required_len(desc, (attn_operand)11) == 2 * 5);         /* QUERY_VALID */
    CHECK(attn_desc_required_len(desc, (attn_operand)12) == 2);             /* SEQ_LENS_K */
    CHECK(attn_desc_required_len(desc, (attn_operand)13) == 2 * 3 * 7);     /* KEY_MASS */
    CHECK(attn_desc_required_len(desc, (attn_operand)14) == 2 + 1);         /* CU_SEQLENS_Q */
    CHECK(attn_desc_required_len(desc, (attn_operand)15) == 2 + 1);         /* CU_SEQLENS_K */
    CHECK(attn_desc_required_len(desc, (attn_operand)16) == 0); /* BLOCK_TABLE: not paged */
    CHECK(attn_desc_required_len(desc, (attn_operand)17) == 2 * 5 * 1 * 11); /* NEW_K */
    CHECK(attn_desc_required_len(desc, (attn_operand)18) == 2 * 5 * 1 * 11); /* NEW_V */
    CHECK(attn_desc_required_len(desc, (attn_operand)19) == 2 * 3 * 5 * 11); /* DOUT */
    CHECK(attn_desc_required_len(desc, (attn_operand)20) == 2 * 3 * 5 * 11); /* DQ */
    CHECK(attn_desc_required_len(desc, (attn_operand)21) == 2 * 1 * 7 * 11); /* DK */
    CHECK(attn_desc_required_len(desc, (attn_operand)22) == 2 * 1 * 7 * 11); /* DV */
    CHECK(attn_desc_required_len(desc, (attn_operand)23) == 2 * 3 * 5 * 7);  /* DBIAS */
    CHECK(attn_desc_required_len(desc, (attn_operand)24) == 3);              /* DSINKS */
    CHECK(attn_desc_required_len(desc, (attn_operand)25) == 2 * 1 * 7);      /* K_SCALE */
    CHECK(attn_desc_required_len(desc, (attn_operand)26) == 2 * 1 * 7);      /* V_SCALE */
    CHECK(attn_desc_required_len(desc, (attn_operand)27) == 2 * 5 * 1);      /* NEW_K_SCALE */
    CHECK(attn_desc_required_len(desc, (attn_operand)28) == 2 * 5 * 1);      /* NEW_V_SCALE */
    CHECK(attn_desc_required_len(desc, (attn_operand)29) == 3);              /* Q_SCALE */
    CHECK(attn_desc_required_len(desc, (attn_operand)30) == 0);
    {
        int64_t iv = -5;
        double fv = 0;
        CHECK(attn_desc_set_int(desc, (attn_param)2, 4) == ATTN_OK); /* WINDOW_LEFT */
        CHECK(attn_desc_get_int(desc, (attn_param)2, &iv) == ATTN_OK && iv == 4);
        CHECK(attn_desc_set_float(desc, (attn_param)4, 30.0) == ATTN_OK); /* SOFTCAP */
        CHECK(attn_desc_get_float(desc, (attn_param)4, &fv) == ATTN_OK && fv == 30.0);
        CHECK(attn_desc_set_int(desc, (attn_param)13, 1) == ATTN_OK); /* BATCH_INVARIANT */
        CHECK(attn_desc_get_int(desc, (attn_param)13, &iv) == ATTN_OK && iv == 1);
        CHECK(attn_desc_set_int(desc, (attn_param)13, 0) == ATTN_OK);
        CHECK(attn_desc_set_int(desc, (attn_param)14, 1) == ATTN_OK); /* COMPUTE = FP16 */
        CHECK(attn_desc_get_int(desc, (attn_param)14, &iv) == ATTN_OK && iv == 1);
        CHECK(attn_desc_set_int(desc, (attn_param)14, 2) == ATTN_OK); /* COMPUTE = INT8 */
        CHECK(attn_desc_get_int(desc, (attn_param)14, &iv) == ATTN_OK && iv == 2);
        CHECK(attn_desc_set_int(desc, (attn_param)14, 3) == ATTN_OK); /* COMPUTE = BF16 */
        CHECK(attn_desc_set_int(desc, (attn_param)14, 4) == ATTN_ERR_INVALID_ARGUMENT);
        CHECK(attn_desc_set_int(desc, (attn_param)14, 0) == ATTN_OK);
        CHECK(attn_desc_set_int(desc, (attn_param)15, 2) == ATTN_OK); /* DIAGONAL = BOTTOM_RIGHT */
        CHECK(attn_desc_get_int(desc, (attn_param)15, &iv) == ATTN_OK && iv == 2);
        CHECK(attn_desc_set_int(desc, (attn_param)15, 3) == ATTN_ERR_INVALID_ARGUMENT);
        CHECK(attn_desc_set_int(desc, (attn_param)15, 0) == ATTN_OK);
        CHECK(attn_desc_set_int(desc, (attn_param)16, 1) == ATTN_OK); /* ALIBI_FORM = SYMMETRIC */
        CHECK(attn_desc_get_int(desc, (attn_param)16, &iv) == ATTN_OK && iv == 1);
        CHECK(attn_desc_set_int(desc, (attn_param)16, 2) == ATTN_ERR_INVALID_ARGUMENT);
        CHECK(attn_desc_set_int(desc, (attn_param)16, 0) == ATTN_OK);
        CHECK(attn_desc_set_int(desc, (attn_param)17, 0) == ATTN_ERR_INVALID_ARGUMENT);
        CHECK(attn_desc_set_int(desc, (attn_param)2, 0) == ATTN_OK);
        CHECK(attn_desc_set_int(desc, (attn_param)2, -1) == ATTN_OK);
        CHECK(attn_desc_set_float(desc, (attn_param)4, 0.0) == ATTN_OK);
    }
    CHECK(attn_desc_set_causal(desc, (attn_causal)0) == ATTN_OK);
    CHECK(attn_desc_set_causal(desc, (attn_causal)1) == ATTN_OK);
    CHECK(attn_desc_set_causal(desc, (attn_causal)2) == ATTN_OK);
    CHECK(attn_desc_set_causal(desc, (attn_causal)3) == ATTN_ERR_INVALID_ARGUMENT);
    /* Strides for Q (0) and OUT (3) are accepted, LSE (4) is not. */
    CHECK(attn_desc_set_strides(desc, (attn_operand)3, 3 * 5 * 11, 5 * 11, 11) == ATTN_OK);
    CHECK(attn_desc_set_strides(desc, (attn_operand)4, 1, 1, 1) == ATTN_ERR_INVALID_ARGUMENT);
    attn_desc_destroy(desc);
    /* Status codes seen through real failures. */
    CHECK(attn_desc_create(NULL, 1, 1, 1, 1, 1, 1) == (attn_status)1);
    CHECK(attn_desc_create(&desc, 0, 1, 1, 1, 1, 1) == (attn_status)2);
    CHECK(attn_set_isa("no-such-isa") == (attn_status)2);

    if (failures) {
        fprintf(stderr, "%d pinned-value check(s) failed\n", failures);
        return 1;
    }
    printf("pinned values OK (status 0..5, causal 0..2, operand 0..7, version %s)\n",
           attn_version_string());
    return 0;
}
