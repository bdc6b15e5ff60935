package org.libattn;

/**
 * How an operand's values are stored (attn.h "Storage types", since 0.2). Q, K and V may be
 * 16-bit ({@link #F16}, {@link #BF16}: {@code short[]} or a direct {@link java.nio.ShortBuffer} of
 * bit patterns, bound with {@link AttentionArgs#setF16} / {@link AttentionArgs#setBf16}), K and V
 * also int8 ({@link #I8}: {@code byte[]} or a direct {@link java.nio.ByteBuffer}, bound with
 * {@link AttentionArgs#setI8}, with one fp32 scale per row in {@link Operand#K_SCALE} /
 * {@link Operand#V_SCALE}); every other operand is {@link #F32} (or its mask / int type). The
 * library widens every value to fp32 on load: the result is fp32 attention over the widened
 * values. {@link Convert} fills such buffers.
 */
public enum StorageType {
    /** 32-bit IEEE floats: {@code float[]} or a direct FloatBuffer (the default). */
    F32("fp32", "float[] or a direct FloatBuffer"),
    /** IEEE binary16 bit patterns: {@code short[]} or a direct ShortBuffer. */
    F16("f16", "short[] or a direct ShortBuffer of f16 bit patterns"),
    /** bfloat16 bit patterns (the upper half of a float): {@code short[]} or a direct ShortBuffer. */
    BF16("bf16", "short[] or a direct ShortBuffer of bf16 bit patterns"),
    /** Symmetric int8, value = q * scale of its row: {@code byte[]} or a direct ByteBuffer. */
    I8("int8", "byte[] or a direct ByteBuffer of int8 values");

    /** The name in messages ("f16", "int8", ...). */
    final String cname;
    /** The Java types it takes, for messages. */
    final String what;

    StorageType(String cname, String what) {
        this.cname = cname;
        this.what = what;
    }

    /** The storage code of the JNI layer (2 bits per operand; the ordinal). */
    int code() {
        return ordinal();
    }
}
