package org.libattn;

/**
 * The descriptor parameters (attn_param): their kind and range from attn_param_bounds (read once
 * per parameter), Java-side validation with those bounds, and typed reads of a descriptor.
 */
final class Params {
    private Params() {}

    /** Kind and closed range of one parameter, as the library reports them. */
    static final class Bounds {
        final boolean isFloat;
        final double min;
        final double max;

        Bounds(boolean isFloat, double min, double max) {
            this.isFloat = isFloat;
            this.min = min;
            this.max = max;
        }
    }

    private static final Bounds[] BOUNDS = new Bounds[attn_param.values().length];

    static Bounds bounds(attn_param p) {
        int id = p.swigValue();
        synchronized (BOUNDS) {
            Bounds b = BOUNDS[id];
            if (b == null) {
                int[] isFloat = new int[1];
                double[] min = new double[1];
                double[] max = new double[1];
                AttnNative.attn_param_bounds(p, isFloat, min, max);
                b = new Bounds(isFloat[0] != 0, min[0], max[0]);
                BOUNDS[id] = b;
            }
            return b;
        }
    }

    /** An integer value for parameter p, refused unless within attn_param_bounds. */
    static long checkInt(attn_param p, long value, String name) {
        Bounds b = bounds(p);
        if (!(value >= b.min && value <= b.max)) {
            throw new IllegalArgumentException(name + " (" + value + ") is outside ["
                    + show(b, b.min) + ", " + show(b, b.max) + "] (" + p.name() + ")");
        }
        return value;
    }

    /** A float value for parameter p, refused when NaN or outside attn_param_bounds. */
    static float checkFloat(attn_param p, float value, String name) {
        Bounds b = bounds(p);
        if (Float.isNaN(value)) {
            throw new IllegalArgumentException(name + " must not be NaN (" + p.name() + ")");
        }
        if (!(value >= b.min && value <= b.max)) {
            throw new IllegalArgumentException(name + " (" + value + ") is outside ["
                    + show(b, b.min) + ", " + show(b, b.max) + "] (" + p.name() + ")");
        }
        return value;
    }

    /**
     * A value of any kind for parameter p (the generic builder setter): NaN, values outside
     * attn_param_bounds and, for an integer parameter, non-integral values are refused.
     */
    static double checkDouble(attn_param p, double value, String name) {
        Bounds b = bounds(p);
        if (Double.isNaN(value)) {
            throw new IllegalArgumentException(name + " must not be NaN (" + p.name() + ")");
        }
        if (!(value >= b.min && value <= b.max)) {
            throw new IllegalArgumentException(name + " (" + value + ") is outside ["
                    + show(b, b.min) + ", " + show(b, b.max) + "] (" + p.name() + ")");
        }
        if (!b.isFloat && value != Math.floor(value)) {
            throw new IllegalArgumentException(name + " (" + value + ") must be an integer ("
                    + p.name() + ")");
        }
        return value;
    }

    private static String show(Bounds b, double x) {
        if (!b.isFloat) {
            return Long.toString((long) x);
        }
        float f = (float) x;
        return f == x ? Float.toString(f) : Double.toString(x);
    }

    /** attn_desc_get_int. */
    static long getInt(long desc, attn_param p) {
        long[] v = new long[1];
        AttnNative.attn_desc_get_int(desc, p, v);
        return v[0];
    }

    /** attn_desc_get_float (exact for every parameter; the scale is the kernels' float). */
    static double getFloat(long desc, attn_param p) {
        double[] v = new double[1];
        AttnNative.attn_desc_get_float(desc, p, v);
        return v[0];
    }
}
