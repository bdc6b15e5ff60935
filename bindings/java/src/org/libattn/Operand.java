package org.libattn;

/** The buffers of an attention call, for strides and required lengths. */
public enum Operand {
    /** Queries, floats [batch][headsQ][seqQ][headDim], strided. */
    Q(attn_operand.ATTN_Q),
    /** Keys, floats [batch][headsKv][seqK][headDim], strided. */
    K(attn_operand.ATTN_K),
    /** Values, floats [batch][headsKv][seqK][headDim], strided. */
    V(attn_operand.ATTN_V),
    /** Output, floats [batch][headsQ][seqQ][headDim], strided. */
    OUT(attn_operand.ATTN_OUT),
    /** Log-sum-exp, floats [batch][headsQ][seqQ], contiguous. */
    LSE(attn_operand.ATTN_LSE),
    /** Attention weights, floats [batch][headsQ][seqQ][seqK], contiguous. */
    WEIGHTS(attn_operand.ATTN_WEIGHTS),
    /** Padding mask, booleans [batch][seqK], true = real token. */
    KEY_VALID(attn_operand.ATTN_KEY_VALID),
    /** Allowed mask, booleans [seqQ][seqK], true = query i may see key j. */
    ALLOWED(attn_operand.ATTN_ALLOWED);

    final attn_operand raw;

    Operand(attn_operand raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }
}
