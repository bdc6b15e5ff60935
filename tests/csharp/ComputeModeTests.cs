// The fast compute modes through the builder: a prefill call (GQA 4/2, 64 queries, 96 keys,
// head_dim 64, bottom-right causal, gaussian inputs) in Int8 against a float64 reference, per
// (batch, head): cosine >= 0.9995 and relative L1 <= 0.01; Int8's bits differ from Exact's (the
// integer path ran); Bf16 gives Exact's bits (no CPU this version supports has a bf16 path).
using System;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ComputeModeTests
    {
        const int B = 1, HQ = 4, HKV = 2, SQ = 64, SK = 96, D = 64;
        readonly float[] q, k, v;

        // Gaussian floats (Box-Muller) from a fixed seed.
        static float[] Gaussian(Random g, int n)
        {
            var a = new float[n];
            for (int i = 0; i < n; i++)
            {
                double u1 = 1.0 - g.NextDouble(), u2 = g.NextDouble();
                a[i] = (float)(Math.Sqrt(-2 * Math.Log(u1)) * Math.Cos(2 * Math.PI * u2));
            }
            return a;
        }

        public ComputeModeTests()
        {
            var g = new Random(3302);
            q = Gaussian(g, B * HQ * SQ * D);
            k = Gaussian(g, B * HKV * SK * D);
            v = Gaussian(g, B * HKV * SK * D);
        }

        static int Bits(float x)
        {
            return BitConverter.ToInt32(BitConverter.GetBytes(x), 0);
        }

        float[] Forward(Compute mode)
        {
            using (var desc = new AttentionDesc.Builder().Dims(B, HQ, HKV, SQ, SK, D)
                       .Causal(Causal.BottomRight).Compute(mode).Build())
                return desc.Forward(q, k, v);
        }

        // Row i of head h of the float64 reference: query i sees keys 0 .. i + SK - SQ.
        double[] Reference(int b, int h, int i)
        {
            int hk = h / (HQ / HKV), keys = i + SK - SQ + 1;
            var qi = new double[D];
            var kj = new double[keys][];
            var vj = new double[keys][];
            for (int e = 0; e < D; e++) qi[e] = q[((b * HQ + h) * SQ + i) * D + e];
            for (int j = 0; j < keys; j++)
            {
                kj[j] = new double[D];
                vj[j] = new double[D];
                for (int e = 0; e < D; e++)
                {
                    kj[j][e] = k[((b * HKV + hk) * SK + j) * D + e];
                    vj[j][e] = v[((b * HKV + hk) * SK + j) * D + e];
                }
            }
            return TypedAppendTests.Attend64(qi, kj, vj, 1 / Math.Sqrt(D));
        }

        [Test]
        public void Int8PrefillWithinBoundOfFloat64Reference()
        {
            float[] got = Forward(Compute.Int8);
            for (int b = 0; b < B; b++)
                for (int h = 0; h < HQ; h++)
                {
                    double dot = 0, nGot = 0, nRef = 0, l1 = 0, l1Ref = 0;
                    for (int i = 0; i < SQ; i++)
                    {
                        double[] r = Reference(b, h, i);
                        for (int e = 0; e < D; e++)
                        {
                            double o = got[((b * HQ + h) * SQ + i) * D + e];
                            dot += o * r[e];
                            nGot += o * o;
                            nRef += r[e] * r[e];
                            l1 += Math.Abs(o - r[e]);
                            l1Ref += Math.Abs(r[e]);
                        }
                    }
                    string at = "batch " + b + " head " + h;
                    Assert.GreaterOrEqual(dot / Math.Sqrt(nGot * nRef), 0.9995, at + ": cosine");
                    Assert.LessOrEqual(l1 / l1Ref, 0.01, at + ": relative L1");
                }
        }

        [Test]
        public void Int8PrefillTakesTheIntegerPath()
        {
            // The integer Q.K^T has a kernel on every CPU (on x86 pmaddwd, from SSE2 up): its
            // rounding shows in the output.
            float[] int8 = Forward(Compute.Int8), exact = Forward(Compute.Exact);
            int differ = 0;
            for (int i = 0; i < exact.Length; i++)
                if (Bits(int8[i]) != Bits(exact[i]))
                    differ++;
            Assert.Greater(differ, 0, "Int8 gave Exact's bits: the integer path did not run");
        }

        [Test]
        public void Bf16PrefillIsExactWithoutABf16Unit()
        {
            float[] bf16 = Forward(Compute.Bf16), exact = Forward(Compute.Exact);
            Assert.AreEqual(exact.Length, bf16.Length);
            for (int i = 0; i < exact.Length; i++)
                Assert.AreEqual(Bits(exact[i]), Bits(bf16[i]), "Bf16 differs from Exact at " + i);
        }
    }
}
