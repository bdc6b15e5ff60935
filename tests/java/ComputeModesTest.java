package org.libattn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The fast compute modes through the builder: a prefill call (GQA 4/2, 64 queries, 96 keys,
 * head_dim 64, bottom-right causal, gaussian inputs) in INT8 against a float64 reference, per
 * (batch, head): cosine >= 0.9995 and relative L1 <= 0.01; INT8's bits differ from EXACT's (the
 * integer path ran); BF16 gives EXACT's bits (no CPU this version supports has a bf16 path).
 */
class ComputeModesTest {
    static final int B = 1, HQ = 4, HKV = 2, SQ = 64, SK = 96, D = 64;

    static float[] gaussian(Random g, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) g.nextGaussian();
        }
        return a;
    }

    final Random g = new Random(3302);
    final float[] q = gaussian(g, B * HQ * SQ * D), k = gaussian(g, B * HKV * SK * D),
            v = gaussian(g, B * HKV * SK * D);

    float[] forward(Compute mode) {
        try (AttentionDesc d = AttentionDesc.builder().batch(B).heads(HQ, HKV).seqLen(SQ, SK).headDim(D)
                .causal(Causal.BOTTOM_RIGHT).compute(mode).build()) {
            return d.forward(q, k, v, null, null);
        }
    }

    /** Row i of head h of the float64 reference: query i sees keys 0 .. i + SK - SQ. */
    double[] reference(int b, int h, int i) {
        int hk = h / (HQ / HKV), keys = i + SK - SQ + 1;
        double[] qi = new double[D];
        double[][] kj = new double[keys][D], vj = new double[keys][D];
        for (int e = 0; e < D; e++) {
            qi[e] = q[((b * HQ + h) * SQ + i) * D + e];
        }
        for (int j = 0; j < keys; j++) {
            for (int e = 0; e < D; e++) {
                kj[j][e] = k[((b * HKV + hk) * SK + j) * D + e];
                vj[j][e] = v[((b * HKV + hk) * SK + j) * D + e];
            }
        }
        return StorageTest.attend64(qi, kj, vj, 1 / Math.sqrt(D));
    }

    @Test
    void int8PrefillWithinBoundOfFloat64Reference() {
        float[] got = forward(Compute.INT8);
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < HQ; h++) {
                double dot = 0, nGot = 0, nRef = 0, l1 = 0, l1Ref = 0;
                for (int i = 0; i < SQ; i++) {
                    double[] ref = reference(b, h, i);
                    for (int e = 0; e < D; e++) {
                        double o = got[((b * HQ + h) * SQ + i) * D + e], r = ref[e];
                        dot += o * r;
                        nGot += o * o;
                        nRef += r * r;
                        l1 += Math.abs(o - r);
                        l1Ref += Math.abs(r);
                    }
                }
                double cosine = dot / Math.sqrt(nGot * nRef), relL1 = l1 / l1Ref;
                assertTrue(cosine >= 0.9995, "batch " + b + " head " + h + ": cosine " + cosine);
                assertTrue(relL1 <= 0.01, "batch " + b + " head " + h + ": relative L1 " + relL1);
            }
        }
    }

    @Test
    void int8PrefillTakesTheIntegerPath() {
        // The integer Q.K^T has a kernel on every CPU (on x86 pmaddwd, from SSE2 up): its
        // rounding shows in the output.
        float[] int8 = forward(Compute.INT8), exact = forward(Compute.EXACT);
        int differ = 0;
        for (int i = 0; i < exact.length; i++) {
            if (Float.floatToRawIntBits(int8[i]) != Float.floatToRawIntBits(exact[i])) {
                differ++;
            }
        }
        assertTrue(differ > 0, "INT8 gave EXACT's bits: the integer path did not run");
    }

    @Test
    void bf16PrefillIsExactWithoutABf16Unit() {
        float[] bf16 = forward(Compute.BF16), exact = forward(Compute.EXACT);
        int[] a = new int[exact.length], e = new int[exact.length];
        for (int i = 0; i < exact.length; i++) {
            a[i] = Float.floatToRawIntBits(bf16[i]);
            e[i] = Float.floatToRawIntBits(exact[i]);
        }
        assertArrayEquals(e, a, "BF16 differs from EXACT");
    }
}
