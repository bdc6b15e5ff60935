package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.function.IntConsumer;
import org.junit.jupiter.api.Test;

/**
 * The library's tables through the Java face: the ISA list ({@link Attention#isaInfo()}),
 * parameter facts ({@link Param#info()}, {@link Attention#paramInfo(int)}) and operand facts
 * ({@link Operand#info()}, {@link Attention#operandInfo(int)}), each against what C says: the
 * raw C calls, attn.h's documented values and what the library then accepts; and ISA names as
 * the library words them.
 */
class IntrospectionTest {
    /** How many indices C's loop visits: query(i) from 0 until the library refuses i. */
    static int cLoopLength(IntConsumer query) {
        for (int i = 0;; i++) {
            try {
                query.accept(i);
            } catch (IllegalArgumentException past) {
                assertTrue(past.getMessage().contains("(" + i + ")"), past.getMessage());
                return i;
            }
        }
    }

    @Test
    void isaInfoListsTheLibrarysIsasInItsOrderWithWhatThisCpuRuns() {
        List<IsaInfo> isas = Attention.isaInfo();
        assertEquals(cLoopLength(i -> AttnNative.attn_isa_info(i, null, null)), isas.size());
        List<String> names = new ArrayList<>();
        for (IsaInfo isa : isas) {
            names.add(isa.name());
        }
        // attn.h: "scalar", "sse2", "avx2", "avx512", "avx512fp16", weakest first.
        assertEquals(Arrays.asList("scalar", "sse2", "avx2", "avx512", "avx512fp16"), names);
        assertEquals(names, Attention.isas());
        assertTrue(isas.get(0).isSupported(), "scalar runs everywhere");
        assertEquals("scalar", isas.get(0).toString());
        assertThrows(UnsupportedOperationException.class, () -> isas.add(isas.get(0)));
        // attn.h: supported = attn_set_isa(name) then succeeds.
        try {
            for (IsaInfo isa : isas) {
                int[] raw = new int[1];
                AttnNative.attn_isa_info(names.indexOf(isa.name()), null, raw);
                assertEquals(raw[0] != 0, isa.isSupported(), isa.name());
                if (isa.isSupported()) {
                    Attention.setIsa(isa.name());
                    assertEquals(isa.name(), Attention.isa());
                } else {
                    Refusal r = Refusal.of(() -> Attention.setIsa(isa.name()), isa.name());
                    assertEquals(Status.UNSUPPORTED, r.status(), isa.name());
                    assertTrue(isa.toString().endsWith("(unsupported)"), isa.toString());
                }
            }
        } finally {
            Attention.setIsa(null);
        }
        assertTrue(names.contains(Attention.isa()));
    }

    @Test
    void paramInfoAnswersFromTheLibrarysTable() {
        // attn.h / params.def: causal is an int in [0, 2] (the attn_causal values), default 0.
        ParamInfo causal = Param.CAUSAL.info();
        assertSame(Param.CAUSAL, causal.param());
        assertEquals("causal", causal.name());
        assertFalse(causal.isFloat());
        assertEquals(0.0, causal.min());
        assertEquals(Causal.values().length - 1, causal.max());
        assertEquals(0.0, causal.defaultValue());
        // The defaults that follow the shape are NaN.
        assertTrue(Param.SCALE.info().isFloat());
        assertTrue(Double.isNaN(Param.SCALE.info().defaultValue()));
        assertTrue(Double.isNaN(Param.HEAD_DIM_V.info().defaultValue()));

        assertEquals(cLoopLength(i -> AttnNativeJNI.attn_param_info(i, null, null, null, null, null)),
                Param.values().length);
        try (AttentionDesc fresh = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(16)
                .build()) {
            for (Param p : Param.values()) {
                ParamInfo info = p.info();
                String at = p.name();
                assertSame(p, info.param(), at);
                assertEquals(p.name().toLowerCase(Locale.ROOT), info.name(), at);
                // the same facts as attn_param_bounds, the older query
                int[] isFloat = new int[1];
                double[] min = new double[1], max = new double[1];
                AttnNative.attn_param_bounds(p, isFloat, min, max);
                assertEquals(isFloat[0] != 0, info.isFloat(), at);
                assertEquals(min[0], info.min(), at);
                assertEquals(max[0], info.max(), at);
                // the default is what a new descriptor holds
                double want = p == Param.SCALE ? (float) (1 / Math.sqrt(16))
                        : p == Param.HEAD_DIM_V ? 16 : info.defaultValue();
                assertEquals(want, fresh.param(p), at);
                ParamInfo byCode = Attention.paramInfo(p.code());
                assertEquals(info.toString(), byCode.toString(), at);
            }
        }
        for (int code : new int[] {Param.values().length, -1, Integer.MAX_VALUE}) {
            Refusal r = Refusal.of(() -> Attention.paramInfo(code), "param " + code);
            assertEquals(Status.INVALID_ARGUMENT, r.status());
            assertEquals("attn_param_info: param (" + code + ") is not an attn_param", r.libraryMessage());
        }
    }

