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
                Assert.AreEqual("which", e.ParamName);
                StringAssert.Contains("Operand.Q (q) cannot be bound with Bind(sbyte[]) (int8 storage is for K and V)",
                                      e.Message);
                e = Assert.Throws<ArgumentException>(() => args.BindF16(Operand.Bias, new ushort[120]));
                StringAssert.Contains("Operand.Bias (bias) cannot be bound with BindF16 (16-bit storage is for Q, K and V)",
                                      e.Message);
                e = Assert.Throws<ArgumentException>(() => args.BindBF16(Operand.Out, new ReadOnlyMemory<ushort>(new ushort[96])));
                StringAssert.Contains("Operand.Out (out) cannot be bound with BindBF16", e.Message);
                e = Assert.Throws<ArgumentException>(() => args.Bind(Operand.DK, new ReadOnlyMemory<sbyte>(new sbyte[80])));
                StringAssert.Contains("Operand.DK (dk)", e.Message);
                Assert.Throws<ArgumentOutOfRangeException>(() => args.BindF16((Operand)27, new ushort[1]));
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
                StringAssert.Contains("Operand.VScale (v_scale) takes float[]", e.Message);
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
                StringAssert.Contains("Operand.DV (dv) takes an output float[]", e.Message);
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
                // 16-bit K: the backward needs fp32 Q, K, V.
                c.Args.BindF16(Operand.K, Attention.ConvertF32ToF16(c.K));
                var ae = Assert.Throws<AttentionException>(() => c.Desc.Run(Op.Backward, c.Args));
                Assert.AreEqual(Status.Unsupported, ae.Status);
                StringAssert.Contains("needs fp32 k (it is f16)", ae.Message);
            }
        }
    }
}
