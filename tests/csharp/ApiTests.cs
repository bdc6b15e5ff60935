// NUnit tests of the C# face's 0.1 surface: pinned enum values, version, ISA and threads, the
// seed example, Attention.Simple and the AttentionDesc overloads on the shared vectors, strides.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ApiTests
    {
        [Test]
        public void EnumValuesArePinned()
        {
            Assert.AreEqual(0, (int)Status.Ok);
            Assert.AreEqual(1, (int)Status.NullPointer);
            Assert.AreEqual(2, (int)Status.InvalidArgument);
            Assert.AreEqual(3, (int)Status.OutOfMemory);
            Assert.AreEqual(4, (int)Status.Unsupported);
            Assert.AreEqual(5, (int)Status.Internal);
            Assert.AreEqual(0, (int)Causal.None);
            Assert.AreEqual(1, (int)Causal.TopLeft);
            Assert.AreEqual(2, (int)Causal.BottomRight);
            var ops = new[] { Operand.Q, Operand.K, Operand.V, Operand.Out, Operand.Lse,
                              Operand.Weights, Operand.KeyValid, Operand.Allowed };
            for (int i = 0; i < ops.Length; i++) Assert.AreEqual(i, (int)ops[i]);
            Assert.AreEqual("ok", Attention.StatusString(Status.Ok));
            Assert.AreEqual("null pointer", Attention.StatusString(Status.NullPointer));
        }

        [Test]
        public void VersionIsaAndThreads()
        {
            StringAssert.IsMatch(@"^\d+\.\d+\.\d+$", Attention.Version);
            string[] parts = Attention.Version.Split('.');
            Assert.AreEqual(int.Parse(parts[0]) * 10000 + int.Parse(parts[1]) * 100
                                + int.Parse(parts[2]),
                            Attention.VersionNumber);
            CollectionAssert.Contains(new[] { "scalar", "sse2", "avx2", "avx512", "avx512fp16" }, Attention.Isa);
            Assert.GreaterOrEqual(Attention.NumThreads, 1);
        }

        [Test]
        public void SeedExample()
        {
            float[] q = { 0, 0, 0 }, k = { 1, 2, 3 }, v = { 10, 20, 30 };
            float[] output = Attention.Simple(q, k, v, 3, 1, true);
            Assert.AreEqual(3, output.Length);
            Assert.AreEqual(15.0f, output[1]); // out[1][0]
            Util.AssertClose(10.0, output[0], "out[0][0]");
            Util.AssertClose(20.0, output[2], "out[2][0]");

            using (var desc = new AttentionDesc.Builder().SeqLen(3).HeadDim(1)
                                  .Causal(Causal.TopLeft).Build())
            {
                float[] w = desc.Weights(q, k);
                double[] expected = { 1, 0, 0, 0.5, 0.5, 0, 1 / 3.0, 1 / 3.0, 1 / 3.0 };
                for (int i = 0; i < 9; i++) Util.AssertClose(expected[i], w[i], "w" + i);
                Assert.AreEqual(0.0f, w[1]);
                Assert.AreEqual(0.0f, w[2]);
                Assert.AreEqual(0.0f, w[5]);
                float[] o2 = desc.Forward(q, k, v);
                CollectionAssert.AreEqual(output, o2, "simple and descriptor agree bit for bit");
            }
        }

        [Test]
        public void SimpleWithPadMaskMatchesSharedVectors()
        {
            // Attention.Simple is one [n][d] head: every (batch, head) slice of the index.txt
            // cases it can express (seq_q = seq_k, no or top-left causal, the default scale,
            // contiguous BHSD, no allowed mask; key_valid[b] as the pad mask) against the
            // expected rows. Padded K/V rows of the files are NaN: never read.
            int slices = 0, padded = 0;
            foreach (IndexCase c in IndexCase.All())
            {
                if (c.SQ != c.SK || c.Causal == 2 || c.Scale.HasValue || !c.DefaultStrides
                    || c.Allowed != null)
                    continue;
                int n = c.SQ, d = c.D, group = c.HQ / c.HKV;
                for (int b = 0; b < c.B; b++)
                    for (int h = 0; h < c.HQ; h++)
                    {
                        string what = c.Name + " b" + b + " h" + h;
                        float[] q = new float[n * d], k = new float[n * d], v = new float[n * d];
                        Array.Copy(c.Q, (b * c.HQ + h) * n * d, q, 0, n * d);
                        Array.Copy(c.K, (b * c.HKV + h / group) * n * d, k, 0, n * d);
                        Array.Copy(c.V, (b * c.HKV + h / group) * n * d, v, 0, n * d);
                        bool[] pad = null;
                        if (c.KeyValid != null)
                        {
                            pad = new bool[n];
                            Array.Copy(c.KeyValid, b * n, pad, 0, n);
                            padded++;
                        }
                        float[] want = new float[n * d];
                        Array.Copy(c.Out, (b * c.HQ + h) * n * d, want, 0, n * d);
                        float[] got = Attention.Simple(q, k, v, n, d, c.Causal == 1, pad);
                        Assert.AreEqual(n * d, got.Length, what);
                        Vectors.Check(want, got, what + " out");
                        var into = Util.Values(n * d, 9); // overwritten
                        Attention.Simple(q, k, v, n, d, c.Causal == 1, pad, into);
                        CollectionAssert.AreEqual(got, into, what + " into");
                        slices++;
                    }
            }
            Assert.GreaterOrEqual(slices, 20, "slices run");
            Assert.GreaterOrEqual(padded, 5, "slices with a pad mask");
        }

        [Test]
        public void DescriptorOverloadsMatchSharedVectors()
        {
            // Every index.txt case through the step-by-step builder (Batch, Heads, SeqLen,
            // HeadDim) and the allocating overloads Forward(q, k, v, keyValid, allowed) and
            // Weights(q, k, keyValid, allowed); SharedVectorTests runs the Dims builder and the
            // overloads that write into the caller's arrays.
            foreach (IndexCase c in IndexCase.All())
                using (var desc = c.Configure(AttentionDesc.CreateBuilder().Batch(c.B)
                                                  .Heads(c.HQ, c.HKV).SeqLen(c.SQ, c.SK)
                                                  .HeadDim(c.D)).Build())
                {
                    c.CheckLengths(desc);
                    Assert.AreEqual((Causal)c.Causal, desc.Causal, c.Name);
                    Assert.AreEqual(c.B, desc.Batch, c.Name);
                    Assert.AreEqual(c.HQ, desc.HeadsQ, c.Name);
                    Assert.AreEqual(c.HKV, desc.HeadsKv, c.Name);
                    Assert.AreEqual(c.SQ, desc.SeqQ, c.Name);
                    Assert.AreEqual(c.SK, desc.SeqK, c.Name);
                    Assert.AreEqual(c.D, desc.HeadDim, c.Name);
                    if (c.Scale.HasValue) Assert.AreEqual(c.Scale.Value, desc.Scale, c.Name);
                    float[] output = desc.Forward(c.Q, c.K, c.V, c.KeyValid, c.Allowed);
                    Vectors.Check(c.Out, output, c.Name + " out");
                    Assert.AreEqual(c.Out.Length, output.Length, c.Name + " out length");
                    float[] w = desc.Weights(c.Q, c.K, c.KeyValid, c.Allowed);
                    Vectors.Check(c.Weights, w, c.Name + " weights");
                    Assert.AreEqual(c.Weights.Length, w.Length, c.Name + " weights length");
                    // Longer arrays than required are fine; the tails are left alone.
                    var longer = new float[output.Length + 3];
                    longer[output.Length] = 42;
                    var lse = new float[c.Lse.Length + 2];
                    lse[c.Lse.Length + 1] = 43;
                    desc.Forward(c.Q, c.K, c.V, c.KeyValid, c.Allowed, longer, lse);
                    Assert.AreEqual(42f, longer[output.Length], c.Name);
                    Assert.AreEqual(43f, lse[c.Lse.Length + 1], c.Name);
                    CollectionAssert.AreEqual(output, longer.Take(output.Length).ToArray(), c.Name);
                    Vectors.Check(c.Lse, lse, c.Name + " lse");
                    if (c.KeyValid == null && c.Allowed == null)
                        CollectionAssert.AreEqual(output, desc.Forward(c.Q, c.K, c.V), c.Name);
                }
        }

        [Test]
        public void BshdStridesMatchContiguous()
        {
            int B = 2, H = 3, S = 4, D = 5;
            float[] q = Util.Values(B * H * S * D, 7), k = Util.Values(B * H * S * D, 8),
                    v = Util.Values(B * H * S * D, 9);
            Func<float[], float[]> toBshd = a =>
            {
                var r = new float[a.Length];
                for (int b = 0; b < B; b++)
                    for (int h = 0; h < H; h++)
                        for (int s = 0; s < S; s++)
                            for (int d = 0; d < D; d++)
                                r[((b * S + s) * H + h) * D + d] = a[((b * H + h) * S + s) * D + d];
                return r;
            };
            float[] expected;
            using (var desc = new AttentionDesc.Builder().Dims(B, H, H, S, S, D)
                                  .Causal(Causal.TopLeft).Build())
                expected = desc.Forward(q, k, v);
            var bldr = new AttentionDesc.Builder().Dims(B, H, H, S, S, D).Causal(Causal.TopLeft);
            foreach (Operand op in new[] { Operand.Q, Operand.K, Operand.V, Operand.Out })
                bldr.Strides(op, S * H * D, D, H * D);
            using (var desc = bldr.Build())
            {
                float[] got = desc.Forward(toBshd(q), toBshd(k), toBshd(v));
                CollectionAssert.AreEqual(toBshd(expected), got);
            }
        }
    }
}
