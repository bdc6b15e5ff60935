// NUnit tests of fp8 K / V caches: the converters against the formats' definitions, a paged
// cache filled by KvAppendArgs and a decode step over it against float64, and the errors. The
// references are float64, written plainly here.
using System;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class StorageFp8Tests
    {
        // The value of a finite code: E4M3 (bias 7, 3 mantissa bits) or E5M2 (bias 15, 2 bits).
        static double Fp8Value(Dtype format, byte code)
        {
            bool e4 = format == Dtype.Fp8E4m3;
            int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
            int e = (code & 0x7f) >> mbits, m = code & ((1 << mbits) - 1);
            double mag = e == 0 ? m * Math.Pow(2, 1 - bias - mbits)
                                : ((1 << mbits) + m) * Math.Pow(2, e - bias - mbits);
            return (code & 0x80) != 0 ? -mag : mag;
        }

        // The code nearest to x (within the finite range), ties to the even code, by search.
        static byte Fp8Nearest(Dtype format, float x)
        {
            int top = format == Dtype.Fp8E4m3 ? 0x7e : 0x7b;
            double a = Math.Abs((double)x);
            int best = 0;
            for (int c = 1; c <= top; c++)
            {
                double dc = Math.Abs(Fp8Value(format, (byte)c) - a);
                double db = Math.Abs(Fp8Value(format, (byte)best) - a);
                if (dc < db || (dc == db && (c & 1) == 0))
                    best = c;
            }
            return (byte)(x < 0 && best != 0 ? best | 0x80 : best);
        }

        [Test]
        public void ConvertersMatchTheFormatsDefinitions()
        {
            var g = new Random(8);
            foreach (Dtype f in new[] { Dtype.Fp8E4m3, Dtype.Fp8E5m2 })
            {
                float scale = f == Dtype.Fp8E4m3 ? 0.01f : 1f;
                var src = new float[60];
                for (int i = 0; i < src.Length; i++)
                    src[i] = (float)(6 * g.NextDouble() - 3);
                byte[] codes = Attention.QuantizeFp8(src, f, scale);
                float[] back = Attention.DequantizeFp8(codes, f, scale);
                for (int i = 0; i < src.Length; i++)
                {
                    Assert.AreEqual(Fp8Nearest(f, src[i] / scale), codes[i], f + " code of " + src[i]);
                    Assert.AreEqual((float)(Fp8Value(f, codes[i]) * scale), back[i], f + " value");
                }
                // the span form with rows x dim writes the same codes into a window
                var part = new byte[src.Length + 4];
                Attention.QuantizeFp8(src, 3, 20, f, scale, new Span<byte>(part, 4, src.Length));
                Assert.AreEqual(codes[59], part[63]);
            }
        }

        [Test]
        public void PagedFp8CacheFilledByKvAppendArgsThenDecoded()
        {
            // pages token-major [num_pages][page][heads_kv][d], a reversed block table; E4M3 with
            // one scale per tensor (strides 0, 0, 0), E5M2 with none (= 1)
            const int B = 2, HQ = 4, HKV = 2, D = 16, P = 4, MaxPages = 3, NumPages = 6;
            foreach (Dtype f in new[] { Dtype.Fp8E4m3, Dtype.Fp8E5m2 })
            {
                float ks = f == Dtype.Fp8E4m3 ? 0.0078125f : 1f, vs = f == Dtype.Fp8E4m3 ? 0.01f : 1f;
                int[] lens = { 6, 9 };
                int[] table = { 4, 3, -1, 2, 1, 0 };
                Func<int, int, int> slot = (b, j) => table[b * MaxPages + j / P] * P + j % P;
                var g = new Random(34);
                int rows = NumPages * P * HKV;
                var kc = new byte[rows * D];
                var vc = new byte[rows * D];
                for (int b = 0; b < B; b++)
                    for (int j = 0; j < lens[b] - 1; j++)
                        for (int h = 0; h < HKV; h++)
                            for (int e = 0; e < D; e++)
                            {
                                int r = slot(b, j) * HKV + h;
                                kc[r * D + e] = Fp8Nearest(f, (float)(4 * g.NextDouble() - 2) / ks);
                                vc[r * D + e] = Fp8Nearest(f, (float)(4 * g.NextDouble() - 2) / vs);
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
                var outp = new float[B * HQ * D];
                var builder = new AttentionDesc.Builder().Dims(B, HQ, HKV, 1, MaxPages * P, D)
                                  .PageSize(P).Causal(Causal.BottomRight);
                if (ks != 1f)
                    builder.Strides(Operand.KScale, 0, 0, 0).Strides(Operand.VScale, 0, 0, 0);
                using (var desc = builder.Build())
                using (var args = new AttentionArgs())
                {
                    args.BindFp8(Operand.K, f, kc).BindFp8(Operand.V, f, vc).Bind(Operand.NewK, newK)
                        .Bind(Operand.NewV, newV).Bind(Operand.SeqLensK, lens)
                        .Bind(Operand.BlockTable, table);
                    if (ks != 1f)
                        args.Bind(Operand.KScale, new[] { ks }).Bind(Operand.VScale, new[] { vs });
                    desc.KvAppendArgs(args);
                    for (int b = 0; b < B; b++)
                        for (int h = 0; h < HKV; h++)
                        {
                            int r = slot(b, lens[b] - 1) * HKV + h;
                            for (int e = 0; e < D; e++)
                            {
                                int i = (b * HKV + h) * D + e;
                                Assert.AreEqual(Fp8Nearest(f, newK[i] / ks), kc[r * D + e], f + " k row " + r);
                                Assert.AreEqual(Fp8Nearest(f, newV[i] / vs), vc[r * D + e], f + " v row " + r);
                            }
                        }
                    args.Bind(Operand.Q, q).Bind(Operand.Out, outp);
                    desc.Run(Op.Forward, args);
                }
                TypedAppendTests.CheckPagedDecode(f.ToString(), outp, q, lens, HQ, HKV, D, slot,
                    (isV, r, e) => isV ? (float)(Fp8Value(f, vc[r * D + e]) * vs)
                                       : (float)(Fp8Value(f, kc[r * D + e]) * ks));
            }
        }

        [Test]
        public void Fp8ErrorsNameTheArgument()
        {
            using (var desc = new AttentionDesc.Builder().Dims(1, 1, 1, 1, 4, 8).Build())
            using (var args = new AttentionArgs())
            {
                var e = Assert.Throws<ArgumentException>(() => args.BindFp8(Operand.K, Dtype.I8, new byte[32]));
                StringAssert.Contains("fmt (3) is not an fp8 format", e.Message);
                Assert.Throws<ArgumentException>(() => args.BindFp8(Operand.Q, Dtype.Fp8E4m3, new byte[32]));
                args.BindFp8(Operand.K, Dtype.Fp8E4m3, new byte[31]).BindFp8(Operand.V, Dtype.Fp8E4m3, new byte[32])
                    .Bind(Operand.Q, new float[8]).Bind(Operand.Out, new float[8]);
                e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args));
                StringAssert.Contains("k has 31", e.Message);
            }
            var src = new float[16];
            var a = Assert.Throws<ArgumentException>(
                () => Attention.QuantizeFp8(src, 2, 8, Dtype.Fp8E4m3, 1f, new byte[15]));
            StringAssert.Contains("dst", a.Message);
            a = Assert.Throws<ArgumentException>(() => Attention.QuantizeFp8(src, Dtype.Fp8E5m2, 0f));
            StringAssert.Contains("scale (0)", a.Message);
            a = Assert.Throws<ArgumentException>(() => Attention.QuantizeFp8(src, Dtype.F16, 1f));
            StringAssert.Contains("fmt (1) is not an fp8 format", a.Message);
            src[9] = float.NaN;
            a = Assert.Throws<ArgumentException>(() => Attention.QuantizeFp8(src, 2, 8, Dtype.Fp8E4m3, 1f, new byte[16]));
            StringAssert.Contains("row 1", a.Message);
            Assert.Throws<ArgumentNullException>(() => Attention.DequantizeFp8(null, Dtype.Fp8E4m3, 1f));
        }
    }
}
