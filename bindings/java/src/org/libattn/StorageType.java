package org.libattn;

/** How Q, K, V, DOUT, NEW_K, NEW_V are stored (attn.h "Storage types"; F32 .. I8: ordinals = attn_dtype). */
public enum StorageType {
    /** 32-bit IEEE floats: {@code float[]} or a direct FloatBuffer (the default). */
    F32("fp32"),
    /** IEEE binary16 bit patterns: {@code short[]} or a direct ShortBuffer. */
    F16("f16"),
    /** bfloat16 bit patterns: {@code short[]} or a direct ShortBuffer. */
    BF16("bf16"),
    /** Symmetric int8, value = q * scale of its row: {@code byte[]} or a direct ByteBuffer. */
    I8("int8"),
    /** OCP fp8 E4M3 codes times the optional scale: {@code byte[]} or a direct ByteBuffer. */
    FP8_E4M3("fp8_e4m3"),
    /** OCP fp8 E5M2 codes times the optional scale: {@code byte[]} or a direct ByteBuffer. */
    FP8_E5M2("fp8_e5m2");

    /** The name in messages ("f16", "int8", ...). */
    final String cname;

    StorageType(String cname) {
        this.cname = cname;
    }
}
