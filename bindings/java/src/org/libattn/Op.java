package org.libattn;

/** Operations of {@link AttentionArgs#run(Op)} (attn_op in attn.h; the numeric values are pinned). */
public enum Op {
    /** Reads Q, K, V and the optional operands; writes OUT, and LSE and KEY_MASS when bound. */
    FORWARD(attn_op.ATTN_OP_FORWARD),
    /** Reads Q, K and the optional operands; writes WEIGHTS (see {@link WeightsMode}). */
    WEIGHTS(attn_op.ATTN_OP_WEIGHTS),
    /**
     * The gradients (since 0.2): reads Q, K, V, the forward's OUT and LSE and
     * {@link Operand#DOUT} (plus the forward's optional operands); writes the gradients bound
     * among {@link Operand#DQ}, {@link Operand#DK}, {@link Operand#DV}, {@link Operand#DBIAS}
     * and {@link Operand#DSINKS} (at least one). Needs fp32 Q, K and V.
     */
    BACKWARD(attn_op.ATTN_OP_BACKWARD);

    final attn_op raw;

    Op(attn_op raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /**
     * The operation with this numeric value.
     *
     * @throws IllegalArgumentException if no operation has this value
     */
    public static Op fromCode(long code) {
        for (Op o : values()) {
            if (o.code() == code) {
                return o;
            }
        }
        throw new IllegalArgumentException("op (" + code + ") is not an Op value (0 forward, "
                + "1 weights, 2 backward)");
    }
}
