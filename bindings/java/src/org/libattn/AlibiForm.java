package org.libattn;

/**
 * The ALiBi term of key j for query i (attn_alibi_form, ATTN_PARAM_ALIBI_FORM), with diag(i)
 * as {@link Diagonal} sets it and slope(b, h) the slope of (batch entry, head). See capi/attn.h.
 */
public enum AlibiForm {
    /** -slope(b, h) * (diag(i) - j) (the default): keys after the diagonal get a positive term. */
    LINEAR(attn_alibi_form.ATTN_ALIBI_LINEAR),
    /** -slope(b, h) * |diag(i) - j|: FlashAttention's non-causal ALiBi. */
    SYMMETRIC(attn_alibi_form.ATTN_ALIBI_SYMMETRIC);

    final attn_alibi_form raw;

    AlibiForm(attn_alibi_form raw) {
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
    public static AlibiForm fromCode(long code) {
        for (AlibiForm x : values()) {
            if (x.code() == code) {
                return x;
            }
        }
        throw new IllegalArgumentException("alibi_form (" + code + ") is not a AlibiForm value (0 linear, 1 symmetric)");
    }
}
