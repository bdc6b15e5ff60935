package org.libattn;

/**
 * Test data and comparisons shared by the Java tests. There is no attention arithmetic here: the
 * expected values come from the shared vectors (tests/vectors, written by the project's float64
 * reference tests/reference/attn_ref.py) or from the library's own dense call.
 */
final class TestData {
    private TestData() {
    }

    /** Deterministic pseudo-random floats in [-1, 1). */
    static float[] random(long seed, int n) {
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(seed);
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        return a;
    }

    /** |got - expected| <= tol * max(1, |expected|); infinities and NaN must match exactly. */
    static String compare(String what, float[] got, double[] expected, double tol) {
        if (got.length < expected.length) {
            return what + ": " + got.length + " values, expected " + expected.length;
        }
        for (int i = 0; i < expected.length; i++) {
            double e = expected[i];
            float g = got[i];
            boolean ok;
            if (Double.isNaN(e)) {
                ok = Float.isNaN(g);
            } else if (Double.isInfinite(e)) {
                ok = g == e;
            } else {
                ok = Math.abs(g - e) <= tol * Math.max(1.0, Math.abs(e));
            }
            if (!ok) {
                return what + "[" + i + "]: got " + g + ", expected " + e;
            }
        }
        return null;
    }

    /** {@link #compare(String, float[], double[], double)} against float32 expected values. */
    static String compare(String what, float[] got, float[] expected, double tol) {
        return compare(what, got, widen(expected), tol);
    }

    static double[] widen(float[] a) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) {
            d[i] = a[i];
        }
        return d;
    }

    /** null when got and want have the same length and bits, else where they first differ. */
    static String sameBits(String what, float[] got, float[] want) {
        if (got.length != want.length) {
            return what + ": " + got.length + " values, expected " + want.length;
        }
        for (int i = 0; i < got.length; i++) {
            if (Float.floatToRawIntBits(got[i]) != Float.floatToRawIntBits(want[i])) {
                return what + "[" + i + "]: got " + got[i] + ", the dense call gave " + want[i];
            }
        }
        return null;
    }

    /** a in a direct native-order buffer from element {@code position} on (position set there). */
    static java.nio.FloatBuffer direct(float[] a, int position) {
        java.nio.FloatBuffer f = java.nio.ByteBuffer.allocateDirect(4 * (a.length + position))
                .order(java.nio.ByteOrder.nativeOrder()).asFloatBuffer();
        f.position(position);
        f.put(a).position(position);
        return f;
    }

    /** {@link #direct(float[], int)} for ints. */
    static java.nio.IntBuffer direct(int[] a, int position) {
        java.nio.IntBuffer b = java.nio.ByteBuffer.allocateDirect(4 * (a.length + position))
                .order(java.nio.ByteOrder.nativeOrder()).asIntBuffer();
        b.position(position);
        b.put(a).position(position);
        return b;
    }

    /** The elements of f from its position to its limit. */
    static float[] rest(java.nio.FloatBuffer f) {
        float[] a = new float[f.remaining()];
        f.duplicate().get(a);
        return a;
    }
}
