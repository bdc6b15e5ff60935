package org.libattn;

/**
 * Independent float64 reference of masked scaled dot-product attention, written from attn.h's
 * contract (strides, GQA head mapping, causal rules, key_valid, allowed, fully masked rows) and,
 * for the extensible call (0.2), its score pipeline: sliding window, softcap (before or after
 * the bias), bias, ALiBi (operand or standard slopes), sinks and the "+1" softmax, query
 * padding, per-batch key lengths, head_dim_v, key mass and the score stages of the weights
 * modes.
 */
final class Reference {
    final int b, hq, hkv, sq, sk, d;
    final Causal causal;
    final double scale;
    /** strides[operand 0..4 = Q, K, V, OUT, BIAS][batch, head, row] */
    final long[][] strides = new long[5][];
    // 0.2 parameters (defaults as attn.h).
    int dv;
    int windowLeft = -1;
    int windowRight = -1;
    double softcap;
    Alibi alibi = Alibi.NONE;
    boolean plusOne;
    boolean biasFirst;
    WeightsMode weightsMode = WeightsMode.SOFTMAX;

    Reference(int b, int hq, int hkv, int sq, int sk, int d, Causal causal, double scale) {
        this.b = b;
        this.hq = hq;
        this.hkv = hkv;
        this.sq = sq;
        this.sk = sk;
        this.d = d;
        this.causal = causal;
        this.scale = scale;
        this.dv = d;
        for (int o = 0; o < 4; o++) {
            defaultStrides(o);
        }
        strides[4] = new long[] {(long) hq * sq * sk, (long) sq * sk, sk};
    }

    private void defaultStrides(int o) {
        int h = (o == 0 || o == 3) ? hq : hkv;
        int s = (o == 0 || o == 3) ? sq : sk;
        int dim = dim(o);
        strides[o] = new long[] {(long) h * s * dim, (long) s * dim, dim};
    }

    /** Row length of operand 0..4: head_dim for Q and K, head_dim_v for V and OUT, seq_k for BIAS. */
    int dim(int operand) {
        return operand == 4 ? sk : (operand == 2 || operand == 3) ? dv : d;
    }

    Reference strides(int operand, long bs, long hs, long rs) {
        strides[operand] = new long[] {bs, hs, rs};
        return this;
    }

    Reference window(int left, int right) {
        windowLeft = left;
        windowRight = right;
        return this;
    }

    Reference softcap(double c) {
        softcap = c;
        return this;
    }

    Reference alibi(Alibi a) {
        alibi = a;
        return this;
    }

    Reference plusOne() {
        plusOne = true;
        return this;
    }

    Reference biasFirst() {
        biasFirst = true;
        return this;
    }

    Reference weightsMode(WeightsMode m) {
        weightsMode = m;
        return this;
    }

    /** head_dim_v; V and OUT get contiguous strides again (set custom ones afterwards). */
    Reference headDimV(int n) {
        dv = n;
        defaultStrides(2);
        defaultStrides(3);
        return this;
    }

    /** A builder for exactly this problem (every parameter and stride set explicitly). */
    AttentionDesc.Builder builder() {
        AttentionDesc.Builder bl = AttentionDesc.builder().batch(b).heads(hq, hkv).seqLen(sq, sk)
                .headDim(d).causal(causal).scale((float) scale);
        if (windowLeft != -1 || windowRight != -1) {
            bl.window(windowLeft, windowRight);
        }
        if (softcap != 0) {
            bl.softcap((float) softcap);
        }
        if (alibi != Alibi.NONE) {
            bl.alibi(alibi);
        }
        if (plusOne) {
            bl.softmaxPlusOne();
        }
        if (dv != d) {
            bl.headDimV(dv);
        }
        if (biasFirst) {
            bl.biasFirst();
        }
        if (weightsMode != WeightsMode.SOFTMAX) {
            bl.weightsMode(weightsMode);
        }
        Operand[] ops = {Operand.Q, Operand.K, Operand.V, Operand.OUT, Operand.BIAS};
        for (int o = 0; o < 5; o++) {
            bl.strides(ops[o], strides[o][0], strides[o][1], strides[o][2]);
        }
        return bl;
    }

    int requiredLen(int operand) {
        int h = (operand == 0 || operand == 3 || operand == 4) ? hq : hkv;
        int s = (operand == 0 || operand == 3 || operand == 4) ? sq : sk;
        long[] st = strides[operand];
        return (int) ((b - 1) * st[0] + (h - 1) * st[1] + (s - 1) * st[2] + dim(operand));
    }

    int at(int operand, int bi, int h, int s) {
        long[] st = strides[operand];
        return (int) (bi * st[0] + h * st[1] + s * st[2]);
    }

