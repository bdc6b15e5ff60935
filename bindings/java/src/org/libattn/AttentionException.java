package org.libattn;

import java.nio.charset.StandardCharsets;

/**
 * A libattn call failed: carries the {@link Status} and the library's own message for that call
 * (attn_last_error, read in the same native call, on the same thread).
 *
 * <p>{@link #getMessage()} is {@code "<status description>: <library message>"}, for example
 * {@code "invalid argument: heads_q (6) is not a multiple of heads_kv (4)"}.
 */
public class AttentionException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;
    private final Status status;
    private final String libraryMessage;

    /** An exception for {@code status} with the library's message {@code libraryMessage}. */
    public AttentionException(Status status, String libraryMessage) {
        this(status.code(), status, libraryMessage);
    }

    /** Thrown from the JNI layer: the message arrives as the C string's UTF-8 bytes. */
    AttentionException(int code, byte[] utf8Message) {
        this(code, known(code), new String(utf8Message, StandardCharsets.UTF_8));
    }

    private AttentionException(int code, Status status, String libraryMessage) {
        super(describe(code, status) + ": " + libraryMessage);
        this.code = code;
        this.status = status;
        this.libraryMessage = libraryMessage;
    }

    /**
     * The status. A code this binding does not know (a newer library) is reported as
     * {@link Status#INTERNAL}; {@link #code()} keeps the raw value.
     */
    public Status status() {
        return status;
    }

    /** The numeric status code returned by the C function. */
    public int code() {
        return code;
    }

    /** The library's message, naming the argument and the problem. */
    public String libraryMessage() {
        return libraryMessage;
    }

    private static Status known(int code) {
        attn_status raw = attn_status.swigToEnum(code);
        if (raw == null) {
            return Status.INTERNAL;
        }
        for (Status s : Status.values()) {
            if (s.raw == raw) {
                return s;
            }
        }
        return Status.INTERNAL;
    }

    private static String describe(int code, Status status) {
        return status.code() == code ? status.description() : "unknown status " + code;
    }
}
