package org.libattn;

/** Causal rule: which keys j query i may see, before padding and the allowed mask. */
public enum Causal {
    /** Every key. */
    NONE(attn_causal.ATTN_CAUSAL_NONE),
    /** Key j is visible to query i when j &lt;= i (PyTorch is_causal, ONNX without cache). */
    TOP_LEFT(attn_causal.ATTN_CAUSAL_TOP_LEFT),
    /** Key j is visible to query i when j &lt;= i + (seqK - seqQ) (KV-cache / decode). */
    BOTTOM_RIGHT(attn_causal.ATTN_CAUSAL_BOTTOM_RIGHT);

    final attn_causal raw;

    Causal(attn_causal raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /**
     * The causal rule with this numeric value.
     *
     * @throws IllegalArgumentException if no causal rule has this value
     */
    public static Causal fromCode(int code) {
        return fromCode((long) code);
    }

    /**
     * As {@link #fromCode(int)}, for any integer (no truncation to 32 bits).
     *
     * @throws IllegalArgumentException if no causal rule has this value
     */
    public static Causal fromCode(long code) {
        for (Causal c : values()) {
            if (c.code() == code) {
                return c;
            }
        }
        throw new IllegalArgumentException("causal (" + code + ") is not a Causal value (0, 1 or 2)");
    }
}
