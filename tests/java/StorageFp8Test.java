package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.util.function.IntBinaryOperator;
import org.junit.jupiter.api.Test;

/**
 * fp8 K / V caches through the Java face: the converters against the formats' definitions, a
 * paged cache filled by kvAppendArgs and a decode step over it against float64, and the errors.
 * The references are float64, written plainly here.
 */
class StorageFp8Test {
    /** The value of a finite code: E4M3 (bias 7, 3 mantissa bits) or E5M2 (bias 15, 2 bits). */
    static double fp8Value(Dtype format, int code) {
        boolean e4 = format == Dtype.FP8_E4M3;
        int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
        int e = (code & 0x7f) >> mbits, m = code & ((1 << mbits) - 1);
        double mag = e == 0 ? Math.scalb((double) m, 1 - bias - mbits)
                : Math.scalb((double) ((1 << mbits) + m), e - bias - mbits);
        return (code & 0x80) != 0 ? -mag : mag;
    }

    /** The code nearest to x (within the finite range), ties to the even code, by search. */
    static byte fp8Nearest(Dtype format, float x) {
        int top = format == Dtype.FP8_E4M3 ? 0x7e : 0x7b;
        double a = Math.abs((double) x);
        int best = 0;
        for (int c = 1; c <= top; c++) {
            double dc = Math.abs(fp8Value(format, c) - a), db = Math.abs(fp8Value(format, best) - a);
            if (dc < db || (dc == db && (c & 1) == 0)) {
                best = c;
            }
        }
        return (byte) (x < 0 && best != 0 ? best | 0x80 : best);
    }

    @Test
    void convertersMatchTheFormatsDefinitions() {
        java.util.Random g = new java.util.Random(8);
        for (Dtype f : new Dtype[] {Dtype.FP8_E4M3, Dtype.FP8_E5M2}) {
            float scale = f == Dtype.FP8_E4M3 ? 0.01f : 1f;
            float[] src = new float[60];
            for (int i = 0; i < src.length; i++) {
                src[i] = 6 * g.nextFloat() - 3;
            }
            byte[] codes = Convert.quantizeFp8(src, f, scale);
            float[] back = Convert.dequantizeFp8(codes, f, scale);
            for (int i = 0; i < src.length; i++) {
                assertEquals(fp8Nearest(f, src[i] / scale), codes[i], f + " code of " + src[i]);
                assertEquals((float) (fp8Value(f, codes[i] & 0xff) * scale), back[i], 0f, f + " value");
            }
            // the range and buffer forms write the same codes
            byte[] part = new byte[src.length + 4];
            Convert.quantizeFp8(src, 0, 3, 20, f, scale, part, 4);
            assertEquals(codes[59], part[63]);
            ByteBuffer direct = ByteBuffer.allocateDirect(src.length);
            java.nio.FloatBuffer fsrc = StorageTest.directFloats(src.length).put(src);
            fsrc.flip();
            Convert.quantizeFp8(fsrc, 3, 20, f, scale, direct);
            assertEquals(codes[17], direct.get(17));
        }
    }

