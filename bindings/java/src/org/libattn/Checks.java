package org.libattn;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;

/**
 * Argument checks shared by the face classes; every message names the argument. The rules are
 * docs/errors.md, "One rule in every language": null means "not given" (an error for a required
 * argument: {@link NullPointerException}); an array or buffer shorter than required, empty ones
 * included, is an {@link IllegalArgumentException} ("q has 10 elements, needs at least 12");
 * longer ones are fine (only the prefix is used).
 */
final class Checks {
    /** The largest length a Java array can have on common VMs. */
    static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

    private Checks() {}

    static NullPointerException missing(String name) {
        return new NullPointerException(name + " must not be null");
    }

    /** have &lt; need: the length error, naming the argument and where the need comes from. */
    static void length(long have, String name, long need, String what, String unit) {
        if (have < need) {
            throw new IllegalArgumentException(name + " has " + have + " " + unit
                    + ", needs at least " + need + " (" + what + ")");
        }
    }

    static String required(Operand op) {
        return "requiredLen(" + op + ")";
    }

    /** A required float[]: not null and at least {@code need} elements. */
    static void minLength(float[] a, String name, long need, Operand op) {
        if (a == null) {
            throw missing(name);
        }
        length(a.length, name, need, required(op), "elements");
    }

    /** An optional float[]: null, or at least {@code need} elements. */
    static void optional(float[] a, String name, long need, Operand op) {
        if (a != null) {
            length(a.length, name, need, required(op), "elements");
        }
    }

    /** An optional boolean[]: null, or at least {@code need} elements. */
    static void optional(boolean[] a, String name, long need, Operand op) {
        if (a != null) {
            length(a.length, name, need, required(op), "elements");
        }
    }

    /**
     * A FloatBuffer for native code: direct, native byte order, writable if an output, at least
     * {@code need} floats remaining. Returns the buffer to pass (a slice when the buffer does
     * not start at its position 0 or ends before its capacity, because native code sees the
     * buffer from its start address to its capacity). null stays null when optional.
     */
    static FloatBuffer floats(FloatBuffer b, String name, long need, Operand op, boolean required,
            boolean output) {
        return floats(b, name, need, required(op), required, output);
    }

    /** As above; {@code what} says where {@code need} comes from (for the message). */
    static FloatBuffer floats(FloatBuffer b, String name, long need, String what, boolean required,
            boolean output) {
        if (b == null) {
            if (required) {
                throw missing(name);
            }
            return null;
        }
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + " must be a direct FloatBuffer (e.g. "
                    + "ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder())"
                    + ".asFloatBuffer()), got a heap buffer");
        }
        if (b.order() != ByteOrder.nativeOrder()) {
            throw new IllegalArgumentException(name + " has byte order " + b.order()
                    + ", it must be the native byte order " + ByteOrder.nativeOrder()
                    + " (ByteBuffer.order(ByteOrder.nativeOrder()) before asFloatBuffer())");
        }
        return common(b, name, need, what, output);
    }

    /** An IntBuffer for native code: direct, native byte order, long enough. */
    static IntBuffer ints(IntBuffer b, String name, long need, Operand op) {
        return ints(b, name, need, required(op));
    }

    /** As above; {@code what} says where {@code need} comes from. */
    static IntBuffer ints(IntBuffer b, String name, long need, String what) {
        if (b == null) {
            return null;
        }
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + " must be a direct IntBuffer (e.g. "
                    + "ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder())"
                    + ".asIntBuffer()), got a heap buffer");
        }
        if (b.order() != ByteOrder.nativeOrder()) {
            throw new IllegalArgumentException(name + " has byte order " + b.order()
                    + ", it must be the native byte order " + ByteOrder.nativeOrder()
                    + " (ByteBuffer.order(ByteOrder.nativeOrder()) before asIntBuffer())");
        }
        return common(b, name, need, what, false);
    }

    /**
     * A ShortBuffer of 16-bit values (f16 / bf16 bit patterns) for native code: direct, native
     * byte order, writable if an output, long enough.
     */
    static ShortBuffer shorts(ShortBuffer b, String name, long need, String what, boolean required,
            boolean output) {
        if (b == null) {
            if (required) {
                throw missing(name);
            }
            return null;
        }
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + " must be a direct ShortBuffer (e.g. "
                    + "ByteBuffer.allocateDirect(2 * n).order(ByteOrder.nativeOrder())"
                    + ".asShortBuffer()), got a heap buffer");
        }
        if (b.order() != ByteOrder.nativeOrder()) {
            throw new IllegalArgumentException(name + " has byte order " + b.order()
                    + ", it must be the native byte order " + ByteOrder.nativeOrder()
                    + " (ByteBuffer.order(ByteOrder.nativeOrder()) before asShortBuffer())");
        }
        return common(b, name, need, what, output);
    }

    /** An int8 ByteBuffer: direct, writable if an output, long enough (byte order is moot). */
    static ByteBuffer int8(ByteBuffer b, String name, long need, String what, boolean required,
            boolean output) {
        if (b == null) {
            if (required) {
                throw missing(name);
            }
            return null;
        }
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + " must be a direct ByteBuffer "
                    + "(ByteBuffer.allocateDirect(n)), got a heap buffer");
        }
        return common(b, name, need, what, output);
    }

    /**
     * An array range for native code: {@code pos} and {@code n} not negative, and
     * {@code pos + n} elements in an array of {@code length}.
     */
    static void range(int length, int pos, long n, String name, String posName, String what) {
        if (pos < 0) {
            throw new IllegalArgumentException(posName + " (" + pos + ") is negative");
        }
        if (n < 0) {
            throw new IllegalArgumentException(what + " (" + n + ") is negative");
        }
        if (pos > length || n > length - pos) {
            throw new IllegalArgumentException(name + " has " + length + " elements, needs at least "
                    + (pos + n) + " (" + posName + " " + pos + " + " + what + " " + n + ")");
        }
    }

    /** A mask ByteBuffer (one byte per boolean, nonzero = true): direct, long enough. */
    static ByteBuffer bytes(ByteBuffer b, String name, long need, Operand op) {
        return bytes(b, name, need, required(op));
    }

    /** As above; {@code what} says where {@code need} comes from. */
    static ByteBuffer bytes(ByteBuffer b, String name, long need, String what) {
        if (b == null) {
            return null;
        }
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + " must be a direct ByteBuffer "
                    + "(ByteBuffer.allocateDirect(n)), got a heap buffer");
        }
        return common(b, name, need, what, false);
    }

    @SuppressWarnings("unchecked")
    private static <B extends Buffer> B common(B b, String name, long need, String what,
            boolean output) {
        if (output && b.isReadOnly()) {
            throw new IllegalArgumentException(name + " is read-only");
        }
        length(b.remaining(), name, need, what, "elements remaining");
        return b.position() == 0 && b.limit() == b.capacity() ? b : (B) b.slice();
    }
}