    @Test
    void operandInfoAnswersFromTheLibrarysTable() {
        // attn.h / operands.def (the C test's spot checks): types, rank, strides.
        OperandInfo k = Operand.K.info();
        EnumSet<Dtype> kv = EnumSet.of(Dtype.F32, Dtype.F16, Dtype.BF16, Dtype.I8, Dtype.FP8_E4M3,
                                       Dtype.FP8_E5M2);
        assertSame(Operand.K, k.operand());
        assertEquals("k", k.name());
        assertEquals(kv, k.inputTypes());
        assertEquals(kv, k.outputTypes());
        assertEquals(4, k.rank());
        assertTrue(k.isStrided());
        OperandInfo lse = Operand.LSE.info();
        assertEquals("lse", lse.name());
        assertTrue(lse.inputTypes().isEmpty());
        assertEquals(EnumSet.of(Dtype.F32), lse.outputTypes());
        assertEquals(3, lse.rank());
        assertFalse(lse.isStrided());
        assertEquals(EnumSet.of(Dtype.U8), Operand.KEY_VALID.info().inputTypes());
        assertEquals(2, Operand.KEY_VALID.info().rank());
        assertEquals(EnumSet.of(Dtype.I32), Operand.SEQ_LENS_K.info().inputTypes());
        assertEquals(1, Operand.CU_SEQLENS_Q.info().rank());
        assertEquals(1, Operand.SINKS.info().rank());
        assertThrows(UnsupportedOperationException.class, () -> k.inputTypes().clear());
        // attn.h: q [batch, heads_q, seq_q, head_dim]; cu_seqlens_q [batch+1]
        assertEquals(Arrays.asList("batch", "heads_q", "seq_q", "head_dim"), Operand.Q.info().dims());
        assertEquals(Arrays.asList("batch+1"), Operand.CU_SEQLENS_Q.info().dims());
        assertEquals(Arrays.asList("batch", "heads_kv", "seq_k", "head_dim"), k.dims());
        assertThrows(UnsupportedOperationException.class, () -> k.dims().set(0, "x"));

        assertEquals(cLoopLength(i -> AttnNativeJNI.attn_operand_info(i, null, null, null, null, null)),
                Operand.values().length);
        assertEquals(cLoopLength(i -> AttnNativeJNI.attn_operand_dims(i, new String[1])),
                Operand.values().length);
        for (Operand o : Operand.values()) {
            OperandInfo info = o.info();
            String at = o.name();
            assertSame(o, info.operand(), at);
            assertEquals(o.name().toLowerCase(Locale.ROOT), info.name(), at);
            int[] in = new int[1], out = new int[1], rank = new int[1], strided = new int[1];
            AttnNative.attn_operand_info(o, null, in, out, rank, strided);
            for (Dtype t : Dtype.values()) {
                assertEquals((in[0] >> t.code() & 1) != 0, info.inputTypes().contains(t), at + " in " + t);
                assertEquals((out[0] >> t.code() & 1) != 0, info.outputTypes().contains(t), at + " out " + t);
            }
            assertEquals(rank[0], info.rank(), at);
            assertEquals(strided[0] != 0, info.isStrided(), at);
            String[] dims = new String[1];
            AttnNative.attn_operand_dims(o, dims);
            assertEquals(rank[0], info.dims().size(), at + " " + info.dims());
            assertEquals(dims[0], String.join(" ", info.dims()), at);
            assertEquals(info.dims(), Attention.operandInfo(o.code()).dims(), at);
            assertEquals(info.inputTypes().isEmpty(), o.isOutput(), at);
            assertEquals(info.toString(), Attention.operandInfo(o.code()).toString(), at);
        }
        for (int code : new int[] {Operand.values().length, -1}) {
            Refusal r = Refusal.of(() -> Attention.operandInfo(code), "operand " + code);
            assertEquals(Status.INVALID_ARGUMENT, r.status());
            assertEquals("attn_operand_info: which (" + code + ") is not an attn_operand", r.libraryMessage());
        }
    }

    @Test
    void isaNamesWithNulOrNonAsciiGetTheLibrarysWording() {
        for (String name : new String[] {"avx2\0", "scalar\0avx512", "\0", "sse2\u00e9", "avx\u20ac512"}) {
            Refusal e = Refusal.of(() -> Attention.setIsa(name),
                    name);
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertTrue(e.libraryMessage().contains("is not one of scalar, sse2, avx2, avx512"),
                    e.libraryMessage());
        }
        Attention.setIsa("");
        assertTrue(Attention.isas().contains(Attention.isa()));
    }
}
