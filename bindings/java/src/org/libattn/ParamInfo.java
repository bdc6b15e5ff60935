package org.libattn;

/**
 * The facts of one {@link Param} from the library's parameter table (attn_param_info): its
 * name, whether it is a float, its bounds and its value in a new descriptor. From
 * {@link Param#info()} or, for a raw code, {@link Attention#paramInfo(int)}. Immutable.
 */
public final class ParamInfo {
    private final Param param;
    private final String name;
    private final boolean isFloat;
    private final double min, max, defaultValue;

    private ParamInfo(Param param, String name, boolean isFloat, double min, double max,
            double defaultValue) {
        this.param = param;
        this.name = name;
        this.isFloat = isFloat;
        this.min = min;
        this.max = max;
        this.defaultValue = defaultValue;
    }

    /** attn_param_info of code; an unknown code throws the library's IllegalArgumentException. */
    static ParamInfo of(int code) {
        String[] name = new String[1];
        int[] isFloat = new int[1];
        double[] min = new double[1], max = new double[1], def = new double[1];
        AttnNativeJNI.attn_param_info(code, name, isFloat, min, max, def);
        return new ParamInfo(Param.fromCode(code), name[0], isFloat[0] != 0, min[0], max[0], def[0]);
    }

    /** The parameter. */
    public Param param() {
        return param;
    }

    /** Its name in the library's messages: lowercase, without the prefix ("causal"). */
    public String name() {
        return name;
    }

    /** True for a float parameter (set with attn_desc_set_float), false for an int one. */
    public boolean isFloat() {
        return isFloat;
    }

    /** The smallest accepted value. */
    public double min() {
        return min;
    }

    /** The largest accepted value. */
    public double max() {
        return max;
    }

    /**
     * The value in a new descriptor; NaN where the default follows the shape (SCALE:
     * 1/sqrt(head_dim); HEAD_DIM_V: head_dim).
     */
    public double defaultValue() {
        return defaultValue;
    }

    /** "name: int in [min, max], default d". */
    @Override
    public String toString() {
        return name + ": " + (isFloat ? "float" : "int") + " in [" + min + ", " + max
                + "], default " + defaultValue;
    }
}
