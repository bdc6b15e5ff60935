// NUnit tests of the storage types: f16 / bf16 / int8 Q, K, V bound through
// AttentionArgs.BindF16, BindBF16, Bind(sbyte[]) with Operand.KScale / VScale equal the float32
// call over the widened values; int8 scales of a varlen pack, no allocation per call, and bad
// binds naming the operand.
// The shared vectors (storage.txt, backward.txt) run in VariantVectorTests.cs.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
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
                Assert.Throws<ArgumentOutOfRangeException>(() => args.BindF16((Operand)255, new ushort[1]));
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
}
