package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.libattn.CallFixture.*;
import static org.libattn.TestData.direct;

import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import org.junit.jupiter.api.Test;

/**
 * The raw SWIG layer under the face (package-private AttnNative): its args setters take direct
 * buffers, and a raw call leaves the checks to the library.
 */
class RawLayerTest {
    @Test
    void rawArgsSettersTakeDirectBuffers() {
        long[] dh = new long[1], ah = new long[1];
        AttnNative.attn_desc_create(dh, 1, 1, 1, 2, 3, 2);
        AttnNative.attn_args_create(ah);
        try {
            FloatBuffer q = direct(new float[] {1, 0, 0, 1}, 0), k = direct(new float[] {1, 0, 0, 1, 1, 1}, 0),
                    v = direct(new float[] {1, 2, 3, 4, 5, 6}, 0), out = floats(4, 0);
            AttnNative.attn_args_set_f32(ah[0], Operand.Q, q, 4);
            AttnNative.attn_args_set_f32(ah[0], Operand.K, k, 6);
            AttnNative.attn_args_set_f32(ah[0], Operand.V, v, 6);
            AttnNative.attn_args_set_out_f32(ah[0], Operand.OUT, out, 4);
            ByteBuffer kv = ByteBuffer.allocateDirect(3).put(new byte[] {1, 1, 0}).flip();
            AttnNative.attn_args_set_u8(ah[0], Operand.KEY_VALID, kv, 3);
            AttnNative.attn_args_set_i32(ah[0], Operand.SEQ_LENS_K, direct(new int[] {3}, 0), 1);
            AttnNative.attn_run(dh[0], Op.FORWARD, ah[0]);
            // Query 0 = (1, 0) sees keys 0 and 1 (key 2 is padding): weights softmax(s/sqrt2 * (1, 0)).
            double w0 = 1 / (1 + Math.exp(-1 / Math.sqrt(2)));
            assertEquals(w0 * 1 + (1 - w0) * 3, out.get(0), 1e-5);
            // A heap buffer has no address: the library sees NULL data with a length.
            Refusal ae = Refusal.of(() -> AttnNative.attn_args_set_f32(ah[0], Operand.Q, FloatBuffer.allocate(4), 4));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            ae = Refusal.of(() -> AttnNative.attn_args_set_f32(ah[0], Operand.OUT, out, 4));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "out", "attn_args_set_out_f32");
            AttnNative.attn_args_set_f32(ah[0], Operand.Q, null, 0); // unbinds
            ae = Refusal.of(() -> AttnNative.attn_run(dh[0], Op.FORWARD, ah[0]));
            assertEquals(Status.NULL_POINTER, ae.status());
            assertMentions(ae.libraryMessage(), "q");
            AttnNative.attn_args_clear(ah[0]);
            long[] iv = new long[1];
            AttnNative.attn_desc_get_int(dh[0], Param.HEAD_DIM_V, iv);
            assertEquals(2, iv[0]);
            // A descriptor that ran is immutable.
            ae = Refusal.of(() -> AttnNative.attn_desc_set_int(dh[0], Param.WINDOW_LEFT, 1));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "desc", "used");
            assertThrows(IllegalArgumentException.class, () -> AttnNative.attn_desc_create(iv, -1, 1, 1, 1, 1, 1));
        } finally {
            AttnNative.attn_args_destroy(ah[0]);
            AttnNative.attn_desc_destroy(dh[0]);
        }
        long[] dh2 = new long[1];
        AttnNative.attn_desc_create(dh2, 1, 1, 1, 2, 3, 2);
        try {
            Refusal ae = Refusal.of(() -> AttnNative.attn_desc_set_int(dh2[0], Param.WINDOW_LEFT, 1L << 40));
            assertMentions(ae.libraryMessage(), "ATTN_PARAM_WINDOW_LEFT");
            AttnNative.attn_desc_set_float(dh2[0], Param.SOFTCAP, 0.5);
            double[] dv = new double[1];
            AttnNative.attn_desc_get_float(dh2[0], Param.SOFTCAP, dv);
            assertEquals(0.5, dv[0]);
            ae = Refusal.of(() -> AttnNative.attn_desc_get_float(dh2[0], Param.SOFTCAP, null));
            assertEquals(Status.NULL_POINTER, ae.status());
            assertMentions(ae.libraryMessage(), "value");
            int[] isFloat = new int[1];
            AttnNative.attn_param_bounds(Param.SOFTCAP, isFloat, null, null);
            assertEquals(1, isFloat[0]);
            double[] max = new double[1];
            AttnNative.attn_param_bounds(Param.CAUSAL, null, null, max);
            assertEquals(2.0, max[0]);
        } finally {
            AttnNative.attn_desc_destroy(dh2[0]);
        }
    }

    @Test
    void rawCallLeavesTheChecksToTheLibrary() {
        final int F32 = AttentionArgs.F32, OUT = AttentionArgs.OUT, U8 = AttentionArgs.U8;
        int[] codes = {F32, F32, F32, F32 | OUT, F32 | OUT, F32 | OUT, U8, U8, F32};
        try (AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build()) {
            long h = d.enter();
            try {
                float[] x = new float[4];
                // A mask bound as floats: the library's setter refuses it, naming it.
                Refusal ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, 0,
                        new Object[] {x, x, x, new float[4], null, null, new float[4]},
                        new int[] {F32, F32, F32, F32 | OUT, 0, 0, F32}, 0, null, null));
                assertEquals(Status.INVALID_ARGUMENT, ae.status());
                assertMentions(ae.libraryMessage(), "key_valid");
                // Lengths: the 0.1 calls run through attn_run, which checks them.
                ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, 0,
                        new Object[] {x, new float[3], x, new float[4]}, codes, 0, null, null));
                assertMentions(ae.libraryMessage(), "k", "3", "needs", "4");
                ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, 0,
                        new Object[] {x, new float[0], x, new float[4]}, codes, 0, null, null));
                assertMentions(ae.libraryMessage(), "attn_run", "k", "0", "needs", "4");
                // attn_simple takes no lengths: the glue checks them.
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_simple(new float[0], x, x, 2, 2, false, null, new float[4]));
                assertMentions(e.getMessage(), "q", "0", "4");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_simple(x, x, x, 2, 2, false, new boolean[1], new float[4]));
                assertMentions(e.getMessage(), "pad_mask", "1", "2");
                // An empty array is "given" (not NULL): n = 0 is the library's own refusal.
                ae = Refusal.of(() -> AttnNative.attn_jni_simple(new float[0], new float[0], new float[0], 0, 2,
                        false, null, new float[0]));
                assertMentions(ae.libraryMessage(), "n");
            } finally {
                d.leave();
            }
        }
    }
}
