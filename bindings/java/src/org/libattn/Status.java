package org.libattn;

/** Status codes of libattn (attn_status in attn.h; the numeric values are pinned). */
public enum Status {
    /** Success. */
    OK(attn_status.ATTN_OK),
    /** A required pointer argument was NULL. */
    NULL_POINTER(attn_status.ATTN_ERR_NULL_POINTER),
    /** A size, stride, enum value or float is out of range. */
    INVALID_ARGUMENT(attn_status.ATTN_ERR_INVALID_ARGUMENT),
    /** Scratch or a descriptor could not be allocated. */
    OUT_OF_MEMORY(attn_status.ATTN_ERR_OUT_OF_MEMORY),
    /** A valid request this build or CPU cannot serve. */
    UNSUPPORTED(attn_status.ATTN_ERR_UNSUPPORTED),
    /** A bug in libattn; please report it with the message. */
    INTERNAL(attn_status.ATTN_ERR_INTERNAL);

    final attn_status raw;

    Status(attn_status raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /** The library's short description ("ok", "null pointer", ...; attn_status_string). */
    public String description() {
        return AttnNative.attn_status_string(raw);
    }

    /**
     * The status with this numeric value.
     *
     * @throws IllegalArgumentException if no status has this value
     */
    public static Status fromCode(int code) {
        for (Status s : values()) {
            if (s.code() == code) {
                return s;
            }
        }
        throw new IllegalArgumentException("no libattn status has the code " + code);
    }
}
