package org.libattn;

/**
 * The buffers of an attention call (attn_operand in attn.h; the numeric values are pinned), for
 * {@link AttentionArgs#set}, {@link AttentionDesc.Builder#strides} and
 * {@link AttentionDesc#requiredLen}. Each has an element type: floats (float[] or a direct
 * FloatBuffer), a byte mask (boolean[], byte[] or a direct ByteBuffer; nonzero = true) or ints
 * (int[] or a direct IntBuffer). Q, K and V may also be stored in 16 bits or (K, V) as int8
 * ({@link StorageType}; {@link AttentionArgs#setF16}, {@link AttentionArgs#setBf16},
 * {@link AttentionArgs#setI8}); lengths always count elements.
 */
public enum Operand {
    /** Queries, floats [batch][headsQ][seqQ][headDim], strided; input. */
    Q(attn_operand.ATTN_Q, Element.FLOAT, false),
    /** Keys, floats [batch][headsKv][seqK][headDim], strided; input. */
    K(attn_operand.ATTN_K, Element.FLOAT, false),
    /** Values, floats [batch][headsKv][seqK][headDimV], strided; input. */
    V(attn_operand.ATTN_V, Element.FLOAT, false),
    /** Output, floats [batch][headsQ][seqQ][headDimV], strided; output. */
    OUT(attn_operand.ATTN_OUT, Element.FLOAT, true),
    /** Log-sum-exp, floats [batch][headsQ][seqQ], contiguous; output. */
    LSE(attn_operand.ATTN_LSE, Element.FLOAT, true),
    /** Attention weights, floats [batch][headsQ][seqQ][seqK], contiguous; output. */
    WEIGHTS(attn_operand.ATTN_WEIGHTS, Element.FLOAT, true),
    /** Padding mask, bytes [batch][seqK], true = real token; input. */
    KEY_VALID(attn_operand.ATTN_KEY_VALID, Element.BYTE, false),
    /** Allowed mask, bytes [seqQ][seqK], true = query i may see key j; input. */
    ALLOWED(attn_operand.ATTN_ALLOWED, Element.BYTE, false),
    /**
     * Additive score bias, floats [batch][headsQ][seqQ][seqK], strided (keys contiguous; stride
     * 0 broadcasts); -infinity hides a key; input. Since 0.2.
     */
    BIAS(attn_operand.ATTN_BIAS, Element.FLOAT, false),
    /**
     * ALiBi slopes, floats [headsQ], or [batch][headsQ] with the strides of
     * {@link AttentionDesc.Builder#strides}; input, required iff {@link Alibi#OPERAND}. Since 0.2.
     */
    ALIBI_SLOPES(attn_operand.ATTN_ALIBI_SLOPES, Element.FLOAT, false),
    /** Sink logits joining every row's softmax denominator, floats [headsQ]; input. Since 0.2. */
    SINKS(attn_operand.ATTN_SINKS, Element.FLOAT, false),
    /**
     * Query padding, bytes [batch][seqQ], false = padded query (output 0, lse -infinity,
     * weights 0); input. Since 0.2.
     */
    QUERY_VALID(attn_operand.ATTN_QUERY_VALID, Element.BYTE, false),
    /**
     * Keys per batch entry, ints [batch] in [0, seqK]: keys j &gt;= seqLensK[b] are padding;
     * BOTTOM_RIGHT aligns to this length; input. Since 0.2.
     */
    SEQ_LENS_K(attn_operand.ATTN_SEQ_LENS_K, Element.INT, false),
    /**
     * Attention each key received, floats [batch][headsQ][seqK]: mass[b][h][j] = sum_i w_ij;
     * optional output of {@link Op#FORWARD}. Since 0.2.
     */
    KEY_MASS(attn_operand.ATTN_KEY_MASS, Element.FLOAT, true),
    /**
     * Prefix sums of the query lengths of a varlen pack, ints [batch + 1]: cuSeqlensQ[0] = 0,
     * non-decreasing, sequence b has cuSeqlensQ[b + 1] - cuSeqlensQ[b] queries (0 allowed, at
     * most seqQ); required with {@link AttentionDesc.Builder#varlen()}; input. Since 0.2.
     */
    CU_SEQLENS_Q(attn_operand.ATTN_CU_SEQLENS_Q, Element.INT, false),
    /**
     * Prefix sums of the key lengths of a varlen pack, ints [batch + 1] (each at most seqK);
     * required with {@link AttentionDesc.Builder#varlen()} unless the K/V cache is paged;
     * input. Since 0.2.
     */
    CU_SEQLENS_K(attn_operand.ATTN_CU_SEQLENS_K, Element.INT, false),
    /**
     * The block table of a paged K/V cache, ints [batch][maxPages]: key j of sequence b is
     * token j % pageSize of page blockTable[b][j / pageSize]; -1 marks an unused slot; required
     * with {@link AttentionDesc.Builder#pageSize(int)} (with {@link #SEQ_LENS_K}); input.
     * Since 0.2.
     */
    BLOCK_TABLE(attn_operand.ATTN_BLOCK_TABLE, Element.INT, false),
    /**
     * New key rows for {@link AttentionArgs#kvAppend}, floats [tokens][headsKv][headDim],
     * contiguous (tokens = cuSeqlensQ[batch] in varlen mode, else batch * seqQ); input.
     * Since 0.2.
     */
    NEW_K(attn_operand.ATTN_NEW_K, Element.FLOAT, false),
    /** New value rows for {@link AttentionArgs#kvAppend}, floats [tokens][headsKv][headDimV]; input. Since 0.2. */
    NEW_V(attn_operand.ATTN_NEW_V, Element.FLOAT, false),
    /**
     * Gradient of OUT, floats in OUT's layout; input of {@link Op#BACKWARD} (required). Since
     * 0.2.
     */
    DOUT(attn_operand.ATTN_DOUT, Element.FLOAT, false),
    /** Gradient of Q, floats in Q's layout; output of {@link Op#BACKWARD}. Since 0.2. */
    DQ(attn_operand.ATTN_DQ, Element.FLOAT, true),
    /**
     * Gradient of K, floats in K's layout (GQA: summed over a KV head's query heads; 0 for
     * hidden and padded keys); output of {@link Op#BACKWARD}. Since 0.2.
     */
    DK(attn_operand.ATTN_DK, Element.FLOAT, true),
    /** Gradient of V, floats in V's layout; output of {@link Op#BACKWARD}. Since 0.2. */
    DV(attn_operand.ATTN_DV, Element.FLOAT, true),
    /**
     * Gradient of BIAS, floats in BIAS's layout (broadcast dimensions summed); output of
     * {@link Op#BACKWARD}, only with {@link #BIAS} bound. Since 0.2.
     */
    DBIAS(attn_operand.ATTN_DBIAS, Element.FLOAT, true),
    /**
     * Gradient of SINKS, floats [headsQ]; output of {@link Op#BACKWARD}, only with
     * {@link #SINKS} bound. Since 0.2.
     */
    DSINKS(attn_operand.ATTN_DSINKS, Element.FLOAT, true),
    /**
     * Scale of each int8 K row, floats [batch][headsKv][seqK] (K's shape with headDim 1),
     * strided ({@link AttentionDesc.Builder#strides}; default BHS, token-major with varlen,
     * [pages][pageSize][headsKv] with a paged cache); input, required with an int8 K
     * ({@link AttentionArgs#setI8}) and refused otherwise. Since 0.2.
     */
    K_SCALE(attn_operand.ATTN_K_SCALE, Element.FLOAT, false),
    /** Scale of each int8 V row, as {@link #K_SCALE} for V; input. Since 0.2. */
    V_SCALE(attn_operand.ATTN_V_SCALE, Element.FLOAT, false),
    /**
     * Scale of each int8 {@link #NEW_K} row, floats [tokens][headsKv]: new rows stored as int8
     * for an int8 K cache ({@link AttentionArgs#kvAppendArgs}); input. Since 0.2.
     */
    NEW_K_SCALE(attn_operand.ATTN_NEW_K_SCALE, Element.FLOAT, false),
    /** Scale of each int8 {@link #NEW_V} row, as {@link #NEW_K_SCALE}; input. Since 0.2. */
    NEW_V_SCALE(attn_operand.ATTN_NEW_V_SCALE, Element.FLOAT, false);

