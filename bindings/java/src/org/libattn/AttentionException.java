package org.libattn;

import java.nio.charset.StandardCharsets;

/**
 * A libattn call failed for a reason other than its arguments: carries the {@link Status}
 * ({@link Status#UNSUPPORTED}, {@link Status#OUT_OF_MEMORY}, {@link Status#INTERNAL}) and the
 * library's own message for that call (attn_last_error, read in the same native call, on the
 * same thread).
 *
 * <p>Argument errors have the language's own kinds, whether the binding sees them before calling
 * into C or the library reports them (README "One rule in every language"):
 * {@link Status#INVALID_ARGUMENT} is an {@link IllegalArgumentException} and
 * {@link Status#NULL_POINTER} a {@link NullPointerException}, each with the library's message.
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

    /**
     * The exception of a failed native call, thrown by the JNI layer: NULL_POINTER is a
     * {@link NullPointerException}, INVALID_ARGUMENT an {@link IllegalArgumentException}, each
     * with the library's message; any other status an AttentionException. The message arrives
     * as the C string's UTF-8 bytes.
     */
    static RuntimeException forStatus(int code, byte[] utf8Message) {
        String message = new String(utf8Message, StandardCharsets.UTF_8);
        if (code == Status.NULL_POINTER.code()) {
            return new NullPointerException(message);
        }
        if (code == Status.INVALID_ARGUMENT.code()) {
            return new IllegalArgumentException(message);
        }
        return new AttentionException(code, known(code), message);
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
        for (Status s : Status.values()) {
            if (s.code() == code) {
                return s;
            }
        }
        return Status.INTERNAL;
    }

    private static String describe(int code, Status status) {
        return status.code() == code ? status.description() : "unknown status " + code;
    }
}
