// NUnit tests of the storage types (f16 / bf16 / int8 Q, K, V bound through AttentionArgs.BindF16,
// BindBF16, Bind(sbyte[]) with Operand.KScale / VScale), the conversions of Attention
// (ConvertF32ToF16 .. QuantizeI8) and the backward (Op.Backward with Operand.DOut .. DSinks),
// including bad input naming the argument. The shared vectors (storage.txt, backward.txt) run in
// VariantVectorTests.cs.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ConversionTests
    {
        static float F(int bits)
        {
            return BitConverter.ToSingle(BitConverter.GetBytes(bits), 0);
        }

        [Test]
        public void F16RoundsToNearestEvenAndWidensExactly()
        {
            float tieDown = 1.0f + (float)Math.Pow(2, -11); // halfway between 1 and 1 + 2^-10
            float tieUp = 1.0f + 3 * (float)Math.Pow(2, -11); // halfway: rounds to the even 1 + 2^-9
            var src = new[] { 1.0f, -2.0f, 0.5f, tieDown, tieUp, 65504f, 65520f, float.NaN,
                              float.NegativeInfinity, 0.0f, -0.0f, F(1) };
            ushort[] h = Attention.ConvertF32ToF16(src);
            CollectionAssert.AreEqual(
                new ushort[] { 0x3C00, 0xC000, 0x3800, 0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0, 0xFC00,
                               0x0000, 0x8000, 0x0000 },
                h.Select((x, i) => i == 7 ? (ushort)0 : x).ToArray());
            Assert.AreEqual(0x7C00, h[7] & 0x7C00, "NaN stays NaN (exponent all ones)");
            Assert.AreNotEqual(0, h[7] & 0x03FF, "NaN stays NaN (mantissa nonzero)");

            float[] back = Attention.ConvertF16ToF32(h);
            Assert.AreEqual(1.0f, back[3], "1 + 2^-11 -> 1.0");
            Assert.AreEqual(1.0f + (float)Math.Pow(2, -9), back[4], "1 + 3*2^-11 -> 1 + 2^-9");
            Assert.AreEqual(65504f, back[5]);
            Assert.AreEqual(float.PositiveInfinity, back[6], "overflow gives infinity");
            Assert.IsTrue(float.IsNaN(back[7]));
            Assert.AreEqual(float.NegativeInfinity, back[8]);
            Assert.AreEqual(0x80000000u, BitConverter.ToUInt32(BitConverter.GetBytes(back[10]), 0),
                            "-0 stays -0");
            // Values that f16 holds survive the round trip exactly.
            var exact = new[] { 1.0f, -2.0f, 0.5f, 0.099975586f, 6.1035156e-05f, 5.9604645e-08f };
            CollectionAssert.AreEqual(exact, Attention.ConvertF16ToF32(Attention.ConvertF32ToF16(exact)));
        }

        [Test]
        public void BF16RoundsToNearestEvenAndWidensExactly()
        {
            float tieDown = 1.0f + (float)Math.Pow(2, -8); // halfway between 1 and 1 + 2^-7
            float tieUp = 1.0f + 3 * (float)Math.Pow(2, -8);
            var src = new[] { 1.0f, -2.0f, tieDown, tieUp, float.MaxValue, 3.0e38f };
            ushort[] b = Attention.ConvertF32ToBF16(src);
            CollectionAssert.AreEqual(new ushort[] { 0x3F80, 0xC000, 0x3F80, 0x3F82, 0x7F80, 0x7F62 },
                                      b);
            float[] back = Attention.ConvertBF16ToF32(b);
            Assert.AreEqual(1.0f + (float)Math.Pow(2, -6), back[3]);
            Assert.AreEqual(float.PositiveInfinity, back[4], "FLT_MAX rounds up to infinity");
            ushort[] nan = Attention.ConvertF32ToBF16(new[] { float.NaN });
            Assert.IsTrue(float.IsNaN(Attention.ConvertBF16ToF32(nan)[0]), "NaN stays NaN");
        }

        [Test]
        public void SpansWindowsAndShortDestinations()
        {
            var src = new[] { 9f, 1f, 2f, 3f, 9f };
            var dst = new ushort[6];
            Attention.ConvertF32ToF16(new ReadOnlySpan<float>(src, 1, 3), new Span<ushort>(dst, 2, 3));
            CollectionAssert.AreEqual(new ushort[] { 0, 0, 0x3C00, 0x4000, 0x4200, 0 }, dst);
            var wide = new float[4];
            Attention.ConvertF16ToF32(new ReadOnlySpan<ushort>(dst, 2, 3), wide);
            CollectionAssert.AreEqual(new[] { 1f, 2f, 3f, 0f }, wide);
            Attention.ConvertF32ToF16(ReadOnlySpan<float>.Empty, Span<ushort>.Empty); // n = 0: ok

            var e = Assert.Throws<ArgumentException>(() => Attention.ConvertF32ToF16(src, new ushort[4]));
            Assert.AreEqual("dst", e.ParamName);
            StringAssert.Contains("dst has 4 elements, needs at least 5", e.Message);
            e = Assert.Throws<ArgumentException>(() => Attention.ConvertBF16ToF32(new ushort[3], new float[2]));
            StringAssert.Contains("dst has 2 elements, needs at least 3", e.Message);
            Assert.Throws<ArgumentNullException>(() => Attention.ConvertF32ToBF16((float[])null));
            Assert.Throws<ArgumentNullException>(() => Attention.ConvertF16ToF32((ushort[])null));
        }

        [Test]
        public void QuantizeI8PerRowScalesAndNonFiniteRowsNamed()
        {
            // Row 0: max 127 -> scale 1, 0.5 -> 0 and 1.5 -> 2 (nearest even); row 1: all zero
            // -> scale 0, q 0; row 2: max 254 -> scale 2, 3 -> 1.5 -> 2, -5 -> -2.5 -> -2.
            var src = new[] { 127f, -3f, 0.5f, 1.5f, 0f, 0f, 0f, 0f, -254f, 3f, -5f, 1f };
            float[] scales;
            sbyte[] q = Attention.QuantizeI8(src, 4, out scales);
            CollectionAssert.AreEqual(new float[] { 1f, 0f, 2f }, scales);
            CollectionAssert.AreEqual(new sbyte[] { 127, -3, 0, 2, 0, 0, 0, 0, -127, 2, -2, 0 }, q);
            // rows of dim 0 have max |x| = 0: scale 0 each, as in C and every face
            var s3 = new[] { 7f, 7f, 7f };
            Attention.QuantizeI8(ReadOnlySpan<float>.Empty, 3, 0, Span<sbyte>.Empty, s3);
            CollectionAssert.AreEqual(new float[3], s3);

            // A NaN in row 1 of 3: the library names the row; row 0 is written.
            var bad = new[] { 1f, 2f, 3f, float.NaN, 5f, 6f };
            var dst = new sbyte[6];
            var sc = new float[3];
            var e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(bad, 3, 2, dst, sc));
            StringAssert.Contains("attn_quantize_i8: src row 1 holds a non-finite value", e.Message);
            Assert.AreEqual("src", e.ParamName);
            Assert.AreEqual(2f / 127f, sc[0], "rows before the bad one are written");
            e = Assert.Throws<ArgumentException>(
                () => Attention.QuantizeI8(new[] { 1f, float.PositiveInfinity }, 1, out scales));
            StringAssert.Contains("src row 1", e.Message);

            // Shapes, checked before the call.
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 4, 4, dst, sc));
            StringAssert.Contains("src has 12 elements, needs at least rows (4) x dim (4)", e.Message);
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 3, 4, new sbyte[11], sc));
            Assert.AreEqual("dst", e.ParamName);
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 3, 4, new sbyte[12], new float[2]));
            StringAssert.Contains("scales has 2 elements, needs at least 3", e.Message);
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 5, out scales));
            StringAssert.Contains("not a whole number of rows", e.Message);
            Assert.Throws<ArgumentOutOfRangeException>(() => Attention.QuantizeI8(src, -1, 4, dst, sc));
            Assert.Throws<ArgumentOutOfRangeException>(() => Attention.QuantizeI8(src, 0, out scales));
        }
    }

    [TestFixture]
    public class StorageTypeTests
    {
        // B=2, HQ=4, HKV=2, SQ=3, SK=5, D=4: Q/OUT 96, K/V 80, LSE 24, scales 20.
        static AttentionDesc Desc()
        {
            return new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4).Causal(Causal.BottomRight)
                       .Build();
        }

        static float[] RunF32(AttentionDesc desc, float[] q, float[] k, float[] v)
        {
            var o = new float[desc.RequiredLen(Operand.Out)];
            using (var args = new AttentionArgs())
                desc.Run(Op.Forward, args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v)
                                         .Bind(Operand.Out, o));
            return o;
        }

        static float[] Dequantize(sbyte[] q, float[] scales, int dim)
        {
            return q.Select((x, i) => (float)x * scales[i / dim]).ToArray();
        }

        [Test]
        public void RequiredLenOfTheNewOperands()
        {
            using (var desc = Desc())
            {
                var want = new[] { Tuple.Create(Operand.DOut, 96UL), Tuple.Create(Operand.DQ, 96UL),
                                   Tuple.Create(Operand.DK, 80UL), Tuple.Create(Operand.DV, 80UL),
                                   Tuple.Create(Operand.DBias, 120UL), Tuple.Create(Operand.DSinks, 4UL),
                                   Tuple.Create(Operand.KScale, 20UL), Tuple.Create(Operand.VScale, 20UL) };
                foreach (var w in want) Assert.AreEqual(w.Item2, desc.RequiredLen(w.Item1), w.Item1.ToString());
            }
            // The scales take strides like K: [batch][seq_k][heads_kv] (BSH) here.
            using (var desc = new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4)
                                  .Strides(Operand.KScale, 12, 1, 2).Build())
                Assert.AreEqual(12UL + 1 + 4 * 2 + 1, desc.RequiredLen(Operand.KScale));
        }

        [Test]
        public void SixteenBitAndInt8EqualFp32OverTheWidenedValues()
        {
            float[] q = Util.Values(96, 1), k = Util.Values(80, 2), v = Util.Values(80, 3);
            using (var desc = Desc())
            {
                // f16 K and V, bf16 Q: fp32 attention over the widened values.
                ushort[] kh = Attention.ConvertF32ToF16(k), vh = Attention.ConvertF32ToF16(v);
                ushort[] qb = Attention.ConvertF32ToBF16(q);
                float[] want = RunF32(desc, Attention.ConvertBF16ToF32(qb), Attention.ConvertF16ToF32(kh),
                                      Attention.ConvertF16ToF32(vh));
                var o = new float[96];
                using (var args = new AttentionArgs())
                {
                    args.BindBF16(Operand.Q, qb).BindF16(Operand.K, kh).BindF16(Operand.V, vh)
                        .Bind(Operand.Out, o);
                    desc.Run(Op.Forward, args);
                    for (int i = 0; i < o.Length; i++) Util.AssertClose(want[i], o[i], "f16 out[" + i + "]", 1e-6);
                    // Memory windows of bigger arrays, bound the same way, read the same values.
                    var kw = new ushort[90];
                    Array.Copy(kh, 0, kw, 7, 80);
                    var o2 = new float[96];
                    args.BindF16(Operand.K, new ReadOnlyMemory<ushort>(kw, 7, 80)).Bind(Operand.Out, o2);
                    desc.Run(Op.Forward, args);
                    CollectionAssert.AreEqual(o, o2);
                    // Zero copy: the bound array itself is read at Run, not a copy made at Bind.
                    args.BindF16(Operand.K, kh);
                    kh[0] ^= 0x4000;
                    desc.Run(Op.Forward, args);
                    kh[0] ^= 0x4000;
                    CollectionAssert.AreNotEqual(o, o2);
                }

                // int8 K and V with their scales (rows of head_dim = 4), f32 Q.
                float[] ks, vs;
                sbyte[] k8 = Attention.QuantizeI8(k, 4, out ks), v8 = Attention.QuantizeI8(v, 4, out vs);
                want = RunF32(desc, q, Dequantize(k8, ks, 4), Dequantize(v8, vs, 4));
                var lse = new float[24];
                using (var args = new AttentionArgs())
                {
                    args.Bind(Operand.Q, q).Bind(Operand.K, k8).Bind(Operand.V, new ReadOnlyMemory<sbyte>(v8))
                        .Bind(Operand.KScale, ks).Bind(Operand.VScale, vs).Bind(Operand.Out, o)
                        .Bind(Operand.Lse, lse);
                    desc.Run(Op.Forward, args);
                    for (int i = 0; i < o.Length; i++) Util.AssertClose(want[i], o[i], "i8 out[" + i + "]", 1e-6);
                    // Op.Weights reads K and its scale, not V.
                    var w = new float[desc.RequiredLen(Operand.Weights)];
                    args.Unbind(Operand.V).Unbind(Operand.VScale).Bind(Operand.Weights, w);
                    desc.Run(Op.Weights, args);
                    Assert.AreEqual(24.0, w.Sum(), 1e-4, "every row sums to 1");
                }
            }
        }

        [Test]
        public void VarlenInt8ScalesAreCheckedAgainstThePack()
        {
            // Two sequences of at most 4 keys, 2 + 3 = 5 real ones: K 5 x 2 x 4, scales 5 x 2.
            using (var desc = new AttentionDesc.Builder().Dims(2, 2, 2, 4, 4, 4).Varlen().Build())
            {
                Assert.AreEqual(16UL, desc.RequiredLen(Operand.KScale));
                float[] q = Util.Values(5 * 8, 4), k = Util.Values(5 * 8, 5), v = Util.Values(5 * 8, 6);
                float[] ks, vs;
                sbyte[] k8 = Attention.QuantizeI8(k, 4, out ks), v8 = Attention.QuantizeI8(v, 4, out vs);
                Assert.AreEqual(10, ks.Length);
                var o = new float[40];
                using (var args = new AttentionArgs())
                {
                    args.Bind(Operand.CuSeqlensQ, new[] { 0, 2, 5 }).Bind(Operand.CuSeqlensK, new[] { 0, 2, 5 })
                        .Bind(Operand.Q, q).Bind(Operand.K, k8).Bind(Operand.V, v8)
                        .Bind(Operand.KScale, ks).Bind(Operand.VScale, vs).Bind(Operand.Out, o);
                    desc.Run(Op.Forward, args);
                    float[] want = new float[40];
                    using (var a32 = new AttentionArgs())
                    {
                        a32.Bind(Operand.CuSeqlensQ, new[] { 0, 2, 5 }).Bind(Operand.CuSeqlensK, new[] { 0, 2, 5 })
                           .Bind(Operand.Q, q).Bind(Operand.K, Dequantize(k8, ks, 4))
                           .Bind(Operand.V, Dequantize(v8, vs, 4)).Bind(Operand.Out, want);
                        desc.Run(Op.Forward, a32);
                    }
                    for (int i = 0; i < 40; i++) Util.AssertClose(want[i], o[i], "varlen i8 out[" + i + "]", 1e-6);
                    var e = Assert.Throws<ArgumentException>(
                        () => desc.Run(Op.Forward, args.Bind(Operand.VScale, new ReadOnlyMemory<float>(vs, 0, 9))));
                    Assert.AreEqual("v_scale", e.ParamName);
                    StringAssert.Contains("v_scale has 9 elements, needs at least 10", e.Message);
                }
            }
        }

        static long BytesPerCall(Action run)
        {
            for (int i = 0; i < 10; i++) run(); // JIT and thread pool warm-up
            long before = GC.GetAllocatedBytesForCurrentThread();
            for (int i = 0; i < 200; i++) run();
            return (GC.GetAllocatedBytesForCurrentThread() - before) / 200;
        }

        [Test]
        public void StoredAndBackwardRunsAllocateNothingPerCall()
        {
            float[] q = Util.Values(96, 1), k = Util.Values(80, 2), v = Util.Values(80, 3);
            float[] ks, vs;
            sbyte[] k8 = Attention.QuantizeI8(k, 4, out ks), v8 = Attention.QuantizeI8(v, 4, out vs);
            var o = new float[96];
            var lse = new float[24];
            using (var desc = Desc())
            {
                using (var args = new AttentionArgs())
                {
                    args.BindF16(Operand.Q, new ReadOnlyMemory<ushort>(Attention.ConvertF32ToF16(q)))
                        .Bind(Operand.K, k8).Bind(Operand.V, new ReadOnlyMemory<sbyte>(v8))
                        .Bind(Operand.KScale, ks).Bind(Operand.VScale, vs).Bind(Operand.Out, o);
                    Assert.AreEqual(0, BytesPerCall(() => desc.Run(Op.Forward, args)), "stored forward");
                }
                using (var args = new AttentionArgs())
                {
                    args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v).Bind(Operand.Out, o)
                        .Bind(Operand.Lse, lse);
                    desc.Run(Op.Forward, args);
                    args.Bind(Operand.DOut, q).Bind(Operand.DQ, new float[96]).Bind(Operand.DK, new float[80])
                        .Bind(Operand.DV, new float[80]);
                    Assert.AreEqual(0, BytesPerCall(() => desc.Run(Op.Backward, args)), "backward");
                }
            }
            // varlen: the pack's lengths (K, V and the scales) from the bound cu_seqlens
            using (var desc = new AttentionDesc.Builder().Dims(2, 2, 2, 4, 4, 4).Varlen().Build())
            using (var args = new AttentionArgs())
            {
                float[] k5 = Util.Values(40, 5);
                sbyte[] k58 = Attention.QuantizeI8(k5, 4, out ks);
                args.Bind(Operand.CuSeqlensQ, new[] { 0, 2, 5 }).Bind(Operand.CuSeqlensK, new[] { 0, 2, 5 })
                    .Bind(Operand.Q, k5).Bind(Operand.K, k58).Bind(Operand.KScale, ks)
                    .BindBF16(Operand.V, Attention.ConvertF32ToBF16(k5)).Bind(Operand.Out, new float[40]);
                Assert.AreEqual(0, BytesPerCall(() => desc.Run(Op.Forward, args)), "varlen stored forward");
            }
        }

        [Test]
        public void BadStorageBindsNameTheOperand()
        {
            using (var desc = Desc())
            using (var args = new AttentionArgs())
            {
                float[] q = Util.Values(96, 1), k = Util.Values(80, 2);
                // int8 is for K and V only; 16-bit for Q, K and V: refused at Bind, naming it.
                var e = Assert.Throws<ArgumentException>(() => args.Bind(Operand.Q, new sbyte[96]));
                Assert.AreEqual("data", e.ParamName);
                StringAssert.Contains("Operand.Q (q) cannot be bound with SByte data",
                                      e.Message);
                e = Assert.Throws<ArgumentException>(() => args.BindF16(Operand.Bias, new ushort[120]));
                StringAssert.Contains("Operand.Bias (bias) cannot be bound with UInt16 data",
                                      e.Message);
                e = Assert.Throws<ArgumentException>(() => args.BindBF16(Operand.Out, new ReadOnlyMemory<ushort>(new ushort[96])));
                StringAssert.Contains("Operand.Out (out) cannot be bound with read-only UInt16 data", e.Message);
                e = Assert.Throws<ArgumentException>(() => args.Bind(Operand.DK, new ReadOnlyMemory<sbyte>(new sbyte[80])));
                StringAssert.Contains("Operand.DK (dk)", e.Message);
                Assert.Throws<ArgumentOutOfRangeException>(() => args.BindF16((Operand)29, new ushort[1]));
                args.BindF16(Operand.Bias, null); // null unbinds, whatever the operand
                Assert.IsFalse(args.IsBound(Operand.Bias));

                var o = new float[96];
                ushort[] kh = Attention.ConvertF32ToF16(k);
                args.Bind(Operand.Q, q).BindF16(Operand.K, kh).BindF16(Operand.V, kh).Bind(Operand.Out, o);
                desc.Run(Op.Forward, args);
                // A 16-bit operand one element short: before the call, in the library's words.
                args.BindF16(Operand.V, new ReadOnlyMemory<ushort>(kh, 0, 79));
                e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args));
                Assert.AreEqual("v", e.ParamName);
                StringAssert.Contains("v has 79 elements, needs at least 80", e.Message);
                e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args.BindBF16(Operand.V, new ushort[0])));
                StringAssert.Contains("v has 0 elements, needs at least 80", e.Message);
                args.BindF16(Operand.V, kh);

                // int8 K without its scale: the library names k_scale.
                float[] ks;
                sbyte[] k8 = Attention.QuantizeI8(k, 4, out ks);
                args.Bind(Operand.K, k8);
                var ne = Assert.Throws<ArgumentNullException>(() => desc.Run(Op.Forward, args));
                Assert.AreEqual("k_scale", ne.ParamName);
                StringAssert.Contains("k_scale is NULL but k is int8", ne.Message);
                // A short scale, then a scale with an f16 K.
                args.Bind(Operand.KScale, new float[19]);
                e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args));
                StringAssert.Contains("k_scale has 19 elements, needs at least 20", e.Message);
                args.Bind(Operand.KScale, ks).BindF16(Operand.K, kh);
                e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args));
                Assert.AreEqual("k_scale", e.ParamName);
                StringAssert.Contains("k_scale is bound but k is not int8", e.Message);
                // The scales are float inputs: other element types are refused at Bind.
                e = Assert.Throws<ArgumentException>(() => args.Bind(Operand.VScale, new int[20]));
                StringAssert.Contains("Operand.VScale (v_scale) cannot be bound with Int32 data", e.Message);
            }
        }
    }

    [TestFixture]
    public class BackwardTests
    {
        // B=1, HQ=2, HKV=1, SQ=4, SK=6, D=8, causal bottom-right, bias and sinks.
        static AttentionDesc Desc()
        {
            return new AttentionDesc.Builder().Dims(1, 2, 1, 4, 6, 8).Causal(Causal.BottomRight).Build();
        }

        sealed class Case : IDisposable
        {
            public readonly AttentionDesc Desc = BackwardTests.Desc();
            public readonly AttentionArgs Args = new AttentionArgs();
            public readonly float[] Q = Util.Values(64, 1), K = Util.Values(48, 2), V = Util.Values(48, 3),
                                    Bias = Util.Values(48, 4), Sinks = { 0.5f, -1f }, Out = new float[64],
                                    Lse = new float[8], DOut = Util.Values(64, 5);

            public Case()
            {
                Args.Bind(Operand.Q, Q).Bind(Operand.K, K).Bind(Operand.V, V).Bind(Operand.Bias, Bias)
                    .Bind(Operand.Sinks, Sinks).Bind(Operand.Out, Out).Bind(Operand.Lse, Lse);
                Desc.Run(Op.Forward, Args);
            }

            public void Dispose()
            {
                Args.Dispose();
                Desc.Dispose();
            }
        }

        [Test]
        public void GradientsAreBitIdenticalBoundTogetherOrAlone()
        {
            // bw_bias_first_alibi_sinks of tests/vectors/backward.txt (bias broadcast over
            // batch and heads, softcap, standard ALiBi, sinks): every gradient bound together,
            // against the expected files within 1e-4 (VARIANTS.md), then each one alone, as a
            // Memory window of a bigger zeroed array: the same bits, nothing written around it.
            var c = Vectors.Line("backward.txt", "bw_bias_first_alibi_sinks");
            string[] grads = c["grads"].Split(',');
            CollectionAssert.AreEqual(Vectors.GradNames, grads, "every gradient");
            using (var desc = Vectors.Builder(c).Build())
            using (var args = new AttentionArgs())
            {
                Vectors.BindInputs(c, desc, args, false);
                var o = new float[desc.RequiredLen(Operand.Out)];
                var lse = new float[desc.RequiredLen(Operand.Lse)];
                args.Bind(Operand.Out, o).Bind(Operand.Lse, lse);
                desc.Run(Op.Forward, args);
                args.Bind(Operand.DOut, Vectors.Expected(desc, Operand.DOut, c, "dout"));
                var together = new float[grads.Length][];
                for (int g = 0; g < grads.Length; g++)
                {
                    together[g] = new float[desc.RequiredLen(Vectors.OperandOf(grads[g]))];
                    args.Bind(Vectors.OperandOf(grads[g]), together[g]);
                }
                desc.Run(Op.Backward, args);
                for (int g = 0; g < grads.Length; g++)
                {
                    Operand op = Vectors.OperandOf(grads[g]);
                    Vectors.Check(Vectors.Expected(desc, op, c, grads[g]), together[g], grads[g], 1e-4, false);
                    Assert.IsTrue(together[g].Any(x => x != 0), grads[g]);
                }

                // One gradient at a time, as a Memory window, gives the same bits.
                for (int g = 0; g < grads.Length; g++)
                {
                    foreach (string other in grads) args.Unbind(Vectors.OperandOf(other));
                    int n = together[g].Length;
                    var wide = new float[n + 12];
                    args.Bind(Vectors.OperandOf(grads[g]), new Memory<float>(wide, 5, n));
                    desc.Run(Op.Backward, args);
                    CollectionAssert.AreEqual(together[g], wide.Skip(5).Take(n).ToArray(), grads[g] + " alone");
                    Assert.IsTrue(wide.Take(5).Concat(wide.Skip(5 + n)).All(x => x == 0),
                                  grads[g] + ": nothing written around the window");
                }
            }
        }

        [Test]
        public void BadBackwardCallsNameTheOperand()
        {
            using (var c = new Case())
            {
                var dq = new float[64];
                // No dout: the library names it.
                c.Args.Bind(Operand.DQ, dq);
                var ne = Assert.Throws<ArgumentNullException>(() => c.Desc.Run(Op.Backward, c.Args));
                Assert.AreEqual("dout", ne.ParamName);
                StringAssert.Contains("dout is NULL", ne.Message);
                // No gradient bound.
                c.Args.Bind(Operand.DOut, c.DOut).Unbind(Operand.DQ);
                ne = Assert.Throws<ArgumentNullException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("nothing to compute", ne.Message);
                // Short dout and dq: before the call.
                c.Args.Bind(Operand.DQ, dq).Bind(Operand.DOut, new ReadOnlyMemory<float>(c.DOut, 0, 63));
                var e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                Assert.AreEqual("dout", e.ParamName);
                StringAssert.Contains("dout has 63 elements, needs at least 64", e.Message);
                c.Args.Bind(Operand.DOut, c.DOut).Bind(Operand.DQ, new Memory<float>(dq, 1, 63));
                e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("dq has 63 elements, needs at least 64", e.Message);
                c.Args.Bind(Operand.DQ, dq);
                // A gradient operand is an output: a read-only buffer is refused at Bind.
                e = Assert.Throws<ArgumentException>(() => c.Args.Bind(Operand.DV, new ReadOnlyMemory<float>(new float[48])));
                StringAssert.Contains("Operand.DV (dv) cannot be bound with read-only Single data", e.Message);
                // dbias without bias.
                c.Args.Bind(Operand.DBias, new float[48]).Unbind(Operand.Bias);
                e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("dbias is bound but bias is not", e.Message);
                c.Args.Unbind(Operand.DBias).Bind(Operand.Bias, c.Bias);
                // A gradient overlapping an input.
                c.Args.Bind(Operand.DQ, new Memory<float>(c.Q));
                e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("overlap", e.Message);
                c.Args.Bind(Operand.DQ, dq);
                c.Desc.Run(Op.Backward, c.Args);
                // 16-bit K is widened; int8 K is refused.
                c.Args.BindF16(Operand.K, Attention.ConvertF32ToF16(c.K));
                c.Desc.Run(Op.Backward, c.Args);
                float[] kScales;
                c.Args.Bind(Operand.K, Attention.QuantizeI8(c.K, 8, out kScales))
                    .Bind(Operand.KScale, kScales);
                var ae = Assert.Throws<AttentionException>(() => c.Desc.Run(Op.Backward, c.Args));
                Assert.AreEqual(Status.Unsupported, ae.Status);
                StringAssert.Contains("needs fp32, f16 or bf16 k (it is int8)", ae.Message);
            }
        }
    }

    // KvAppendArgs into a paged f16 cache, then decode; the backward with bfloat16 inputs; both
    // against float64 written plainly here.
    [TestFixture]
    public class TypedAppendTests
    {
        static double F16Value(ushort u)
        {
            int e = (u >> 10) & 0x1f, m = u & 0x3ff;
            double mag = e == 0 ? m * Math.Pow(2, -24) : (1024 + m) * Math.Pow(2, e - 25);
            return (u & 0x8000) != 0 ? -mag : mag;
        }

        // The binary16 nearest to x (|x| < 65504), ties to the even pattern, chosen in float64.
        static ushort F16Nearest(float x)
        {
            double a = Math.Abs((double)x);
            int lo = 0, hi = 0x7bff;
            while (lo < hi)
            {
                int mid = (lo + hi + 1) / 2;
                if (F16Value((ushort)mid) <= a)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            int up = lo + 1;
            double dl = a - F16Value((ushort)lo), dh = F16Value((ushort)up) - a;
            int r = dl < dh ? lo : dh < dl ? up : (lo & 1) != 0 ? up : lo;
            return (ushort)(r | (x < 0 ? 0x8000 : 0));
        }

        static double[] Attend64(double[] q, double[][] k, double[][] v, double scale)
        {
            var s = new double[k.Length];
            double m = double.NegativeInfinity, den = 0;
            for (int j = 0; j < k.Length; j++)
            {
                for (int e = 0; e < q.Length; e++)
                    s[j] += q[e] * k[j][e];
                s[j] *= scale;
                m = Math.Max(m, s[j]);
            }
            for (int j = 0; j < s.Length; j++)
            {
                s[j] = Math.Exp(s[j] - m);
                den += s[j];
            }
            var o = new double[v[0].Length];
            for (int j = 0; j < v.Length; j++)
                for (int e = 0; e < o.Length; e++)
                    o[e] += s[j] / den * v[j][e];
            return o;
        }

        [Test]
        public void PagedF16CacheFilledByKvAppendArgsThenDecoded()
        {
            const int B = 2, HQ = 4, HKV = 2, D = 16, P = 4, MaxPages = 3, NumPages = 6;
            int[] lens = { 6, 9 };
            int[] table = { 4, 3, -1, 2, 1, 0 };
            Func<int, int, int> slot = (b, j) => table[b * MaxPages + j / P] * P + j % P;
            var g = new Random(29);
            int rows = NumPages * P * HKV;
            var k16 = new ushort[rows * D];
            var v16 = new ushort[rows * D];
            for (int b = 0; b < B; b++)
                for (int j = 0; j < lens[b] - 1; j++)
                    for (int h = 0; h < HKV; h++)
                        for (int e = 0; e < D; e++)
                        {
                            int r = slot(b, j) * HKV + h;
                            k16[r * D + e] = F16Nearest((float)(4 * g.NextDouble() - 2));
                            v16[r * D + e] = F16Nearest((float)(4 * g.NextDouble() - 2));
                        }
            var newK = new float[B * HKV * D];
            var newV = new float[B * HKV * D];
            var q = new float[B * HQ * D];
            for (int e = 0; e < newK.Length; e++)
            {
                newK[e] = (float)(4 * g.NextDouble() - 2);
                newV[e] = (float)(4 * g.NextDouble() - 2);
            }
            for (int e = 0; e < q.Length; e++)
                q[e] = (float)(2 * g.NextDouble() - 1);
            var before = (ushort[])k16.Clone();
            var outp = new float[B * HQ * D];
            using (var desc = new AttentionDesc.Builder().Dims(B, HQ, HKV, 1, MaxPages * P, D)
                       .PageSize(P).Causal(Causal.BottomRight).Build())
            using (var args = new AttentionArgs())
            {
                args.BindF16(Operand.K, k16).BindF16(Operand.V, v16).Bind(Operand.NewK, newK)
                    .Bind(Operand.NewV, newV).Bind(Operand.SeqLensK, lens)
                    .Bind(Operand.BlockTable, table);
                desc.KvAppendArgs(args);
                for (int b = 0; b < B; b++)
                    for (int h = 0; h < HKV; h++)
                    {
                        int r = slot(b, lens[b] - 1) * HKV + h;
                        for (int e = 0; e < D; e++)
                        {
                            Assert.AreEqual(F16Nearest(newK[(b * HKV + h) * D + e]), k16[r * D + e],
                                            "k row " + r + " element " + e);
                            Assert.AreEqual(F16Nearest(newV[(b * HKV + h) * D + e]), v16[r * D + e]);
                            before[r * D + e] = k16[r * D + e];
                        }
                    }
                CollectionAssert.AreEqual(before, k16, "only the destination rows are written");
                args.Bind(Operand.Q, q).Bind(Operand.Out, outp);
                desc.Run(Op.Forward, args);
            }
            for (int b = 0; b < B; b++)
                for (int h = 0; h < HQ; h++)
                {
                    int kvh = h / (HQ / HKV);
                    var kk = new double[lens[b]][];
                    var vv = new double[lens[b]][];
                    for (int j = 0; j < lens[b]; j++)
                    {
                        int r = slot(b, j) * HKV + kvh;
                        kk[j] = new double[D];
                        vv[j] = new double[D];
                        for (int e = 0; e < D; e++)
                        {
                            kk[j][e] = F16Value(k16[r * D + e]);
                            vv[j][e] = F16Value(v16[r * D + e]);
                        }
                    }
                    var qr = new double[D];
                    for (int e = 0; e < D; e++)
                        qr[e] = q[(b * HQ + h) * D + e];
                    double[] want = Attend64(qr, kk, vv, 1 / Math.Sqrt(D));
                    for (int e = 0; e < D; e++)
                        Assert.AreEqual(want[e], outp[(b * HQ + h) * D + e], 1e-5,
                                        "out[" + b + "][" + h + "][" + e + "]");
                }
        }

        [Test]
        public void KvAppendArgsErrorsNameTheOperand()
        {
            using (var desc = new AttentionDesc.Builder().Dims(1, 1, 1, 1, 4, 4).Build())
            using (var args = new AttentionArgs())
            {
                var k = new ushort[16];
                var v = new ushort[16];
                args.BindF16(Operand.K, k).BindF16(Operand.V, v).Bind(Operand.NewK, new float[4])
                    .Bind(Operand.SeqLensK, new[] { 2 }).BindBF16(Operand.NewV, new ushort[4]);
                var e = Assert.Throws<ArgumentException>(() => desc.KvAppendArgs(args));
                StringAssert.Contains("new_v is bf16 but v is f16", e.Message);
                args.BindF16(Operand.NewV, new ushort[] { 0x3C00, 0x3C00, 0x3C00, 0x3C00 });
                desc.KvAppendArgs(args);
                Assert.AreEqual(0x3C00, v[4]);
                Assert.AreEqual(0, v[0]);
                Assert.Throws<ArgumentNullException>(() => desc.KvAppendArgs(null));
            }
        }

        // float64 gradients of out = softmax(scale q k^T) v, one head, every key visible.
        static double[][][] Backward64(double[][] q, double[][] k, double[][] v, double[][] dout,
                                       double scale)
        {
            int n = q.Length, m = k.Length, d = q[0].Length;
            Func<int, double[][]> zeros = r => Enumerable.Range(0, r).Select(_ => new double[d]).ToArray();
            double[][] dq = zeros(n), dk = zeros(m), dv = zeros(m);
            for (int i = 0; i < n; i++)
            {
                var p = new double[m];
                double mx = double.NegativeInfinity, den = 0, dsum = 0;
                for (int j = 0; j < m; j++)
                {
                    for (int e = 0; e < d; e++)
                        p[j] += q[i][e] * k[j][e];
                    p[j] *= scale;
                    mx = Math.Max(mx, p[j]);
                }
                for (int j = 0; j < m; j++)
                {
                    p[j] = Math.Exp(p[j] - mx);
                    den += p[j];
                }
                var dp = new double[m];
                for (int j = 0; j < m; j++)
                {
                    p[j] /= den;
                    for (int e = 0; e < d; e++)
                    {
                        dp[j] += dout[i][e] * v[j][e];
                        dv[j][e] += p[j] * dout[i][e];
                    }
                    dsum += p[j] * dp[j];
                }
                for (int j = 0; j < m; j++)
                {
                    double ds = p[j] * (dp[j] - dsum) * scale;
                    for (int e = 0; e < d; e++)
                    {
                        dq[i][e] += ds * k[j][e];
                        dk[j][e] += ds * q[i][e];
                    }
                }
            }
            return new[] { dq, dk, dv };
        }

        [Test]
        public void BackwardWithBF16InputsMatchesFloat64OverTheWidenedValues()
        {
            const int B = 2, H = 3, SQ = 5, SK = 7, D = 8;
            var g = new Random(16);
            int[] rowsOf = { SQ, SK, SK, SQ };
            var bits = new ushort[4][];
            var wide = new float[4][];
            for (int x = 0; x < 4; x++)
            {
                var raw = new float[B * H * rowsOf[x] * D];
                for (int e = 0; e < raw.Length; e++)
                    raw[e] = (float)(3 * g.NextDouble() - 1.5);
                bits[x] = Attention.ConvertF32ToBF16(raw);
                wide[x] = Attention.ConvertBF16ToF32(bits[x]);
            }
            var outp = new float[B * H * SQ * D];
            var lse = new float[B * H * SQ];
            var grads = new[] { new float[B * H * SQ * D], new float[B * H * SK * D],
                                new float[B * H * SK * D] };
            using (var desc = new AttentionDesc.Builder().Dims(B, H, H, SQ, SK, D).Build())
            using (var args = new AttentionArgs())
            {
                args.BindBF16(Operand.Q, bits[0]).BindBF16(Operand.K, bits[1])
                    .BindBF16(Operand.V, bits[2]).Bind(Operand.Out, outp).Bind(Operand.Lse, lse);
                desc.Run(Op.Forward, args);
                args.BindBF16(Operand.DOut, bits[3]).Bind(Operand.DQ, grads[0])
                    .Bind(Operand.DK, grads[1]).Bind(Operand.DV, grads[2]);
                desc.Run(Op.Backward, args);
            }
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                {
                    var inp = new double[4][][];
                    for (int x = 0; x < 4; x++)
                    {
                        inp[x] = new double[rowsOf[x]][];
                        for (int i = 0; i < rowsOf[x]; i++)
                        {
                            inp[x][i] = new double[D];
                            for (int e = 0; e < D; e++)
                                inp[x][i][e] = wide[x][((b * H + h) * rowsOf[x] + i) * D + e];
                        }
                    }
                    double[][][] want = Backward64(inp[0], inp[1], inp[2], inp[3], 1 / Math.Sqrt(D));
                    for (int x = 0; x < 3; x++)
                        for (int i = 0; i < rowsOf[x]; i++)
                            for (int e = 0; e < D; e++)
                                Assert.AreEqual(want[x][i][e],
                                                grads[x][((b * H + h) * rowsOf[x] + i) * D + e], 1e-5,
                                                "gradient " + x + " [" + b + "][" + h + "][" + i + "][" + e + "]");
                }
        }
    }
}
