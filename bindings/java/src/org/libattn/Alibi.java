package org.libattn;

/**
 * ALiBi slopes (attn_alibi, ATTN_PARAM_ALIBI): the score of query i and key j gains
 * {@code -slope_h * (diag(i) - j)}.
 */
public enum Alibi {
    /** No ALiBi (the default). */
    NONE(attn_alibi.ATTN_ALIBI_NONE),
    /** Slopes from the {@link Operand#ALIBI_SLOPES} operand, [headsQ] floats, which is then required. */
    OPERAND(attn_alibi.ATTN_ALIBI_OPERAND),
    /**
     * The geometric slopes of Press et al. 2022 for headsQ heads, 2^(-8 (h + 1) / n) for a power
     * of two n, then interleaved slopes of 2n for the remaining heads (BLOOM's rule).
     */
    STANDARD(attn_alibi.ATTN_ALIBI_STANDARD);

    final attn_alibi raw;

    Alibi(attn_alibi raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /**
     * The ALiBi mode with this numeric value.
     *
     * @throws IllegalArgumentException if no mode has this value
     */
    public static Alibi fromCode(long code) {
        for (Alibi a : values()) {
            if (a.code() == code) {
                return a;
            }
        }
        throw new IllegalArgumentException("alibi (" + code + ") is not an Alibi value (0 none, "
                + "1 operand, 2 standard)");
    }
}
