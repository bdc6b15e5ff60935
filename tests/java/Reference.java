package org.libattn;

/**
 * Independent float64 reference of masked scaled dot-product attention, written from attn.h's
 * contract (strides, GQA head mapping, causal rules, key_valid, allowed, fully masked rows).
 */
final class Reference {
    final int b, hq, hkv, sq, sk, d;
    final Causal causal;
    final double scale;
    /** strides[operand 0..3 = Q, K, V, OUT][batch, head, row] */
    final long[][] strides = new long[4][];

    Reference(int b, int hq, int hkv, int sq, int sk, int d, Causal causal, double scale) {
        this.b = b;
        this.hq = hq;
        this.hkv = hkv;
        this.sq = sq;
        this.sk = sk;
        this.d = d;
        this.causal = causal;
        this.scale = scale;
        for (int o = 0; o < 4; o++) {
            int h = (o == 0 || o == 3) ? hq : hkv;
            int s = (o == 0 || o == 3) ? sq : sk;
            strides[o] = new long[] {(long) h * s * d, (long) s * d, d};
        }
    }

    Reference strides(int operand, long bs, long hs, long rs) {
        strides[operand] = new long[] {bs, hs, rs};
        return this;
    }

    AttentionDesc.Builder builder() {
        AttentionDesc.Builder bl = AttentionDesc.builder().batch(b).heads(hq, hkv).seqLen(sq, sk)
                .headDim(d).causal(causal).scale((float) scale);
        Operand[] ops = {Operand.Q, Operand.K, Operand.V, Operand.OUT};
        for (int o = 0; o < 4; o++) {
            bl.strides(ops[o], strides[o][0], strides[o][1], strides[o][2]);
        }
        return bl;
    }

    int requiredLen(int operand) {
        int h = (operand == 0 || operand == 3) ? hq : hkv;
        int s = (operand == 0 || operand == 3) ? sq : sk;
        long[] st = strides[operand];
        return (int) ((b - 1) * st[0] + (h - 1) * st[1] + (s - 1) * st[2] + d);
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
    static final class Result {
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
