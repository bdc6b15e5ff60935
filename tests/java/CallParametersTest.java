package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.CallFixture.*;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The extensible call's parameters through the Java face: defaults and round trips through the
 * library, the COMPUTE mode, the default scale, and the errors naming the parameter.
 */
class CallParametersTest {
    @Test
    void parametersDefaultAndRoundTripThroughTheLibrary() {
        try (AttentionDesc d = AttentionDesc.builder().heads(4, 2).seqLen(3, 5).headDim(8).build()) {
            assertEquals(Causal.NONE, d.causal());
            assertEquals(-1, d.windowLeft());
            assertEquals(-1, d.windowRight());
            assertEquals(0.0f, d.softcap());
            assertEquals(Alibi.NONE, d.alibi());
            assertFalse(d.softmaxPlusOne());
            assertEquals(8, d.headDimV());
            assertEquals(WeightsMode.SOFTMAX, d.weightsMode());
            assertFalse(d.biasFirst());
            assertEquals(1.0f / (float) Math.sqrt(8), d.scale());
            assertEquals(-1.0, d.param(Param.WINDOW_LEFT));
            assertEquals(8.0, d.param(Param.HEAD_DIM_V));
        }
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(8)
                .causal(Causal.BOTTOM_RIGHT).scale(0.3f).window(3, 1).softcap(2.5f)
                .alibi(Alibi.STANDARD).softmaxPlusOne().headDimV(5).weightsMode(WeightsMode.CAPPED)
                .biasFirst().build()) {
            assertEquals(Causal.BOTTOM_RIGHT, d.causal());
            assertEquals(0.3f, d.scale());
            assertEquals(3, d.windowLeft());
            assertEquals(1, d.windowRight());
            assertEquals(2.5f, d.softcap());
            assertEquals(Alibi.STANDARD, d.alibi());
            assertTrue(d.softmaxPlusOne());
            assertEquals(5, d.headDimV());
            assertEquals(WeightsMode.CAPPED, d.weightsMode());
            assertTrue(d.biasFirst());
            assertEquals(2.0, d.param(Param.CAUSAL));
            assertEquals((double) 0.3f, d.param(Param.SCALE));
            assertEquals(2.5, d.param(Param.SOFTCAP));
            assertEquals(3.0, d.param(Param.WEIGHTS_MODE));
            // headDimV sizes V and OUT: [2][2][5][5] and [2][4][3][5].
            assertEquals(2 * 2 * 5 * 5, d.requiredLen(Operand.V));
            assertEquals(2 * 4 * 3 * 5, d.requiredLen(Operand.OUT));
            assertEquals(2 * 4 * 3 * 5, d.requiredLen(Operand.BIAS));
            assertEquals(4, d.requiredLen(Operand.ALIBI_SLOPES));
            assertEquals(4, d.requiredLen(Operand.SINKS));
            assertEquals(2 * 3, d.requiredLen(Operand.QUERY_VALID));
            assertEquals(2, d.requiredLen(Operand.SEQ_LENS_K));
            assertEquals(2 * 4 * 5, d.requiredLen(Operand.KEY_MASS));
            assertTrue(d.toString().contains("window=(3, 1)"), d.toString());
        }
        // The generic setter: integers and doubles, last one wins; the typed getters agree.
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(4).window(1, 1)
                .param(Param.WINDOW_LEFT, 7L).param(Param.SOFTCAP, 1.5).param(Param.SCALE, 2L)
                .param(Param.ALIBI, 2.0).param(Param.BIAS_FIRST, 1L).build()) {
            assertEquals(7, d.windowLeft());
            assertEquals(1, d.windowRight());
            assertEquals(1.5f, d.softcap());
            assertEquals(2.0f, d.scale());
            assertEquals(Alibi.STANDARD, d.alibi());
            assertTrue(d.biasFirst());
        }
        // Kinds and ranges come from attn_param_bounds.
        assertFalse(Param.WINDOW_LEFT.isFloat());
        assertEquals(-1.0, Param.WINDOW_LEFT.min());
        assertEquals(2147483647.0, Param.WINDOW_LEFT.max());
        assertTrue(Param.SCALE.isFloat());
        assertEquals(Float.MAX_VALUE, Param.SCALE.max());
        assertEquals(0.0, Param.SOFTCAP.min());
        assertEquals(WeightsMode.values().length - 1, Param.WEIGHTS_MODE.max());
        assertEquals(1.0, Param.HEAD_DIM_V.min());
    }

    /** True when this CPU has AVX512-FP16 (Linux: the avx512_fp16 flag of /proc/cpuinfo). */
    static boolean cpuHasAvx512Fp16() {
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/cpuinfo"))) {
                if (line.startsWith("flags") && Arrays.asList(line.split("\\s+")).contains("avx512_fp16")) {
                    return true;
                }
            }
        } catch (java.io.IOException e) {
            // not Linux: unknown, so the difference from EXACT is not asserted
        }
        return false;
    }

    @Test
    void computeDefaultsToExactAndRoundTrips() {
        assertEquals(14, Param.COMPUTE.code());
        assertEquals(0, Compute.EXACT.code());
        assertEquals(1, Compute.FP16.code());
        assertEquals(2, Compute.INT8.code());
        assertEquals(3, Compute.BF16.code());
        assertFalse(Param.COMPUTE.isFloat());
        assertEquals(0.0, Param.COMPUTE.min());
        assertEquals(3.0, Param.COMPUTE.max());
        assertEquals(Compute.values().length - 1, Param.COMPUTE.max());
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).build()) {
            assertEquals(Compute.EXACT, d.compute());
            assertEquals(0.0, d.param(Param.COMPUTE));
            assertFalse(d.toString().contains("compute"), d.toString());
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).compute(Compute.FP16).build()) {
            assertEquals(Compute.FP16, d.compute());
            assertEquals(1.0, d.param(Param.COMPUTE));
            assertTrue(d.toString().contains("compute=FP16"), d.toString());
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).param(Param.COMPUTE, 1L)
                .compute(Compute.EXACT).build()) {
            assertEquals(Compute.EXACT, d.compute(), "last one wins");
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).param(Param.COMPUTE, 1.0).build()) {
            assertEquals(Compute.FP16, d.compute());
        }
        for (Compute c : new Compute[] {Compute.INT8, Compute.BF16}) {
            try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).compute(c).build()) {
                assertEquals(c, d.compute());
                assertEquals((double) c.code(), d.param(Param.COMPUTE));
                assertTrue(d.toString().contains("compute=" + c.name()), d.toString());
            }
            try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).param(Param.COMPUTE, c.code())
                    .build()) {
                assertEquals(c, d.compute());
            }
        }
    }

    @Test
    void computeRefusesAnInvalidValue() {
        AttentionDesc.Builder b = AttentionDesc.builder().seqLen(4).headDim(8);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> b.param(Param.COMPUTE, 4));
        assertMentions(e.getMessage(), "ATTN_PARAM_COMPUTE", "4", "[0, 3]");
        e = assertThrows(IllegalArgumentException.class, () -> b.param(Param.COMPUTE, 4.0));
        assertMentions(e.getMessage(), "ATTN_PARAM_COMPUTE", "4", "[0, 3]");
        // The library's own check (past the Java one): its message names the parameter too.
        long[] dh = new long[1];
        AttnNative.attn_desc_create(dh, 1, 1, 1, 4, 4, 8);
        try {
            Refusal ae = Refusal.of(() -> AttnNative.attn_desc_set_int(dh[0], Param.COMPUTE, 4));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "ATTN_PARAM_COMPUTE", "4", "[0, 3]");
        } finally {
            AttnNative.attn_desc_destroy(dh[0]);
        }
        // The refused value left the builder as it was.
        try (AttentionDesc d = b.build()) {
            assertEquals(Compute.EXACT, d.compute());
        }
    }

    @Test
    void computeFp16StaysCloseToExactOnAPrefill() {
        SplittableRandom g = new SplittableRandom(1400);
        int n = 1 * 2 * 64 * 32;
        float[] q = new float[n], k = new float[n], v = new float[n];
        for (float[] a : new float[][] {q, k, v}) {
            for (int i = 0; i < n; i++) {
                a[i] = (float) (2 * g.nextDouble() - 1);
            }
        }
        float[] exact, fp16;
        AttentionDesc.Builder b = AttentionDesc.builder().batch(1).heads(2).seqLen(64, 64).headDim(32);
        try (AttentionDesc d = b.build()) {
            exact = d.forward(q, k, v, null, null);
        }
        try (AttentionDesc d = b.compute(Compute.FP16).build()) {
            fp16 = d.forward(q, k, v, null, null);
        }
        double worst = 0;
        int differ = 0;
        for (int i = 0; i < n; i++) {
            worst = Math.max(worst, Math.abs(fp16[i] - exact[i]));
            if (Float.floatToRawIntBits(fp16[i]) != Float.floatToRawIntBits(exact[i])) {
                differ++;
            }
        }
        assertTrue(worst <= 1e-2, "max |fp16 - exact| = " + worst);
        // With AVX512-FP16 (and the kernels not capped below avx512: attn_isa() "avx512", or
        // "avx512fp16" where the library names that level) the fast path runs: its rounding shows.
        if (cpuHasAvx512Fp16() && Attention.isa().startsWith("avx512")) {
            assertTrue(differ > 0, "FP16 gave EXACT's bits: the fast path did not run");
        }
    }

    @Test
    void defaultScaleIsExactlyTheLibrarysFloat() {
        // 1/sqrtf(d) in float arithmetic, as the library computes it; (float)(1/sqrt((double)d))
        // differs from it by an ulp for these (and many other) head dims.
        for (int hd : new int[] {6, 7, 17, 96}) {
            float lib = 1.0f / (float) Math.sqrt(hd);
            assertNotEquals(lib, (float) (1.0 / Math.sqrt(hd)), "head_dim " + hd);
            try (AttentionDesc d = AttentionDesc.builder().seqLen(1).headDim(hd)
                    .weightsMode(WeightsMode.SCORES).build()) {
                assertEquals(Float.floatToRawIntBits(lib), Float.floatToRawIntBits(d.scale()), "head_dim " + hd);
                assertEquals((double) lib, d.param(Param.SCALE));
                // The kernels multiply by this very float: q = k = e0 gives the score scale * 1.
                float[] e0 = new float[hd];
                e0[0] = 1;
                float[] w = d.weights(e0, e0, null, null);
                assertEquals(Float.floatToRawIntBits(d.scale()), Float.floatToRawIntBits(w[0]), "head_dim " + hd);
            }
        }
        for (int hd = 1; hd <= 1024; hd++) {
            try (AttentionDesc d = AttentionDesc.builder().seqLen(1).headDim(hd).build()) {
                assertEquals(1.0f / (float) Math.sqrt(hd), d.scale(), "head_dim " + hd);
            }
        }
    }

    @Test
    void parameterErrorsNameTheParameter() {
        AttentionDesc.Builder b = AttentionDesc.builder();
        Object[][] cases = {
            // The library's messages (it checks each value as the builder sets it).
            {(Runnable) () -> b.window(-2, 0), "ATTN_PARAM_WINDOW_LEFT", "-2"},
            {(Runnable) () -> b.window(0, -5), "ATTN_PARAM_WINDOW_RIGHT", "-5"},
            {(Runnable) () -> b.softcap(-1f), "ATTN_PARAM_SOFTCAP", "-1"},
            {(Runnable) () -> b.softcap(Float.NaN), "ATTN_PARAM_SOFTCAP", "NaN"},
            {(Runnable) () -> b.softcap(Float.POSITIVE_INFINITY), "ATTN_PARAM_SOFTCAP", "outside"},
            {(Runnable) () -> b.headDimV(0), "ATTN_PARAM_HEAD_DIM_V", "0"},
            {(Runnable) () -> b.scale(Float.NEGATIVE_INFINITY), "ATTN_PARAM_SCALE", "outside"},
            {(Runnable) () -> b.param(Param.CAUSAL, 3), "ATTN_PARAM_CAUSAL", "3"},
            {(Runnable) () -> b.param(Param.ALIBI, 3), "ATTN_PARAM_ALIBI", "3"},
            {(Runnable) () -> b.param(Param.SOFTMAX_PLUS_ONE, 2), "ATTN_PARAM_SOFTMAX_PLUS_ONE", "2"},
            {(Runnable) () -> b.param(Param.WEIGHTS_MODE, WeightsMode.values().length), "ATTN_PARAM_WEIGHTS_MODE"},
            {(Runnable) () -> b.param(Param.BIAS_FIRST, -1), "ATTN_PARAM_BIAS_FIRST", "-1"},
            {(Runnable) () -> b.param(Param.HEAD_DIM_V, 1L << 31), "ATTN_PARAM_HEAD_DIM_V", "2147483648"},
            {(Runnable) () -> b.param(Param.WINDOW_LEFT, 1.5), "ATTN_PARAM_WINDOW_LEFT", "integer"},
            {(Runnable) () -> b.param(Param.SCALE, 1e39), "ATTN_PARAM_SCALE", "outside"},
            {(Runnable) () -> b.param(Param.SOFTCAP, Double.NaN), "ATTN_PARAM_SOFTCAP", "NaN"},
            // Raw integers for enums: no truncation to 32 bits (2^32 is not 0).
            {(Runnable) () -> Causal.fromCode(1L << 32), "causal", "4294967296"},
            {(Runnable) () -> Causal.fromCode(-1), "causal", "-1"},
            {(Runnable) () -> Alibi.fromCode(3), "alibi", "3"},
            {(Runnable) () -> WeightsMode.fromCode(-1), "weightsMode", "-1"},
            {(Runnable) () -> Op.fromCode(3), "op", "3"},
            {(Runnable) () -> Operand.fromCode(255), "operand", "255"},
            {(Runnable) () -> Operand.fromCode((1L << 32) + 1), "operand", "4294967297"},
            {(Runnable) () -> Compute.fromCode(4), "compute", "4"},
            {(Runnable) () -> Param.fromCode(17), "param", "17"},
        };
        for (Object[] c : cases) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, ((Runnable) c[0])::run,
                    String.valueOf(c[1]));
            String[] words = new String[c.length - 1];
            for (int i = 1; i < c.length; i++) {
                words[i - 1] = (String) c[i];
            }
            assertMentions(e.getMessage(), words);
        }
        assertThrows(NullPointerException.class, () -> b.alibi(null));
        assertThrows(NullPointerException.class, () -> b.weightsMode(null));
        assertThrows(NullPointerException.class, () -> b.compute(null));
        assertThrows(NullPointerException.class, () -> b.param(null, 1L));
        // A refused value leaves the builder as it was.
        try (AttentionDesc d = b.seqLen(2).headDim(2).build()) {
            assertEquals(-1, d.windowLeft());
            assertEquals(-1, d.windowRight());
            assertEquals(2, d.headDimV());
        }
        // What only the library can judge: strides of an operand without strides, OUT strides
        // that do not nest rows of head_dim_v.
        Refusal e = Refusal.of(() -> AttentionDesc.builder().seqLen(2).headDim(2).strides(Operand.SINKS, 1, 1, 1).build());
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertMentions(e.libraryMessage(), "which");
        e = Refusal.of(() -> AttentionDesc.builder().seqLen(3).headDim(4)
                .headDimV(8).strides(Operand.OUT, 24, 24, 4).build());
        assertMentions(e.libraryMessage(), "out");
        try (AttentionDesc d = AttentionDesc.builder().batch(2).seqLen(3, 4).headDim(4)
                .strides(Operand.BIAS, 0, 0, 0).build()) {
            assertEquals(4, d.requiredLen(Operand.BIAS));
        }
    }
}
