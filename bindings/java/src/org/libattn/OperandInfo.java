package org.libattn;

import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/**
 * The facts of one {@link Operand} from the library's operand table (attn_operand_info): its
 * name, the storage types it may be bound with as an input and as an output, the rank and the
 * dimension names of its dense shape and whether {@link AttentionDesc.Builder#strides} takes
 * it. From {@link Operand#info()} or, for a raw code, {@link Attention#operandInfo(int)}.
 * Immutable.
 */
public final class OperandInfo {
    private final Operand operand;
    private final String name;
    /** The bit sets (1 << attn_dtype) as the library gives them. */
    final int inBits, outBits;
    private final int rank;
    private final boolean strided;
    private final List<String> dims;

    private OperandInfo(Operand operand, String name, int inBits, int outBits, int rank,
            boolean strided, String dims) {
        this.operand = operand;
        this.name = name;
        this.inBits = inBits;
        this.outBits = outBits;
        this.rank = rank;
        this.strided = strided;
        this.dims = Collections.unmodifiableList(Arrays.asList(dims.split(" ")));
    }

    /** attn_operand_info of code; an unknown code throws the library's IllegalArgumentException. */
    static OperandInfo of(int code) {
        String[] name = new String[1];
        int[] in = new int[1], out = new int[1], rank = new int[1], strided = new int[1];
        String[] dims = new String[1];
        AttnNativeJNI.attn_operand_info(code, name, in, out, rank, strided);
        AttnNativeJNI.attn_operand_dims(code, dims);
        return new OperandInfo(Operand.fromCode(code), name[0], in[0], out[0], rank[0], strided[0] != 0,
                dims[0]);
    }

    /** The operand. */
    public Operand operand() {
        return operand;
    }

    /** Its name in the library's messages: lowercase ("q", "key_valid", "k_scale"). */
    public String name() {
        return name;
    }

    /** The storage types it may be bound with as an input; empty if it is never an input. */
    public Set<Dtype> inputTypes() {
        return types(inBits);
    }

    /**
     * The storage types it may be bound with as an output (for K and V: the caches
     * {@link AttentionArgs#kvAppendArgs()} writes); empty if it is never an output.
     */
    public Set<Dtype> outputTypes() {
        return types(outBits);
    }

    /** The number of dimensions of its dense shape (Q 4, LSE 3, KEY_VALID 2, SINKS 1). */
    public int rank() {
        return rank;
    }

    /**
     * The names of the dimensions of its dense shape, outermost first, as attn.h writes them
     * (attn_operand_dims; Q: [batch, heads_q, seq_q, head_dim]); {@link #rank()} of them.
     * Unmodifiable.
     */
    public List<String> dims() {
        return dims;
    }

    /** True if {@link AttentionDesc.Builder#strides} accepts it. */
    public boolean isStrided() {
        return strided;
    }

    private static Set<Dtype> types(int bits) {
        EnumSet<Dtype> s = EnumSet.noneOf(Dtype.class);
        for (Dtype t : Dtype.values()) {
            if ((bits >> t.code() & 1) != 0) {
                s.add(t);
            }
        }
        return Collections.unmodifiableSet(s);
    }

    /** "name: rank r, in [...], out [...]" (", strided" when it is). */
    @Override
    public String toString() {
        return name + ": rank " + rank + ", in " + inputTypes() + ", out " + outputTypes()
                + (strided ? ", strided" : "");
    }
}
