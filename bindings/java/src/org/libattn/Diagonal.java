package org.libattn;

/**
 * The diagonal diag(i) the sliding window and ALiBi measure from (attn_diagonal,
 * ATTN_PARAM_DIAGONAL), for query i of batch entry (varlen / paged: sequence) b. The causal rule
 * keeps its own diagonal whatever this says. See capi/attn.h, "The score pipeline".
 */
public enum Diagonal {
    /** The causal rule's (the default): i + len_k(b) - len_q(b) under BOTTOM_RIGHT, else i. */
    CAUSAL(attn_diagonal.ATTN_DIAGONAL_CAUSAL),
    /** diag(i) = i. */
    TOP_LEFT(attn_diagonal.ATTN_DIAGONAL_TOP_LEFT),
    /** diag(i) = i + len_k(b) - len_q(b): FlashAttention's alignment, causal or not. */
    BOTTOM_RIGHT(attn_diagonal.ATTN_DIAGONAL_BOTTOM_RIGHT);

    final attn_diagonal raw;

    Diagonal(attn_diagonal raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /**
     * The value with this numeric code.
     *
     * @throws IllegalArgumentException if no value has this code
     */
    public static Diagonal fromCode(long code) {
        for (Diagonal x : values()) {
            if (x.code() == code) {
                return x;
            }
        }
        throw new IllegalArgumentException("diagonal (" + code + ") is not a Diagonal value (0 causal, 1 top_left, 2 bottom_right)");
    }
}
