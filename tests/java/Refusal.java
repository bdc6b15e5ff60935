package org.libattn;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

import org.junit.jupiter.api.function.Executable;

/**
 * A refused call, checked against the one rule of every language (README "One rule in every
 * language", tests/vectors/VARIANTS.md): INVALID_ARGUMENT is an {@link IllegalArgumentException},
 * NULL_POINTER a {@link NullPointerException}, any other status an {@link AttentionException}
 * carrying it; whether the face or the library found the problem, the message is the one that
 * names it.
 */
final class Refusal {
    final RuntimeException exception;
    private final Status status;

    private Refusal(RuntimeException exception, Status status) {
        this.exception = exception;
        this.status = status;
    }

    /** Runs call, which must throw; returns the refusal after checking its kind. */
    static Refusal of(Executable call) {
        return of(call, "");
    }

    /** As {@link #of(Executable)}; {@code what} prefixes the failure messages. */
    static Refusal of(Executable call, String what) {
        String at = what.isEmpty() ? "" : what + ": ";
        try {
            call.execute();
        } catch (AttentionException e) {
            assertFalse(e.status() == Status.INVALID_ARGUMENT || e.status() == Status.NULL_POINTER,
                    at + "an AttentionException for " + e.status() + " (the rule: "
                            + (e.status() == Status.NULL_POINTER ? "NullPointerException"
                                    : "IllegalArgumentException") + "): " + e.getMessage());
            return new Refusal(e, e.status());
        } catch (NullPointerException e) {
            return new Refusal(e, Status.NULL_POINTER);
        } catch (IllegalArgumentException e) {
            return new Refusal(e, Status.INVALID_ARGUMENT);
        } catch (Throwable t) {
            fail(at + "expected a refusal, got " + t, t);
        }
        return fail(at + "expected a refusal, the call succeeded");
    }

    /** The status the exception's kind stands for. */
    Status status() {
        return status;
    }

    /** The numeric status. */
    int code() {
        return exception instanceof AttentionException ? ((AttentionException) exception).code()
                : status.code();
    }

    /** The message naming the problem (the library's own for what the library refused). */
    String libraryMessage() {
        return exception instanceof AttentionException
                ? ((AttentionException) exception).libraryMessage()
                : exception.getMessage();
    }

    /** The exception's whole message. */
    String getMessage() {
        return exception.getMessage();
    }
}
