package org.libattn;

import java.nio.charset.StandardCharsets;

/**
 * A libattn call failed for a reason other than its arguments (UNSUPPORTED, OUT_OF_MEMORY,
 * INTERNAL): the {@link Status} and the library's message. INVALID_ARGUMENT is an
 * IllegalArgumentException and NULL_POINTER a NullPointerException, with the library's message.
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

    /** The exception of a failed native call (thrown by the JNI layer), message in UTF-8. */
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

    /** The status ({@link Status#INTERNAL} for a code this binding does not know). */
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
        try {
            return Status.fromCode(code);
        } catch (IllegalArgumentException unknown) { // a newer library's status
            return Status.INTERNAL;
        }
    }

    private static String describe(int code, Status status) {
        return status.code() == code ? status.description() : "unknown status " + code;
    }
}