    /** Element types of operands. */
    enum Element {
        FLOAT("floats (float[] or a direct FloatBuffer)"),
        BYTE("a byte mask (boolean[], byte[] or a direct ByteBuffer)"),
        INT("ints (int[] or a direct IntBuffer)");

        final String what;

        Element(String what) {
            this.what = what;
        }
    }

    final attn_operand raw;
    final Element element;
    final boolean output;
    /** The library's name of the operand ("q", "key_valid", ...), used in messages. */
    final String cname;

    Operand(attn_operand raw, Element element, boolean output) {
        this.raw = raw;
        this.element = element;
        this.output = output;
        this.cname = name().toLowerCase(java.util.Locale.ROOT);
    }

    /**
     * True for Q, K, V, DOUT, NEW_K and NEW_V: the operands that may be stored in 16 bits (K, V,
     * NEW_K and NEW_V also as int8).
     */
    boolean storable() {
        return this == Q || this == K || this == V || this == DOUT || this == NEW_K
                || this == NEW_V;
    }

    /** True for K, V, NEW_K and NEW_V: the operands that may be stored as int8. */
    boolean storableI8() {
        return this == K || this == V || this == NEW_K || this == NEW_V;
    }

    /**
     * The storage slot of a storable operand in the JNI layer's storage codes (2 bits each:
     * Q 0, K 1, V 2, DOUT 3, NEW_K 4, NEW_V 5), -1 for the others.
     */
    int storeSlot() {
        switch (this) {
        case Q: return 0;
        case K: return 1;
        case V: return 2;
        case DOUT: return 3;
        case NEW_K: return 4;
        case NEW_V: return 5;
        default: return -1;
        }
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /** True for the operands the library writes (OUT, LSE, WEIGHTS, KEY_MASS, DQ .. DSINKS). */
    public boolean isOutput() {
        return output;
    }

    /**
     * The operand with this numeric value.
     *
     * @throws IllegalArgumentException if no operand has this value
     */
    public static Operand fromCode(long code) {
        if (code >= 0 && code < values().length) {
            Operand o = values()[(int) code];
            if (o.code() == code) {
                return o;
            }
        }
        for (Operand o : values()) {
            if (o.code() == code) {
                return o;
            }
        }
        throw new IllegalArgumentException("operand (" + code + ") is not an Operand value (0 .. "
                + (values().length - 1) + ")");
    }
}
