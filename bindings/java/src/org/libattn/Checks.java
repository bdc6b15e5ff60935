package org.libattn;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/** Argument checks shared by the face classes; every message names the argument. */
final class Checks {
    /** The largest length a Java array can have on common VMs. */
    static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

    private Checks() {}

    static void exactLength(float[] a, String name, int expected, String what) {
        if (a == null) {
            throw new NullPointerException(name + " must not be null");
        }
        if (a.length != expected) {
            throw new IllegalArgumentException(
                    name + " has " + a.length + " elements, expected " + what + " = " + expected);
        }
    }

    /** A required float[]: not null and at least {@code need} elements. */
    static void minLength(float[] a, String name, long need, Operand op) {
        if (a == null) {
            throw new NullPointerException(name + " must not be null");
        }
        tooShort(a.length, name, need, op, "elements");
    }

    /** An optional boolean[]: null, or at least {@code need} elements. */
    static void minLength(boolean[] a, String name, long need, Operand op) {
        if (a != null) {
            tooShort(a.length, name, need, op, "elements");
        }
    }

    private static void tooShort(long have, String name, long need, Operand op, String unit) {
        if (have < need) {
            throw new IllegalArgumentException(name + " is too short: " + have + " " + unit
                    + ", the descriptor requires " + need + " (requiredLen(" + op + "))");
        }
    }

    /** Outputs must not be the same array object as another argument. */
    static void notSameArray(Object out, String outName, Object... others) {
        for (int i = 0; i + 1 < others.length; i += 2) {
            if (out != null && out == others[i]) {
                throw new IllegalArgumentException(
                        outName + " must not be the same array as " + others[i + 1]);
            }
        }
    }

    /**
     * A FloatBuffer for native code: direct, native byte order, writable if an output, at least
     * {@code need} floats remaining. Returns the buffer to pass (a slice when the position is not
     * 0, because native code sees the buffer from its start address). null stays null when
     * optional.
     */
    static FloatBuffer floats(FloatBuffer b, String name, long need, Operand op, boolean required,
            boolean output) {
        if (b == null) {
            if (required) {
                throw new NullPointerException(name + " must not be null");
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
        return common(b, name, need, op, output, "floats");
    }

    /** A mask ByteBuffer (one byte per boolean, nonzero = true): direct, long enough. */
    static ByteBuffer bytes(ByteBuffer b, String name, long need, Operand op) {
        if (b == null) {
            return null;
        }
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + " must be a direct ByteBuffer "
                    + "(ByteBuffer.allocateDirect(n)), got a heap buffer");
        }
        return common(b, name, need, op, false, "bytes");
    }

    @SuppressWarnings("unchecked")
    private static <B extends Buffer> B common(B b, String name, long need, Operand op,
            boolean output, String unit) {
        if (output && b.isReadOnly()) {
            throw new IllegalArgumentException(name + " is read-only");
        }
        tooShort(b.remaining(), name, need, op, unit + " remaining");
        return b.position() == 0 ? b : (B) b.slice();
    }
}
