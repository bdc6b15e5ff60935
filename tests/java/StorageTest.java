package org.libattn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import org.junit.jupiter.api.Test;

/**
 * The storage types (16-bit and int8 Q/K/V, {@link Convert}) and the backward (Op.BACKWARD and
 * the gradient operands) through the Java face: conversions and their rounding, the binding
 * rules and their errors, exact mode (a stored operand gives the fp32 result over its widened
 * values), zero copy, and the backward's rules. The shared vectors (storage.txt, backward.txt)
 * run in {@link VariantsTest}.
 */
class StorageTest {
    static void assertMentions(String message, String... words) {
        AttentionTest.assertMentions(message, words);
    }

    static short bits(int b) {
        return (short) b;
    }

    static ShortBuffer directShorts(int n) {
        return ByteBuffer.allocateDirect(2 * n).order(ByteOrder.nativeOrder()).asShortBuffer();
    }

    static FloatBuffer directFloats(int n) {
        return ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder()).asFloatBuffer();
    }

    /** batch 2, heads 4 / 2, seq 3 / 5, head_dim 4: q 96, k / v 80, k_scale 20 elements. */
    static AttentionDesc small() {
        return AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(4).build();
    }

    // ------------------------------------------------------------------ conversions

    @Test
    void f16RoundsToNearestEvenAndWidensExactly() {
        float tieDown = 1f + 0x1p-11f;     // halfway between 1 and 1 + 2^-10: even is 1.0
        float tieUp = 1f + 3 * 0x1p-11f;   // halfway between 1 + 2^-10 and 1 + 2^-9: even is 1 + 2^-9
        float[] src = {1f, tieDown, tieUp, -2.5f, 65504f, 70000f, Float.NaN, 0x1p-24f, 0f, -0f,
            Float.NEGATIVE_INFINITY};
        short[] h = Convert.toF16(src);
        short[] want = {bits(0x3C00), bits(0x3C00), bits(0x3C02), bits(0xC100), bits(0x7BFF),
            bits(0x7C00), h[6], bits(0x0001), bits(0x0000), bits(0x8000), bits(0xFC00)};
        assertArrayEquals(want, h);
        assertEquals(0x7C00, h[6] & 0x7C00, "NaN keeps an all-ones exponent");
        assertTrue((h[6] & 0x03FF) != 0, "NaN stays NaN");
        float[] back = Convert.fromF16(h);
        assertArrayEquals(new float[] {1f, 1f, 1f + 0x1p-9f, -2.5f, 65504f, Float.POSITIVE_INFINITY,
            Float.NaN, 0x1p-24f, 0f, -0f, Float.NEGATIVE_INFINITY}, back);
        assertEquals(Float.floatToRawIntBits(-0f), Float.floatToRawIntBits(back[9]));
    }

    @Test
    void bf16RoundsToNearestEvenAndWidensExactly() {
        float tieDown = 1f + 0x1p-8f;     // bf16 has 7 mantissa bits: halfway, even is 1.0
        float tieUp = 1f + 3 * 0x1p-8f;   // even is 1 + 2^-6
        float[] src = {1f, tieDown, tieUp, -2.5f, Float.MAX_VALUE, 0x1p-133f, 0f};
        short[] b = Convert.toBf16(src);
        assertArrayEquals(new short[] {bits(0x3F80), bits(0x3F80), bits(0x3F82), bits(0xC020),
            bits(0x7F80), bits(0x0001), 0}, b);
        assertArrayEquals(new float[] {1f, 1f, 1f + 0x1p-6f, -2.5f, Float.POSITIVE_INFINITY,
            0x1p-133f, 0f}, Convert.fromBf16(b));
        short[] nan = Convert.toBf16(new float[] {Float.NaN});
        assertTrue(Float.isNaN(Convert.fromBf16(nan)[0]), "NaN stays NaN");
    }

    @Test
    void conversionsIntoRangesAndBuffers() {
        float[] src = {9f, 1f, 2f, 3f, 9f};
        short[] dst = new short[6];
        java.util.Arrays.fill(dst, bits(0x7777));
        Convert.toF16(src, 1, dst, 2, 3);
        assertArrayEquals(new short[] {bits(0x7777), bits(0x7777), bits(0x3C00), bits(0x4000),
            bits(0x4200), bits(0x7777)}, dst);
        float[] wide = new float[4];
        Convert.fromF16(dst, 2, wide, 1, 3);
        assertArrayEquals(new float[] {0f, 1f, 2f, 3f}, wide);
        short[] b = new short[3];
        Convert.toBf16(src, 1, b, 0, 3);
        float[] wb = new float[3];
        Convert.fromBf16(b, 0, wb, 0, 3);
        assertArrayEquals(new float[] {1f, 2f, 3f}, wb);

        // Direct buffers from their positions; the positions stay where they were.
        FloatBuffer fs = directFloats(5);
        fs.put(src).position(1).limit(4);
        ShortBuffer sb = directShorts(5);
        sb.position(2);
        Convert.toF16(fs, sb);
        assertEquals(1, fs.position());
        assertEquals(2, sb.position());
        assertEquals(bits(0x3C00), sb.get(2));
        assertEquals(bits(0x4200), sb.get(4));
        FloatBuffer back = directFloats(3);
        sb.limit(5);
        Convert.fromF16(sb, back);
        assertEquals(3f, back.get(2));
        Convert.toBf16(fs, sb);
        Convert.fromBf16(sb, back);
        assertEquals(2f, back.get(1));

        // Errors name the argument.
        NullPointerException npe = assertThrows(NullPointerException.class, () -> Convert.toF16(null));
        assertMentions(npe.getMessage(), "src");
        npe = assertThrows(NullPointerException.class, () -> Convert.toF16(src, 0, null, 0, 1));
        assertMentions(npe.getMessage(), "dst");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Convert.toF16(src, 0, new short[4], 0, 5));
        assertMentions(e.getMessage(), "dst", "4", "5");
        e = assertThrows(IllegalArgumentException.class, () -> Convert.fromF16(new short[2], 1, new float[4], 0, 2));
        assertMentions(e.getMessage(), "src", "2", "3");
        e = assertThrows(IllegalArgumentException.class, () -> Convert.toBf16(src, -1, new short[5], 0, 1));
        assertMentions(e.getMessage(), "src_pos", "-1");
        e = assertThrows(IllegalArgumentException.class, () -> Convert.toBf16(src, 0, new short[5], 0, -1));
        assertMentions(e.getMessage(), "-1", "negative");
        e = assertThrows(IllegalArgumentException.class, () -> Convert.toF16(fs, ShortBuffer.allocate(8)));
        assertMentions(e.getMessage(), "dst", "direct");
        ShortBuffer swapped = ByteBuffer.allocateDirect(16).order(
                ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? ByteOrder.BIG_ENDIAN
                        : ByteOrder.LITTLE_ENDIAN).asShortBuffer();
        e = assertThrows(IllegalArgumentException.class, () -> Convert.toF16(fs, swapped));
        assertMentions(e.getMessage(), "dst", "byte order");
        e = assertThrows(IllegalArgumentException.class, () -> Convert.toF16(fs, directShorts(2)));
        assertMentions(e.getMessage(), "dst", "2", "3");
        e = assertThrows(IllegalArgumentException.class,
                () -> Convert.toF16(fs, directShorts(8).asReadOnlyBuffer()));
        assertMentions(e.getMessage(), "dst", "read-only");
        // One memory seen as floats and as shorts: the library itself refuses the overlap.
        ByteBuffer mem = ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder());
        Refusal ae = Refusal.of(() -> Convert.toF16(mem.asFloatBuffer(), mem.asShortBuffer()));
        assertEquals(Status.INVALID_ARGUMENT, ae.status());
        assertMentions(ae.libraryMessage(), "attn_convert_f32_to_f16", "overlap");
    }

    @Test
    void quantizeI8() {
        float[] src = {1f, -2f, 0.5f, 0f, 0f, 0f, 0f, 0f, 0.25f, 3f, -3f, 1e-3f};
        Convert.Int8 q = Convert.quantizeI8(src, 3, 4);
        assertEquals(12, q.values.length);
        assertEquals(3, q.scales.length);
        assertEquals(2f / 127f, q.scales[0]);
        assertEquals(0f, q.scales[1]);
        assertEquals(3f / 127f, q.scales[2]);
        for (int r = 0; r < 3; r++) {
            for (int x = 0; x < 4; x++) {
                float v = src[r * 4 + x];
                byte got = q.values[r * 4 + x];
                float want = q.scales[r] == 0f ? 0f : (float) Math.rint(v / q.scales[r]);
                assertEquals(want, got, 0.0, "row " + r + " element " + x);
            }
        }
        assertEquals(-127, q.values[1]);
        assertEquals(127, q.values[9]);
        assertEquals(-127, q.values[10]);

        // Into ranges of caller arrays (e.g. new rows into their place in a cache).
        byte[] dst = new byte[10];
        float[] scales = {7f, 7f, 7f};
        Convert.quantizeI8(src, 8, 1, 4, dst, 3, scales, 1);
        assertEquals(7f, scales[0]);
        assertEquals(3f / 127f, scales[1]);
        assertEquals(7f, scales[2]);
        assertEquals(0, dst[2]);
        assertEquals(127, dst[4]);
        // rows of dim 0 have max |x| = 0: scale 0 each, as in C and every face
        float[] s3 = {7f, 7f, 7f};
        Convert.quantizeI8(new float[0], 0, 3, 0, new byte[0], 0, s3, 0);
        assertArrayEquals(new float[3], s3);
        assertEquals(-127, dst[5]);
        assertEquals(0, dst[7]);
        // And direct buffers.
        FloatBuffer fs = directFloats(12);
        fs.put(src).flip();
        ByteBuffer bd = ByteBuffer.allocateDirect(12);
        FloatBuffer bs = directFloats(3);
        Convert.quantizeI8(fs, 3, 4, bd, bs);
        for (int i = 0; i < 12; i++) {
            assertEquals(q.values[i], bd.get(i));
        }
        assertEquals(q.scales[2], bs.get(2));

        // A row holding NaN (or infinity) has no scale: the library names the row; rows before
        // it are written.
        float[] bad = {1f, 2f, 3f, 4f, Float.NaN, 0f, Float.POSITIVE_INFINITY, 0f};
        byte[] bq = new byte[8];
        float[] bsc = new float[2];
        Refusal ae = Refusal.of(() -> Convert.quantizeI8(bad, 0, 2, 4, bq, 0, bsc, 0));
        assertEquals(Status.INVALID_ARGUMENT, ae.status());
        assertMentions(ae.libraryMessage(), "attn_quantize_i8", "row", "1", "non-finite");
        assertEquals(4f / 127f, bsc[0]);
        assertEquals(127, bq[3]);
        ae = Refusal.of(() -> Convert.quantizeI8(new float[] {0f, Float.NaN}, 2, 1));
        assertMentions(ae.libraryMessage(), "row", "1");

        // Java-side checks name the argument.
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Convert.quantizeI8(src, 4, 4));
        assertMentions(e.getMessage(), "src", "12", "16");
        e = assertThrows(IllegalArgumentException.class,
                () -> Convert.quantizeI8(src, 0, 3, 4, new byte[11], 0, new float[3], 0));
        assertMentions(e.getMessage(), "dst", "11", "12");
        e = assertThrows(IllegalArgumentException.class,
                () -> Convert.quantizeI8(src, 0, 3, 4, new byte[12], 0, new float[3], 1));
        assertMentions(e.getMessage(), "scales", "3", "4");
        e = assertThrows(IllegalArgumentException.class, () -> Convert.quantizeI8(src, -1, 4));
        assertMentions(e.getMessage(), "rows", "-1");
        e = assertThrows(IllegalArgumentException.class,
                () -> Convert.quantizeI8(fs, 3, 4, ByteBuffer.allocate(12), bs));
        assertMentions(e.getMessage(), "dst", "direct");
        assertThrows(NullPointerException.class, () -> Convert.quantizeI8(src, 0, 3, 4, new byte[12], 0, null, 0));
    }

    // ------------------------------------------------------------------ binding

    @Test
    void storageBindingErrorsNameTheOperand() {
        try (AttentionDesc d = small(); AttentionArgs a = d.args()) {
            assertEquals(20, d.requiredLen(Operand.K_SCALE));
            assertEquals(20, d.requiredLen(Operand.V_SCALE));
            // Lengths are the library's, checked by the call; buffers and types are set's.
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> a.setF16(Operand.K, ShortBuffer.allocate(80)));
            assertMentions(e.getMessage(), "k", "direct");
            e = assertThrows(IllegalArgumentException.class, () -> a.setBf16(Operand.V,
                    ByteBuffer.allocateDirect(160).order(ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN
                            ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN).asShortBuffer()));
            assertMentions(e.getMessage(), "v", "byte order");
            e = assertThrows(IllegalArgumentException.class, () -> a.setI8(Operand.K, ByteBuffer.allocate(80)));
            assertMentions(e.getMessage(), "k", "direct");
            // Operands that cannot be stored so.
            e = assertThrows(IllegalArgumentException.class, () -> a.setI8(Operand.Q, new byte[96]));
            assertMentions(e.getMessage(), "q", "int8");
            e = assertThrows(IllegalArgumentException.class, () -> a.setF16(Operand.BIAS, new short[120]));
            assertMentions(e.getMessage(), "bias", "16-bit");
            e = assertThrows(IllegalArgumentException.class, () -> a.setBf16(Operand.OUT, new short[96]));
            assertMentions(e.getMessage(), "out");
            e = assertThrows(IllegalArgumentException.class, () -> a.setI8(Operand.K_SCALE, new byte[20]));
            assertMentions(e.getMessage(), "k_scale", "int8");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.K, new byte[80]));
            assertMentions(e.getMessage(), "k", "setI8");
            assertThrows(NullPointerException.class, () -> a.setF16(null, new short[1]));

            // storage() follows the last binding.
            a.setF16(Operand.Q, new short[96]);
            assertEquals(StorageType.F16, a.storage(Operand.Q));
            assertTrue(a.toString().contains("q:f16"), a.toString());
            a.set(Operand.Q, new float[96]);
            assertEquals(StorageType.F32, a.storage(Operand.Q));
            a.setBf16(Operand.Q, new short[96]).unset(Operand.Q);
            assertEquals(StorageType.F32, a.storage(Operand.Q));
            assertEquals(StorageType.F32, a.storage(Operand.BIAS));

            // An int8 K without its scales: the face names them for every operation.
            a.set(Operand.Q, new float[96]).setI8(Operand.K, new byte[80]).set(Operand.V, new float[80])
                    .set(Operand.OUT, new float[96]).set(Operand.WEIGHTS, new float[120]);
            assertEquals(StorageType.I8, a.storage(Operand.K));
            NullPointerException npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "k_scale", "int8");
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.WEIGHTS));
            assertMentions(npe.getMessage(), "k_scale");
            a.set(Operand.K_SCALE, new float[20]);
            a.run(Op.FORWARD);
            a.run(Op.WEIGHTS);
            a.setI8(Operand.V, new byte[80]);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "v_scale");
            a.run(Op.WEIGHTS); // does not read V
            a.set(Operand.V_SCALE, new float[20]).run(Op.FORWARD);
            // A scale with an fp32 / 16-bit K: the library refuses it, naming it.
            a.set(Operand.K, new float[80]);
            Refusal ae = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "k_scale", "int8");
            a.setF16(Operand.K, new short[80]);
            ae = Refusal.of(() -> a.run(Op.FORWARD));
            assertMentions(ae.libraryMessage(), "k_scale");
            a.unset(Operand.K_SCALE).run(Op.FORWARD);
        }
    }

    @Test
    void rawTypedRunLetsTheLibraryRefuse() {
        try (AttentionDesc d = small()) {
            long h = d.enter();
            long[] ah = new long[1];
            AttnNative.attn_args_create(ah);
            try {
                Object[] ops = new Object[Operand.values().length];
                int[] codes = new int[ops.length];
                ops[0] = new byte[96];
                ops[1] = new float[80];
                ops[2] = new float[80];
                ops[3] = new float[96];
                codes[3] = AttentionArgs.OUT;
                // int8 Q: attn_args_set_i8's own message.
                codes[0] = AttentionArgs.I8;
                Refusal ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, ah[0], ops, codes, 0,
                        null, null));
                assertEquals(Status.INVALID_ARGUMENT, ae.status());
                assertMentions(ae.libraryMessage(), "q", "attn_args_set_i8", "int8");
                // A float[] where the code says 16 bits: the glue checks the Java type.
                ops[0] = new float[96];
                codes[0] = AttentionArgs.F32;
                codes[1] = AttentionArgs.F16;
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, ah[0], ops, codes, 0, null, null));
                assertMentions(e.getMessage(), "k", "element", "type");
                // The scales behind the face: the library requires them with an int8 K.
                ops[1] = new byte[80];
                codes[1] = AttentionArgs.I8;
                ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, ah[0], ops, codes, 0, null, null));
                assertEquals(Status.NULL_POINTER, ae.status());
                assertMentions(ae.libraryMessage(), "k_scale", "int8");
                // Conversions: lengths and kinds behind the face.
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_convert(0, new float[4], 1, new short[4], 0, 4));
                assertMentions(e.getMessage(), "src", "4");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_convert(2, new float[4], 0, new float[4], 0, 4));
                assertMentions(e.getMessage(), "src", "element", "type");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_convert(4, null, 0, null, 0, 0));
                assertMentions(e.getMessage(), "kind");
                ae = Refusal.of(() -> AttnNative.attn_jni_convert(1, null, 0, new short[1], 0, 1));
                assertEquals(Status.NULL_POINTER, ae.status());
                assertMentions(ae.libraryMessage(), "src");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_quantize_i8(new float[4], 0, 1, 4, new boolean[4], 0,
                                new float[1], 0));
                assertMentions(e.getMessage(), "dst", "element", "type");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_quantize_i8(new float[8], 0, 2, 4, new byte[8], 0,
                                new float[1], 0));
                assertMentions(e.getMessage(), "scales", "1", "2");
            } finally {
                AttnNative.attn_args_destroy(ah[0]);
                d.leave();
            }
        }
    }

    // ------------------------------------------------------------------ exact mode, zero copy

    /** out and weights of one forward + weights call over the bound operands. */
    static float[][] outAndWeights(AttentionDesc d, java.util.function.Consumer<AttentionArgs> bind) {
        float[] out = new float[(int) d.requiredLen(Operand.OUT)];
        float[] w = new float[(int) d.requiredLen(Operand.WEIGHTS)];
        try (AttentionArgs a = d.args()) {
            bind.accept(a);
            a.set(Operand.OUT, out).set(Operand.WEIGHTS, w).run(Op.FORWARD);
            a.run(Op.WEIGHTS);
        }
        return new float[][] {out, w};
    }

    @Test
    void storedOperandsGiveTheFp32ResultOverTheirWidenedValues() {
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(7, 9).headDim(16)
                .causal(Causal.BOTTOM_RIGHT).build()) {
            float[] q = TestData.random(1, (int) d.requiredLen(Operand.Q));
            float[] k = TestData.random(2, (int) d.requiredLen(Operand.K));
            float[] v = TestData.random(3, (int) d.requiredLen(Operand.V));
            short[] q16 = Convert.toF16(q);
            short[] kb16 = Convert.toBf16(k);
            int rows = (int) d.requiredLen(Operand.K_SCALE);
            Convert.Int8 v8 = Convert.quantizeI8(v, rows, 16);
            // The widened values, in fp32.
            float[] qw = Convert.fromF16(q16), kw = Convert.fromBf16(kb16);
            float[] vw = new float[v.length];
            for (int i = 0; i < v.length; i++) {
                vw[i] = v8.values[i] * v8.scales[i / 16];
            }
            float[][] want = outAndWeights(d, a -> a.set(Operand.Q, qw).set(Operand.K, kw).set(Operand.V, vw));
            float[][] got = outAndWeights(d, a -> a.setF16(Operand.Q, q16).setBf16(Operand.K, kb16)
                    .setI8(Operand.V, v8.values).set(Operand.V_SCALE, v8.scales));
            assertEquals(null, TestData.compare("out", got[0], VectorsTest.widen(want[0]), 1e-6));
            assertEquals(null, TestData.compare("weights", got[1], VectorsTest.widen(want[1]), 1e-6));
            // The same bits through direct buffers.
            ShortBuffer qb = directShorts(q16.length + 1), kb = directShorts(kb16.length);
            qb.position(1);
            qb.put(q16).position(1);
            kb.put(kb16).flip();
            ByteBuffer vb = ByteBuffer.allocateDirect(v8.values.length + 3);
            vb.position(3);
            vb.put(v8.values).position(3);
            float[][] buf = outAndWeights(d, a -> a.setF16(Operand.Q, qb).setBf16(Operand.K, kb)
                    .setI8(Operand.V, vb).set(Operand.V_SCALE, v8.scales));
            assertTrue(VectorsTest.sameBits(got[0], buf[0]) && VectorsTest.sameBits(got[1], buf[1]),
                    "direct buffers give the array results");
            assertEquals(1, qb.position(), "positions are not moved");
        }
    }

    @Test
    void directStorageBuffersAreNotCopied() {
        // out and a 16-bit k over one memory: the library sees both addresses, so it reports the
        // overlap (a copy would hide it). int8 likewise.
        try (AttentionDesc d = small(); AttentionArgs a = d.args()) {
            ByteBuffer mem = ByteBuffer.allocateDirect(4 * 96).order(ByteOrder.nativeOrder());
            a.set(Operand.Q, new float[96]).setF16(Operand.K, mem.asShortBuffer())
                    .set(Operand.V, new float[80]).set(Operand.OUT, mem.asFloatBuffer());
            Refusal ae = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "out", "overlaps", "k");
            a.setF16(Operand.K, new short[80]).setI8(Operand.V, mem.duplicate())
                    .set(Operand.V_SCALE, new float[20]);
            ae = Refusal.of(() -> a.run(Op.FORWARD));
            assertMentions(ae.libraryMessage(), "out", "overlaps", "v");
            a.set(Operand.OUT, new float[96]).run(Op.FORWARD);
        }
    }

    // ------------------------------------------------------------------ backward

    /**
     * backward() and run(Op.BACKWARD) on the shared vectors (tests/vectors/backward.txt): FORWARD
     * with out and lse, then backward() with dout and every listed gradient, each within 1e-4 of
     * its expected file (VARIANTS.md "Backward"); run(Op.BACKWARD) with one gradient alone gives
     * the same bits.
     */
    @Test
    void backwardMatchesTheSharedVectorsAndRunBackwardIsTheSameCall() throws java.io.IOException {
        java.nio.file.Path dir = VectorsTest.vectorsDir();
        boolean all3 = false;
        for (VectorFile.Line c : VectorFile.read(VectorFile.vectorsFile("backward.txt"))) {
            String name = c.get("name");
            try (AttentionDesc d = VectorFile.builder(c).build(); AttentionArgs a = d.args()) {
                int b = c.i("batch"), hq = c.i("heads_q"), hkv = c.i("heads_kv"), sq = c.i("seq_q"),
                        sk = c.i("seq_k"), hd = c.i("head_dim");
                if (c.opt("strides.q") == null && c.opt("strides.k") == null && c.opt("head_dim_v") == null) {
                    assertEquals(b * hq * sq * hd, d.requiredLen(Operand.DQ), name);
                    assertEquals(b * hkv * sk * hd, d.requiredLen(Operand.DK), name);
                    assertEquals(b * hkv * sk * hd, d.requiredLen(Operand.DV), name);
                }
                java.util.Map<Operand, Object> in = VectorFile.readInputs(dir, c, d);
                VectorFile.bindInputs(a, in, false); // dout included
                float[] out = new float[(int) d.requiredLen(Operand.OUT)];
                float[] lse = new float[(int) d.requiredLen(Operand.LSE)];
                a.set(Operand.OUT, out).set(Operand.LSE, lse).run(Op.FORWARD);
                VectorFile.Got g = new VectorFile.Got().add("out", out, false).add("lse", lse, false);
                for (String grad : c.grads()) {
                    float[] x = new float[(int) d.requiredLen(VectorFile.operand(grad))];
                    a.set(VectorFile.operand(grad), x);
                    g.add(grad, x, false);
                }
                a.backward();
                assertNull(VectorFile.check(dir, c, d, g), name);
                // run(Op.BACKWARD) is the same call: the first gradient alone.
                String first = c.grads().get(0);
                for (String grad : c.grads()) {
                    a.unset(VectorFile.operand(grad));
                }
                float[] again = new float[(int) d.requiredLen(VectorFile.operand(first))];
                a.set(VectorFile.operand(first), again).run(Op.BACKWARD);
                assertTrue(VectorsTest.sameBits(g.get(first), again),
                        name + ": backward() == run(Op.BACKWARD), " + first + " alone");
                all3 |= c.grads().containsAll(java.util.Arrays.asList("dq", "dk", "dv"));
            }
        }
        assertTrue(all3, "a backward.txt case with dq, dk and dv");
    }

    @Test
    void backwardErrorsNameTheOperand() {
        try (AttentionDesc d = small(); AttentionArgs a = d.args()) {
            a.set(Operand.Q, new float[96]).set(Operand.K, new float[80]).set(Operand.V, new float[80])
                    .set(Operand.OUT, new float[96]);
            NullPointerException npe = assertThrows(NullPointerException.class, () -> a.backward());
            assertMentions(npe.getMessage(), "dout", "NULL");
            a.set(Operand.DOUT, new float[96]);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.BACKWARD));
            assertMentions(npe.getMessage(), "lse");
            a.set(Operand.LSE, new float[24]);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.BACKWARD));
            assertMentions(npe.getMessage(), "attn_run");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.DK, directFloats(80).asReadOnlyBuffer()));
            assertMentions(e.getMessage(), "dk", "read-only");
            a.set(Operand.DV, new float[80]).backward();
            // The library's rules: dbias needs bias, dsinks needs sinks, no int8 k / v (16-bit q
            // is widened).
            a.set(Operand.DBIAS, new float[120]);
            Refusal ae = Refusal.of(() -> a.backward());
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "dbias", "bias");
            a.unset(Operand.DBIAS).set(Operand.DSINKS, new float[4]);
            ae = Refusal.of(() -> a.backward());
            assertMentions(ae.libraryMessage(), "dsinks", "sinks");
            a.unset(Operand.DSINKS).setF16(Operand.Q, new short[96]);
            a.backward();
            a.set(Operand.Q, new float[96]).setI8(Operand.K, new byte[80]).set(Operand.K_SCALE, new float[20]);
            ae = Refusal.of(() -> a.backward());
            assertEquals(Status.UNSUPPORTED, ae.status());
            assertMentions(ae.libraryMessage(), "k");
            // dout as the output it would overwrite: the library refuses the overlap.
            float[] shared = new float[96];
            a.set(Operand.K, new float[80]).unset(Operand.K_SCALE).set(Operand.DOUT, shared)
                    .set(Operand.DQ, shared);
            ae = Refusal.of(() -> a.backward());
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "overlaps");
        }
        // Gradient operands are not passed to FORWARD / WEIGHTS: a dq sharing q's array is
        // harmless there.
        try (AttentionDesc d = small(); AttentionArgs a = d.args()) {
            float[] q = new float[96];
            a.set(Operand.Q, q).set(Operand.K, new float[80]).set(Operand.V, new float[80])
                    .set(Operand.OUT, new float[96]).set(Operand.DQ, q).run(Op.FORWARD);
        }
    }

    // ------------------------------------------------- kvAppendArgs and 16-bit backward

    /** float64 softmax(scale q.k) v over the keys given. */
    static double[] attend64(double[] q, double[][] k, double[][] v, double scale) {
        double[] s = new double[k.length];
        double m = Double.NEGATIVE_INFINITY;
        for (int j = 0; j < k.length; j++) {
            for (int e = 0; e < q.length; e++) {
                s[j] += q[e] * k[j][e];
            }
            s[j] *= scale;
            m = Math.max(m, s[j]);
        }
        double den = 0;
        for (int j = 0; j < s.length; j++) {
            s[j] = Math.exp(s[j] - m);
            den += s[j];
        }
        double[] out = new double[v[0].length];
        for (int j = 0; j < v.length; j++) {
            for (int e = 0; e < out.length; e++) {
                out[e] += s[j] / den * v[j][e];
            }
        }
        return out;
    }

    /** An element of a paged cache: K (v false) or V (v true), row r, element e. */
    interface CacheValue {
        double at(boolean v, int r, int e);
    }

    /**
     * Compares out ([b][hq][d], one query per sequence) with float64 attention over each
     * sequence's lens[b] cached keys: key j of KV head h is row slot(b, j) * hkv + h.
     */
    static void checkPagedDecode(String label, float[] out, float[] q, int[] lens, int hq, int hkv,
            int d, java.util.function.IntBinaryOperator slot, CacheValue val) {
        for (int bb = 0; bb < lens.length; bb++) {
            for (int h = 0; h < hq; h++) {
                int kvh = h / (hq / hkv);
                double[][] kk = new double[lens[bb]][d], vv = new double[lens[bb]][d];
                for (int j = 0; j < lens[bb]; j++) {
                    int r = slot.applyAsInt(bb, j) * hkv + kvh;
                    for (int e = 0; e < d; e++) {
                        kk[j][e] = val.at(false, r, e);
                        vv[j][e] = val.at(true, r, e);
                    }
                }
                double[] qr = new double[d];
                for (int e = 0; e < d; e++) {
                    qr[e] = q[(bb * hq + h) * d + e];
                }
                double[] want = attend64(qr, kk, vv, 1 / Math.sqrt(d));
                for (int e = 0; e < d; e++) {
                    assertEquals(want[e], out[(bb * hq + h) * d + e], 1e-5,
                            label + " out[" + bb + "][" + h + "][" + e + "]");
                }
            }
        }
    }

    /**
     * A paged int8 cache (token-major pages, reversed block table) filled by kvAppendArgs from
     * float rows, then decoded: the new rows hold exactly quantizeI8's row and scale, nothing
     * else changes, and attention over the cache matches float64 over its dequantized values.
     */
    @Test
    void pagedInt8CacheFilledByKvAppendArgsThenDecoded() {
        final int b = 2, hq = 4, hkv = 2, d = 16, page = 4, maxPages = 3, numPages = 6;
        int[] lens = {6, 9};
        int[] table = {4, 3, -1, 2, 1, 0};
        java.util.function.IntBinaryOperator slot = (bb, j) -> table[bb * maxPages + j / page] * page
                + j % page;
        java.util.Random g = new java.util.Random(29);
        int rows = numPages * page * hkv;
        byte[] k8 = new byte[rows * d], v8 = new byte[rows * d];
        float[] ks = new float[rows], vs = new float[rows];
        java.util.Arrays.fill(ks, 7f);
        java.util.Arrays.fill(vs, 7f);
        for (int bb = 0; bb < b; bb++) {
            for (int j = 0; j < lens[bb] - 1; j++) {
                for (int h = 0; h < hkv; h++) {
                    int r = slot.applyAsInt(bb, j) * hkv + h;
                    for (int c = 0; c < 2; c++) {
                        float[] x = new float[d];
                        for (int e = 0; e < d; e++) {
                            x[e] = 4 * g.nextFloat() - 2;
                        }
                        Convert.Int8 q8 = Convert.quantizeI8(x, 1, d);
                        System.arraycopy(q8.values, 0, c == 0 ? k8 : v8, r * d, d);
                        (c == 0 ? ks : vs)[r] = q8.scales[0];
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
        byte[] before = k8.clone();
        float[] out = new float[b * hq * d];
        try (AttentionDesc desc = AttentionDesc.builder().batch(b).heads(hq, hkv).seqLen(1, maxPages * page)
                .headDim(d).pageSize(page).causal(Causal.BOTTOM_RIGHT).build();
                AttentionArgs a = desc.args()) {
            a.setI8(Operand.K, k8).setI8(Operand.V, v8).set(Operand.K_SCALE, ks).set(Operand.V_SCALE, vs)
                    .set(Operand.NEW_K, newK).set(Operand.NEW_V, newV).seqLensK(lens).blockTable(table);
            a.kvAppendArgs();
            for (int bb = 0; bb < b; bb++) {
                for (int h = 0; h < hkv; h++) {
                    int r = slot.applyAsInt(bb, lens[bb] - 1) * hkv + h;
                    float[] src = java.util.Arrays.copyOfRange(newK, (bb * hkv + h) * d, (bb * hkv + h + 1) * d);
                    Convert.Int8 want = Convert.quantizeI8(src, 1, d);
                    assertArrayEquals(want.values, java.util.Arrays.copyOfRange(k8, r * d, r * d + d));
                    assertEquals(want.scales[0], ks[r]);
                    for (int e = 0; e < d; e++) {
                        before[r * d + e] = k8[r * d + e];
                    }
                }
            }
            assertArrayEquals(before, k8, "only the destination rows are written");
            a.set(Operand.Q, q).set(Operand.OUT, out).run(Op.FORWARD);
        }
        checkPagedDecode("int8", out, q, lens, hq, hkv, d, slot,
                (isV, r, e) -> isV ? (float) v8[r * d + e] * vs[r] : (float) k8[r * d + e] * ks[r]);
    }

    @Test
    void kvAppendArgsErrorsNameTheOperand() {
        try (AttentionDesc desc = AttentionDesc.builder().batch(1).heads(1, 1).seqLen(1, 4).headDim(4)
                .build(); AttentionArgs a = desc.args()) {
            short[] k = new short[16], v = new short[16];
            a.setF16(Operand.K, k).setF16(Operand.V, v).set(Operand.NEW_K, new float[4])
                    .seqLensK(new int[] {2});
            Refusal ae = Refusal.of(a::kvAppendArgs);
            assertEquals(Status.NULL_POINTER, ae.status());
            assertMentions(ae.libraryMessage(), "new_v is NULL");
            a.setBf16(Operand.NEW_V, new short[4]);
            ae = Refusal.of(a::kvAppendArgs);
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "new_v is bf16 but v is f16");
            a.setF16(Operand.NEW_V, new short[] {0x3C00, 0x3C00, 0x3C00, 0x3C00});
            a.kvAppendArgs();
            assertEquals(0x3C00, v[4]);
            assertEquals(0, v[0]);
            IllegalArgumentException iae = assertThrows(IllegalArgumentException.class,
                    () -> a.setI8(Operand.Q, new byte[4]));
            assertMentions(iae.getMessage(), "q", "int8");
        }
    }

    /** float64 gradients of out = softmax(scale q k^T) v, one head, every key visible. */
    static double[][][] backward64(double[][] q, double[][] k, double[][] v, double[][] dout, double scale) {
        int n = q.length, m = k.length, d = q[0].length;
        double[][] dq = new double[n][d], dk = new double[m][d], dv = new double[m][d];
        for (int i = 0; i < n; i++) {
            double[] p = new double[m];
            double mx = Double.NEGATIVE_INFINITY, den = 0, dsum = 0;
            for (int j = 0; j < m; j++) {
                for (int e = 0; e < d; e++) {
                    p[j] += q[i][e] * k[j][e];
                }
                p[j] *= scale;
                mx = Math.max(mx, p[j]);
            }
            for (int j = 0; j < m; j++) {
                p[j] = Math.exp(p[j] - mx);
                den += p[j];
            }
            double[] dp = new double[m];
            for (int j = 0; j < m; j++) {
                p[j] /= den;
                for (int e = 0; e < d; e++) {
                    dp[j] += dout[i][e] * v[j][e];
                    dv[j][e] += p[j] * dout[i][e];
                }
                dsum += p[j] * dp[j];
            }
            for (int j = 0; j < m; j++) {
                double ds = p[j] * (dp[j] - dsum) * scale;
                for (int e = 0; e < d; e++) {
                    dq[i][e] += ds * k[j][e];
                    dk[j][e] += ds * q[i][e];
                }
            }
        }
        return new double[][][] {dq, dk, dv};
    }

    @Test
    void backwardWithBf16InputsMatchesFloat64OverTheWidenedValues() {
        final int b = 2, h = 3, sq = 5, sk = 7, d = 8;
        java.util.Random g = new java.util.Random(16);
        float[][] raw = {new float[b * h * sq * d], new float[b * h * sk * d], new float[b * h * sk * d],
            new float[b * h * sq * d]};
        short[][] bits = new short[4][];
        float[][] wide = new float[4][];
        for (int x = 0; x < 4; x++) {
            for (int e = 0; e < raw[x].length; e++) {
                raw[x][e] = 3 * g.nextFloat() - 1.5f;
            }
            bits[x] = Convert.toBf16(raw[x]);
            wide[x] = Convert.fromBf16(bits[x]);
        }
        float[] out = new float[b * h * sq * d], lse = new float[b * h * sq];
        float[] dq = new float[b * h * sq * d], dk = new float[b * h * sk * d], dv = new float[b * h * sk * d];
        try (AttentionDesc desc = AttentionDesc.builder().batch(b).heads(h, h).seqLen(sq, sk).headDim(d).build();
                AttentionArgs a = desc.args()) {
            a.setBf16(Operand.Q, bits[0]).setBf16(Operand.K, bits[1]).setBf16(Operand.V, bits[2])
                    .set(Operand.OUT, out).set(Operand.LSE, lse).run(Op.FORWARD);
            a.setBf16(Operand.DOUT, bits[3]).set(Operand.DQ, dq).set(Operand.DK, dk).set(Operand.DV, dv)
                    .backward();
        }
        for (int bb = 0; bb < b; bb++) {
            for (int hh = 0; hh < h; hh++) {
                double[][][] in = new double[4][][];
                int[] n = {sq, sk, sk, sq};
                for (int x = 0; x < 4; x++) {
                    in[x] = new double[n[x]][d];
                    for (int i = 0; i < n[x]; i++) {
                        for (int e = 0; e < d; e++) {
                            in[x][i][e] = wide[x][((bb * h + hh) * n[x] + i) * d + e];
                        }
                    }
                }
                double[][][] want = backward64(in[0], in[1], in[2], in[3], 1 / Math.sqrt(d));
                float[][] got = {dq, dk, dv};
                int[] rowsOf = {sq, sk, sk};
                for (int x = 0; x < 3; x++) {
                    for (int i = 0; i < rowsOf[x]; i++) {
                        for (int e = 0; e < d; e++) {
                            assertEquals(want[x][i][e], got[x][((bb * h + hh) * rowsOf[x] + i) * d + e], 1e-5,
                                    "gradient " + x + " [" + bb + "][" + hh + "][" + i + "][" + e + "]");
                        }
                    }
                }
            }
        }
    }
}