    boolean visible(int bi, int i, int j, boolean[] keyValid, boolean[] allowed) {
        if (causal == Causal.TOP_LEFT && j > i) {
            return false;
        }
        if (causal == Causal.BOTTOM_RIGHT && j > i + (sk - sq)) {
            return false;
        }
        if (keyValid != null && !keyValid[bi * sk + j]) {
            return false;
        }
        return allowed == null || allowed[i * sk + j];
    }

    /** Results: out (OUT layout, unaddressed elements 0), lse [b][hq][sq], weights [b][hq][sq][sk]. */
    static class Result {
        double[] out;
        double[] lse;
        double[] weights;
    }

    Result run(float[] q, float[] k, float[] v, boolean[] keyValid, boolean[] allowed) {
        Result r = new Result();
        r.out = new double[requiredLen(3)];
        r.lse = new double[b * hq * sq];
        r.weights = new double[b * hq * sq * sk];
        int group = hq / hkv;
        double[] s = new double[sk];
        for (int bi = 0; bi < b; bi++) {
            for (int h = 0; h < hq; h++) {
                int kh = h / group;
                for (int i = 0; i < sq; i++) {
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j < sk; j++) {
                        if (!visible(bi, i, j, keyValid, allowed)) {
                            s[j] = Double.NEGATIVE_INFINITY;
                            continue;
                        }
                        double dot = 0;
                        int qo = at(0, bi, h, i), ko = at(1, bi, kh, j);
                        for (int x = 0; x < d; x++) {
                            dot += (double) q[qo + x] * k[ko + x];
                        }
                        s[j] = dot * scale;
                        max = Math.max(max, s[j]);
                    }
                    int row = (bi * hq + h) * sq + i;
                    if (max == Double.NEGATIVE_INFINITY) {
                        r.lse[row] = Double.NEGATIVE_INFINITY;
                        continue; // weights and out stay 0
                    }
                    double sum = 0;
                    for (int j = 0; j < sk; j++) {
                        s[j] = s[j] == Double.NEGATIVE_INFINITY ? 0 : Math.exp(s[j] - max);
                        sum += s[j];
                    }
                    r.lse[row] = max + Math.log(sum);
                    int oo = at(3, bi, h, i);
                    for (int j = 0; j < sk; j++) {
                        double w = s[j] / sum;
                        r.weights[row * sk + j] = w;
                        if (w != 0) {
                            int vo = at(2, bi, kh, j);
                            for (int x = 0; x < d; x++) {
                                r.out[oo + x] += w * v[vo + x];
                            }
                        }
                    }
                }
            }
        }
        return r;
    }

    // ------------------------------------------------------------------ 0.2: attn_run

    /** The operands of one attn_run (null = not bound). */
    static final class Inputs {
        float[] q, k, v, bias, alibiSlopes, sinks;
        boolean[] keyValid, allowed, queryValid;
        int[] seqLensK;
    }

    /** Results of {@link #run(Inputs)}; keyMass [b][hq][sk]. */
    static final class Result2 extends Result {
        double[] keyMass;
        /** The score of every (row, key) at each weights mode (index = WeightsMode.ordinal()). */
        double[][] stages;
    }

    /**
     * The standard ALiBi slopes of n heads (Press et al. 2022, BLOOM's rule): for the largest
     * power of two m &lt;= n, 2^(-8 (h + 1) / m) for h &lt; m, then 2^(-8 (2x + 1) / (2m)).
     */
    static double[] standardSlopes(int n) {
        int m = 1;
        while (m * 2 <= n) {
            m *= 2;
        }
        double[] s = new double[n];
        for (int h = 0; h < m; h++) {
            s[h] = Math.pow(2, -8.0 * (h + 1) / m);
        }
        for (int x = 0; x < n - m; x++) {
            s[m + x] = Math.pow(2, -8.0 * (2 * x + 1) / (2 * m));
        }
        return s;
    }

    int keyLen(int bi, int[] seqLensK) {
        return seqLensK == null ? sk : seqLensK[bi];
    }

    long diag(int bi, int i, int[] seqLensK) {
        return causal == Causal.BOTTOM_RIGHT ? (long) i + keyLen(bi, seqLensK) - sq : i;
    }

    /** The causal rule and the window (masks aside). */
    boolean inRange(int bi, int i, int j, int[] seqLensK) {
        long dg = diag(bi, i, seqLensK);
        if (causal != Causal.NONE && j > dg) {
            return false;
        }
        if (windowLeft >= 0 && j < dg - windowLeft) {
            return false;
        }
        return windowRight < 0 || j <= dg + windowRight;
    }

    private double cap(double s) {
        return softcap * Math.tanh(s / softcap);
    }

    /** attn_run's forward and weights for every operand, in float64 (attn.h's pipeline). */
    Result2 run(Inputs in) {
        Result2 r = new Result2();
        r.out = new double[requiredLen(3)];
        r.lse = new double[b * hq * sq];
        r.weights = new double[b * hq * sq * sk];
        r.keyMass = new double[b * hq * sk];
        r.stages = new double[WeightsMode.values().length][b * hq * sq * sk];
        double[] slopes = alibi == Alibi.OPERAND ? widen(in.alibiSlopes)
                : alibi == Alibi.STANDARD ? standardSlopes(hq) : null;
        int group = hq / hkv;
        double[] s = new double[sk];
        boolean[] vis = new boolean[sk];
        for (int bi = 0; bi < b; bi++) {
            int len = keyLen(bi, in.seqLensK);
            for (int h = 0; h < hq; h++) {
                int kh = h / group;
                Double sink = in.sinks != null ? Double.valueOf(in.sinks[h]) : plusOne ? 0.0 : null;
                for (int i = 0; i < sq; i++) {
                    int row = (bi * hq + h) * sq + i;
                    long dg = diag(bi, i, in.seqLensK);
                    boolean rowValid = in.queryValid == null || in.queryValid[bi * sq + i];
                    double max = Double.NEGATIVE_INFINITY;
                    boolean any = false;
                    for (int j = 0; j < sk; j++) {
                        vis[j] = false;
                        boolean pad = j >= len || (in.keyValid != null && !in.keyValid[bi * sk + j]);
                        boolean hidden = pad || !inRange(bi, i, j, in.seqLensK)
                                || (in.allowed != null && !in.allowed[i * sk + j]);
                        int w = row * sk + j;
                        for (double[] st : r.stages) {
                            st[w] = Double.NEGATIVE_INFINITY;
                        }
                        if (pad) {
                            continue; // never read
                        }
                        double dot = 0;
                        int qo = at(0, bi, h, i), ko = at(1, bi, kh, j);
                        for (int x = 0; x < d; x++) {
                            dot += (double) in.q[qo + x] * in.k[ko + x];
                        }
                        double raw = dot * scale;
                        double bias = in.bias == null ? 0 : in.bias[at(4, bi, h, i) + j];
                        double alibiTerm = slopes == null ? 0 : -slopes[h] * (dg - j);
                        double masked = raw + bias + alibiTerm;
                        // A -inf bias hides its key in both orders (cap(-inf) stays -inf).
                        double biased = raw + bias;
                        double capped = softcap > 0
                                ? (biasFirst ? (biased == Double.NEGATIVE_INFINITY ? biased : cap(biased))
                                        : cap(raw) + bias) + alibiTerm
                                : masked;
                        r.stages[WeightsMode.SCORES.ordinal()][w] = raw;
                        r.stages[WeightsMode.SOFTCAPPED.ordinal()][w] = softcap > 0 ? cap(raw) : raw;
                        if (!hidden) {
                            r.stages[WeightsMode.MASKED.ordinal()][w] = masked;
                            r.stages[WeightsMode.CAPPED.ordinal()][w] = capped;
                        }
                        if (hidden || !rowValid || capped == Double.NEGATIVE_INFINITY) {
                            continue;
                        }
                        vis[j] = true;
                        s[j] = capped;
                        any = true;
                        max = Math.max(max, capped);
                    }
                    if (!any) {
                        r.lse[row] = Double.NEGATIVE_INFINITY; // out, weights and mass stay 0
                        continue;
                    }
                    if (sink != null) {
                        max = Math.max(max, sink);
                    }
                    double sum = sink != null ? Math.exp(sink - max) : 0;
                    for (int j = 0; j < sk; j++) {
                        if (vis[j]) {
                            s[j] = Math.exp(s[j] - max);
                            sum += s[j];
                        }
                    }
                    r.lse[row] = max + Math.log(sum);
                    int oo = at(3, bi, h, i);
                    for (int j = 0; j < sk; j++) {
                        if (!vis[j]) {
                            continue;
                        }
                        double w = s[j] / sum;
                        r.weights[row * sk + j] = w;
                        r.keyMass[(bi * hq + h) * sk + j] += w;
                        int vo = at(2, bi, kh, j);
                        for (int x = 0; x < dv; x++) {
                            r.out[oo + x] += w * in.v[vo + x];
                        }
                    }
                }
            }
        }
        r.stages[WeightsMode.SOFTMAX.ordinal()] = r.weights;
        return r;
    }

    static double[] widen(float[] a) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) {
            d[i] = a[i];
        }
        return d;
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
}