    /**
     * A paged fp8 cache (token-major pages, reversed block table) filled by kvAppendArgs from
     * float rows, then decoded: the new rows hold the nearest codes of x / scale, and attention
     * over the cache matches float64 over its decoded values. E4M3 with one scale per tensor
     * (strides 0, 0, 0), E5M2 with none.
     */
    @Test
    void pagedFp8CacheFilledByKvAppendArgsThenDecoded() {
        for (Dtype f : new Dtype[] {Dtype.FP8_E4M3, Dtype.FP8_E5M2}) {
            final float ks = f == Dtype.FP8_E4M3 ? 0.0078125f : 1f, vs = f == Dtype.FP8_E4M3 ? 0.01f : 1f;
            final int b = 2, hq = 4, hkv = 2, d = 16, page = 4, maxPages = 3, numPages = 6;
            int[] lens = {6, 9};
            int[] table = {4, 3, -1, 2, 1, 0};
            IntBinaryOperator slot = (bb, j) -> table[bb * maxPages + j / page] * page + j % page;
            java.util.Random g = new java.util.Random(34);
            int rows = numPages * page * hkv;
            byte[] kc = new byte[rows * d], vc = new byte[rows * d];
            for (int bb = 0; bb < b; bb++) {
                for (int j = 0; j < lens[bb] - 1; j++) {
                    for (int h = 0; h < hkv; h++) {
                        int r = slot.applyAsInt(bb, j) * hkv + h;
                        for (int e = 0; e < d; e++) {
                            kc[r * d + e] = fp8Nearest(f, (4 * g.nextFloat() - 2) / ks);
                            vc[r * d + e] = fp8Nearest(f, (4 * g.nextFloat() - 2) / vs);
                        }
                    }
                }
            }
            float[] newK = new float[b * hkv * d], newV = new float[b * hkv * d], q = new float[b * hq * d];
            for (int e = 0; e < newK.length; e++) {
                newK[e] = 4 * g.nextFloat() - 2;
                newV[e] = 4 * g.nextFloat() - 2;
            }
            for (int e = 0; e < q.length; e++) {
                q[e] = 2 * g.nextFloat() - 1;
            }
            float[] out = new float[b * hq * d];
            AttentionDesc.Builder builder = AttentionDesc.builder().batch(b).heads(hq, hkv)
                    .seqLen(1, maxPages * page).headDim(d).pageSize(page).causal(Causal.BOTTOM_RIGHT);
            if (ks != 1f) {
                builder.strides(Operand.K_SCALE, 0, 0, 0).strides(Operand.V_SCALE, 0, 0, 0);
            }
            try (AttentionDesc desc = builder.build(); AttentionArgs a = desc.args()) {
                a.setFp8(Operand.K, f, kc).setFp8(Operand.V, f, vc).set(Operand.NEW_K, newK)
                        .set(Operand.NEW_V, newV).seqLensK(lens).blockTable(table);
                if (ks != 1f) {
                    a.set(Operand.K_SCALE, new float[] {ks}).set(Operand.V_SCALE, new float[] {vs});
                }
                assertEquals(f == Dtype.FP8_E4M3 ? StorageType.FP8_E4M3 : StorageType.FP8_E5M2,
                        a.storage(Operand.K));
                a.kvAppendArgs();
                for (int bb = 0; bb < b; bb++) {
                    for (int h = 0; h < hkv; h++) {
                        int r = slot.applyAsInt(bb, lens[bb] - 1) * hkv + h;
                        for (int e = 0; e < d; e++) {
                            int i = (bb * hkv + h) * d + e;
                            assertEquals(fp8Nearest(f, newK[i] / ks), kc[r * d + e], f + " k row " + r);
                            assertEquals(fp8Nearest(f, newV[i] / vs), vc[r * d + e], f + " v row " + r);
                        }
                    }
                }
                a.set(Operand.Q, q).set(Operand.OUT, out).run(Op.FORWARD);
            }
            StorageTest.checkPagedDecode(f.toString(), out, q, lens, hq, hkv, d, slot, (isV, r, e) -> isV
                    ? (float) (fp8Value(f, vc[r * d + e] & 0xff) * vs)
                    : (float) (fp8Value(f, kc[r * d + e] & 0xff) * ks));
        }
    }

    @Test
    void fp8ErrorsNameTheArgument() {
        try (AttentionDesc desc = AttentionDesc.builder().batch(1).heads(1, 1).seqLen(1, 4).headDim(8)
                .build(); AttentionArgs a = desc.args()) {
            Refusal r = Refusal.of(() -> a.setFp8(Operand.K, Dtype.I8, new byte[32]));
            assertEquals(Status.INVALID_ARGUMENT, r.status());
            StorageTest.assertMentions(r.libraryMessage(), "fmt (3) is not an fp8 format");
            r = Refusal.of(() -> a.setFp8(Operand.Q, Dtype.FP8_E4M3, new byte[32]));
            assertEquals(Status.INVALID_ARGUMENT, r.status());
            a.setFp8(Operand.K, Dtype.FP8_E4M3, new byte[31]).setFp8(Operand.V, Dtype.FP8_E4M3, new byte[32])
                    .set(Operand.Q, new float[8]).set(Operand.OUT, new float[8]);
            r = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, r.status());
            StorageTest.assertMentions(r.libraryMessage(), "k has 31");
        }
        float[] src = new float[16];
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Convert.quantizeFp8(src, 0, 2, 8, Dtype.FP8_E4M3, 1f, new byte[15], 0));
        StorageTest.assertMentions(e.getMessage(), "dst has 15 elements");
        Refusal r = Refusal.of(() -> Convert.quantizeFp8(src, Dtype.FP8_E5M2, 0f));
        StorageTest.assertMentions(r.libraryMessage(), "scale (0)");
        r = Refusal.of(() -> Convert.quantizeFp8(src, Dtype.F16, 1f));
        StorageTest.assertMentions(r.libraryMessage(), "fmt (1) is not an fp8 format");
        src[9] = Float.NaN;
        r = Refusal.of(() -> Convert.quantizeFp8(src, 0, 2, 8, Dtype.FP8_E4M3, 1f, new byte[16], 0));
        StorageTest.assertMentions(r.libraryMessage(), "row 1");
        assertThrows(NullPointerException.class, () -> Convert.dequantizeFp8(new byte[4], null, 1f));
    }
}
