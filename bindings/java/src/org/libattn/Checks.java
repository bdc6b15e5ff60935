package org.libattn;

import java.nio.Buffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;

/** What the library cannot see of a Java argument: null, a buffer's kind and window. */
final class Checks {
    /** The largest length a Java array can have on common VMs. */
    static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

    private Checks() {}

    /** x, or a NullPointerException naming it. */
    static <T> T given(T x, String name) {
        if (x == null) {
            throw new NullPointerException(name + " must not be null");
        }
        return x;
    }

    /** b as native code sees it (address to capacity): direct, native order, sliced; null stays. */
    @SuppressWarnings("unchecked")
    static <B extends Buffer> B buffer(B b, String name, boolean output) {
        if (b == null) {
            return null;
        }
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + " must be a direct buffer (ByteBuffer."
                    + "allocateDirect(n).order(ByteOrder.nativeOrder())), got a heap buffer");
        }
        ByteOrder order = b instanceof FloatBuffer ? ((FloatBuffer) b).order()
                : b instanceof IntBuffer ? ((IntBuffer) b).order()
                : b instanceof ShortBuffer ? ((ShortBuffer) b).order() : ByteOrder.nativeOrder();
        if (order != ByteOrder.nativeOrder()) {
            throw new IllegalArgumentException(name + " has byte order " + order
                    + ", it must be the native byte order " + ByteOrder.nativeOrder());
        }
        if (output && b.isReadOnly()) {
            throw new IllegalArgumentException(name + " is read-only");
        }
        return b.position() == 0 && b.limit() == b.capacity() ? b : (B) b.slice();
    }
}
