// NUnit 2.6 tests of the C# binding (LibAttn), run by ctest as csharp_tests:
//   nunit-console -nologo -noshadow LibAttn.Tests.dll
// Environment (set by cmake/csharp.cmake): ATTN_VECTORS_DIR = tests/vectors (required),
// ATTN_XLANG_DIR = where csharp.bin is written for the cross-language byte comparison.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Threading;
using NUnit.Framework;

namespace LibAttn.Tests
{
    static class Util
    {
        // |got - expected| <= rel * max(1, |expected|) (rel 1e-5 unless told); infinities must
        // match exactly.
        public static void AssertClose(double expected, float got, string what, double rel = 1e-5)
        {
            if (double.IsInfinity(expected) || float.IsInfinity(got))
            {
                Assert.AreEqual(expected, (double)got, what);
                return;
            }
            double tol = rel * Math.Max(1.0, Math.Abs(expected));
            if (float.IsNaN(got) || Math.Abs(got - expected) > tol)
                Assert.Fail("{0}: got {1:R}, expected {2:R} (tolerance {3:R})", what, got,
                            expected, tol);
        }

        public static float[] Values(int n, int salt)
        {
            var r = new float[n];
            for (int i = 0; i < n; i++)
                r[i] = ((i * 37 + salt * 101) % 29) / 14.0f - 1.0f;
            return r;
        }

        public static float[] ReadF32(string path)
        {
            byte[] bytes = File.ReadAllBytes(path);
            Assert.AreEqual(0, bytes.Length % 4, path + ": not a whole number of floats");
            var r = new float[bytes.Length / 4];
            Buffer.BlockCopy(bytes, 0, r, 0, bytes.Length);
            return r;
        }

        public static bool[] ReadU8(string path)
        {
            return File.ReadAllBytes(path).Select(x => x != 0).ToArray();
        }
    }

    // One case of index.txt (the 0.1 vectors, read by Vectors.Lines): its dimensions, its
    // inputs and its expected outputs.
    sealed class IndexCase
    {
        public readonly string Name;
        public readonly int B, HQ, HKV, SQ, SK, D, Causal;
        public readonly float? Scale;                 // null: the default 1/sqrt(head_dim)
        public readonly string[] Strides = new string[4]; // q, k, v, out: "B,H,R" or null
        public readonly float[] Q, K, V, Out, Lse, Weights;
        public readonly bool[] KeyValid, Allowed;     // null: not given

        public static readonly Operand[] StrideOps = { Operand.Q, Operand.K, Operand.V, Operand.Out };
        static readonly string[] StrideKeys = { "q_strides", "k_strides", "v_strides", "out_strides" };

        public IndexCase(Dictionary<string, string> c)
        {
            Func<string, int> I = key => int.Parse(c[key], CultureInfo.InvariantCulture);
            Name = c["name"];
            B = I("batch"); HQ = I("heads_q"); HKV = I("heads_kv"); SQ = I("seq_q");
            SK = I("seq_k"); D = I("head_dim"); Causal = I("causal");
            if (c["scale"] != "default")
                Scale = float.Parse(c["scale"], NumberStyles.Float, CultureInfo.InvariantCulture);
            for (int o = 0; o < 4; o++)
                if (c[StrideKeys[o]] != "default") Strides[o] = c[StrideKeys[o]];
            string p = Vectors.Prefix(c);
            Q = Util.ReadF32(p + "q.f32"); K = Util.ReadF32(p + "k.f32"); V = Util.ReadF32(p + "v.f32");
            Out = Util.ReadF32(p + "out.f32"); Lse = Util.ReadF32(p + "lse.f32");
            Weights = Util.ReadF32(p + "weights.f32");
            KeyValid = c["key_valid"] == "1" ? Util.ReadU8(p + "key_valid.u8") : null;
            Allowed = c["allowed"] == "1" ? Util.ReadU8(p + "allowed.u8") : null;
        }

        public static List<IndexCase> All()
        {
            return Vectors.Lines("index.txt").Select(c => new IndexCase(c)).ToList();
        }

        public bool DefaultStrides { get { return Strides.All(x => x == null); } }

        // The case's scale and strides on a builder that has its dimensions.
        public AttentionDesc.Builder Configure(AttentionDesc.Builder b)
        {
            b.Causal((Causal)Causal);
            if (Scale.HasValue) b.Scale(Scale.Value);
            for (int o = 0; o < 4; o++)
                if (Strides[o] != null) Vectors.Strides(b, StrideOps[o], Strides[o], Name);
            return b;
        }

        public AttentionDesc.Builder Builder()
        {
            return Configure(new AttentionDesc.Builder().Dims(B, HQ, HKV, SQ, SK, D));
        }

        // Every array against the descriptor's lengths, the expected outputs against the format.
        public void CheckLengths(AttentionDesc desc)
        {
            Assert.AreEqual((ulong)Q.Length, desc.RequiredLen(Operand.Q), Name + " Q len");
            Assert.AreEqual((ulong)K.Length, desc.RequiredLen(Operand.K), Name + " K len");
            Assert.AreEqual((ulong)V.Length, desc.RequiredLen(Operand.V), Name + " V len");
            Assert.AreEqual((ulong)Out.Length, desc.RequiredLen(Operand.Out), Name);
            Assert.AreEqual((ulong)(B * HQ * SQ), desc.RequiredLen(Operand.Lse), Name);
            Assert.AreEqual((ulong)(B * HQ * SQ * SK), desc.RequiredLen(Operand.Weights), Name);
            Assert.AreEqual(Lse.Length, B * HQ * SQ, Name + " lse file");
            Assert.AreEqual(Weights.Length, B * HQ * SQ * SK, Name + " weights file");
            if (KeyValid != null) Assert.AreEqual(B * SK, KeyValid.Length, Name + " key_valid file");
            if (Allowed != null) Assert.AreEqual(SQ * SK, Allowed.Length, Name + " allowed file");
        }
    }

    [TestFixture]
    public class SharedVectorTests
    {
        // Runs every shared case (tolerance checks) and returns the cross-language bytes: for
        // each case in index order, out, lse and weights as little-endian float32.
        static byte[] RunAllCases(string label)
        {
            Assert.IsTrue(BitConverter.IsLittleEndian, "vector files are little-endian");
            var xlang = new MemoryStream();
            List<IndexCase> cases = IndexCase.All();
            foreach (IndexCase c in cases) RunCase(c, xlang, label);
            Console.WriteLine("shared vectors [{0}]: {1} cases passed", label, cases.Count);
            return xlang.ToArray();
        }

        [Test]
        public void SharedVectorsMatchWithin1e5AndWriteXlangBytes()
        {
            byte[] bytes = RunAllCases("default isa " + Attention.Isa);
            string xdir = Environment.GetEnvironmentVariable("ATTN_XLANG_DIR");
            if (!string.IsNullOrEmpty(xdir))
            {
                Directory.CreateDirectory(xdir);
                File.WriteAllBytes(Path.Combine(xdir, "csharp.bin"), bytes);
            }
        }

        [Test]
        public void SharedVectorsOnEveryIsaAndThreadCount()
        {
            var ran = new List<string>();
            try
            {
                foreach (string isa in new[] { "scalar", "sse2", "avx2", "avx512", "avx512fp16" })
                {
                    try
                    {
                        Attention.SetIsa(isa);
                    }
                    catch (AttentionException e) when (e.Status == Status.Unsupported)
                    {
                        continue; // this CPU or build lacks it
                    }
                    Assert.AreEqual(isa, Attention.Isa);
                    RunAllCases("isa " + isa);
                    ran.Add(isa);
                }
            }
            finally
            {
                Attention.SetIsa(null);
            }
            CollectionAssert.Contains(ran, "scalar");
            CollectionAssert.Contains(ran, Attention.Isa, "the default kernel was among them");

            byte[] many = RunAllCases("threads " + Attention.NumThreads);
            try
            {
                Attention.NumThreads = 1;
                byte[] one = RunAllCases("threads 1");
                Assert.IsTrue(one.SequenceEqual(many), "bit-identical for any thread count");
            }
            finally
            {
                Attention.NumThreads = 0; // the default again
            }
        }

        // Forward (into output and lse) and Weights (into weights) of one case, checked as
        // VARIANTS.md says: within 1e-5, expected zeros (hidden keys, OUT gaps, rows with no
        // visible key) exactly 0, expected -inf lse exactly -inf.
        static void RunCase(IndexCase c, Stream xlang, string label)
        {
            string name = c.Name + " [" + label + "]";
            using (AttentionDesc desc = c.Builder().Build())
            {
                c.CheckLengths(desc);
                var output = new float[c.Out.Length]; // zero-initialised
                var lse = new float[c.Lse.Length];
                desc.Forward(c.Q, c.K, c.V, c.KeyValid, c.Allowed, output, lse);
                var weights = new float[c.Weights.Length];
                desc.Weights(c.Q, c.K, c.KeyValid, c.Allowed, weights);

                Vectors.Check(c.Out, output, name + " out");
                Vectors.Check(c.Lse, lse, name + " lse");
                Vectors.Check(c.Weights, weights, name + " weights");

                foreach (float[] part in new[] { output, lse, weights })
                {
                    var bytes = new byte[part.Length * 4];
                    Buffer.BlockCopy(part, 0, bytes, 0, bytes.Length);
                    xlang.Write(bytes, 0, bytes.Length);
                }
            }
        }
    }

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

    [TestFixture]
    public class ErrorTests
    {
        static AttentionDesc Small()
        {
            // B=2, HQ=2, HKV=1, SQ=3, SK=4, D=2: Q/OUT 24, K/V 16, LSE 12, W 48, KV 8, ALLOWED 12.
            return new AttentionDesc.Builder().Dims(2, 2, 1, 3, 4, 2).Build();
        }

        [Test]
        public void SimpleNullShortAndBadSizes()
        {
            float[] a = new float[6];
            var e = Assert.Throws<ArgumentNullException>(() => Attention.Simple(null, a, a, 3, 2,
                                                                                false));
            Assert.AreEqual("q", e.ParamName);
            e = Assert.Throws<ArgumentNullException>(() => Attention.Simple(a, a, null, 3, 2, false));
            Assert.AreEqual("v", e.ParamName);
            var ae = Assert.Throws<ArgumentException>(
                () => Attention.Simple(a, new float[5], a, 3, 2, false));
            Assert.AreEqual("k", ae.ParamName);
            StringAssert.Contains("k has 5 elements, needs at least 6", ae.Message);
            ae = Assert.Throws<ArgumentException>(
                () => Attention.Simple(a, a, a, 3, 2, true, new bool[2]));
            Assert.AreEqual("padMask", ae.ParamName);
            ae = Assert.Throws<ArgumentException>(
                () => Attention.Simple(a, a, a, 3, 2, true, null, new float[4]));
            Assert.AreEqual("output", ae.ParamName);
            var re = Assert.Throws<ArgumentOutOfRangeException>(
                () => Attention.Simple(new float[0], new float[0], new float[0], 0, 2, false));
            Assert.AreEqual("n", re.ParamName);
            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => Attention.Simple(a, a, a, 3, -2, false));
            Assert.AreEqual("d", re.ParamName);
        }

        [Test]
        public void SimpleOutputAliasingAnInputIsRefusedByTheLibrary()
        {
            float[] q = Util.Values(6, 1), k = Util.Values(6, 2);
            // InvalidArgument from the library is an ArgumentException carrying its message.
            var e = Assert.Throws<ArgumentException>(() => Attention.Simple(q, k, q, 3, 2, false,
                                                                           null, q));
            StringAssert.Contains("attn_simple: out overlaps q", e.Message);
            Assert.AreEqual("out", e.ParamName);
        }

        [Test]
        public void ForwardNullArrays()
        {
            using (var desc = Small())
            {
                float[] q = new float[24], kv = new float[16], o = new float[24];
                Assert.AreEqual("q", Assert.Throws<ArgumentNullException>(
                    () => desc.Forward(null, kv, kv, null, null, o)).ParamName);
                Assert.AreEqual("k", Assert.Throws<ArgumentNullException>(
                    () => desc.Forward(q, null, kv, null, null, o)).ParamName);
                Assert.AreEqual("v", Assert.Throws<ArgumentNullException>(
                    () => desc.Forward(q, kv, null, null, null, o)).ParamName);
                Assert.AreEqual("output", Assert.Throws<ArgumentNullException>(
                    () => desc.Forward(q, kv, kv, null, null, null)).ParamName);
                Assert.AreEqual("weights", Assert.Throws<ArgumentNullException>(
                    () => desc.Weights(q, kv, null, null, null)).ParamName);
                Assert.AreEqual("q", Assert.Throws<ArgumentNullException>(
                    () => desc.Weights(null, kv)).ParamName);
                Assert.AreEqual("k", Assert.Throws<ArgumentNullException>(
                    () => desc.Weights(q, null)).ParamName);
            }
        }

        [Test]
        public void ShortArraysAreRejectedBeforeTheCall()
        {
            using (var desc = Small())
            {
                Assert.AreEqual(24UL, desc.RequiredLen(Operand.Q));
                Assert.AreEqual(16UL, desc.RequiredLen(Operand.K));
                Assert.AreEqual(48UL, desc.RequiredLen(Operand.Weights));
                float[] q = Util.Values(24, 1), kv = Util.Values(16, 2);
                var o = new float[24];
                var cases = new Dictionary<string, TestDelegate>
                {
                    { "q", () => desc.Forward(new float[23], kv, kv, null, null, o) },
                    { "k", () => desc.Forward(q, new float[15], kv, null, null, o) },
                    { "v", () => desc.Forward(q, kv, new float[0], null, null, o) },
                    { "keyValid", () => desc.Forward(q, kv, kv, new bool[7], null, o) },
                    { "allowed", () => desc.Forward(q, kv, kv, null, new bool[11], o) },
                    { "output", () => desc.Forward(q, kv, kv, null, null, new float[23]) },
                    { "lse", () => desc.Forward(q, kv, kv, null, null, o, new float[11]) },
                    { "weights", () => desc.Weights(q, kv, null, null, new float[47]) },
                };
                foreach (var c in cases)
                {
                    var e = Assert.Throws<ArgumentException>(c.Value, c.Key);
                    Assert.AreEqual(c.Key, e.ParamName);
                    StringAssert.Contains(c.Key + " has ", e.Message);
                    StringAssert.Contains("elements, needs at least", e.Message);
                }
                Assert.IsTrue(o.All(x => x == 0), "nothing was written on a rejected call");
                // An empty optional array is a short array too, not "absent".
                Assert.Throws<ArgumentException>(
                    () => desc.Forward(q, kv, kv, null, null, o, new float[0]));
                desc.Forward(q, kv, kv, null, null, o); // and the descriptor still works
                Assert.IsTrue(o.Any(x => x != 0));
            }
        }

        [Test]
        public void OutputAliasingAnInputIsRefusedByTheLibrary()
        {
            using (var desc = new AttentionDesc.Builder().SeqLen(4).HeadDim(3).Build())
            {
                float[] q = Util.Values(12, 1), k = Util.Values(12, 2);
                var e = Assert.Throws<ArgumentException>(
                    () => desc.Forward(q, k, k, null, null, q));
                StringAssert.Contains("attn_forward: out overlaps", e.Message);
                Assert.AreEqual("out", e.ParamName);
            }
        }

        [Test]
        public void BadDims()
        {
            // The library's InvalidArgument: an ArgumentException with its message, ParamName the
            // argument the message names.
            var e = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().Dims(1, 6, 4, 3, 3, 8).Build());
            StringAssert.Contains("heads_q (6) is not a multiple of heads_kv (4)", e.Message);
            Assert.AreEqual("heads_q", e.ParamName);

            e = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().SeqLen(0, 3).HeadDim(8).Build());
            StringAssert.Contains("seq_q must be > 0", e.Message);
            Assert.AreEqual("seq_q", e.ParamName);

            e = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().SeqLen(3).Build()); // head_dim never set: 0
            StringAssert.Contains("head_dim", e.Message);

            e = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().Batch(1L << 31).SeqLen(3).HeadDim(2).Build());
            StringAssert.Contains("batch (2147483648) exceeds the limit", e.Message);

            // Products that overflow size_t: refused by the library before it allocates.
            e = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().Dims(1L << 30, 1L << 30, 1, 1L << 30, 1, 64)
                          .Build());
            StringAssert.Contains("overflow", e.Message);

            var re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().Heads(-1, 1));
            Assert.AreEqual("headsQ", re.ParamName);
            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().Strides(Operand.K, 0, -4, 1));
            Assert.AreEqual("headStride", re.ParamName);
        }

        [Test]
        public void BadCausalScaleStridesAndOperand()
        {
            // Enum values out of range and NaN are refused when set, with the library's message.
            var re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().SeqLen(3).HeadDim(2).Causal((Causal)7));
            Assert.AreEqual("causal", re.ParamName);
            StringAssert.Contains("(7) is outside [0, 2]", re.Message);
            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().Causal((Causal)(-1)));
            StringAssert.Contains("(-1) is outside [0, 2]", re.Message);

            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().SeqLen(3).HeadDim(2).Scale(float.NaN));
            Assert.AreEqual("scale", re.ParamName);
            StringAssert.Contains("must not be NaN", re.Message);
            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().Scale(float.PositiveInfinity));
            StringAssert.Contains("(inf) is outside", re.Message);

            // Lse has no strides: the library's refusal at Build.
            var e = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().SeqLen(3).HeadDim(2)
                          .Strides(Operand.Lse, 1, 1, 1).Build());
            StringAssert.Contains("which (4) must be ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT or ATTN_BIAS",
                                  e.Message);

            // OUT rows overlapping each other (row stride 1 < head_dim 2).
            e = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().SeqLen(3).HeadDim(2)
                          .Strides(Operand.Out, 6, 6, 1).Build());
            StringAssert.Contains("out strides (6, 6, 1) do not nest", e.Message);

            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().Strides((Operand)42, 1, 1, 1));
            StringAssert.Contains("which (42) is not an Operand value", re.Message);
            using (var desc = new AttentionDesc.Builder().SeqLen(3).HeadDim(2).Build())
            {
                re = Assert.Throws<ArgumentOutOfRangeException>(() => desc.RequiredLen((Operand)42));
                Assert.AreEqual("which", re.ParamName);
                StringAssert.Contains("which (42) is not an Operand value", re.Message);
                re = Assert.Throws<ArgumentOutOfRangeException>(() => desc.RequiredLen((Operand)(-3)));
                StringAssert.Contains("which (-3)", re.Message);
            }
        }

        [Test]
        public void LibraryWideSettingsErrors()
        {
            var e = Assert.Throws<ArgumentException>(() => Attention.SetIsa("no-such-isa"));
            StringAssert.Contains(
                "attn_set_isa: name \"no-such-isa\" is not one of scalar, sse2, avx2, avx512",
                e.Message);
            Attention.SetIsa(null); // restores the default
            e = Assert.Throws<ArgumentException>(() => Attention.NumThreads = 100000);
            StringAssert.Contains("n (100000) exceeds the limit 256", e.Message);
            Assert.Throws<ArgumentOutOfRangeException>(() => Attention.NumThreads = -1);
        }

        // Impossible sizes are argument errors found before anything is allocated.
        static void AssertNoBigAllocation(TestDelegate call, string paramName, string message)
        {
            long before = GC.GetTotalMemory(true);
            int collections = GC.CollectionCount(0);
            var e = Assert.Throws<ArgumentException>(call);
            long grew = GC.GetTotalMemory(false) - before;
            Assert.AreEqual(paramName, e.ParamName);
            StringAssert.Contains(message, e.Message);
            Assert.Less(grew, 16L << 20, "the heap grew by " + grew + " bytes");
            Assert.AreEqual(collections, GC.CollectionCount(0), "a collection ran: big allocation");
        }

        [Test]
        public void ImpossibleSizesAreRefusedBeforeAllocating()
        {
            float[] one = new float[1];
            // 40000 x 40000 would be a 6.4 GB result; 20000 x 20000 one of 1.6 GB.
            AssertNoBigAllocation(() => Attention.Simple(one, one, one, 40000, 40000, true, null),
                                  "q", "q has 1 elements, needs at least 1600000000");
            AssertNoBigAllocation(() => Attention.Simple(one, one, one, 20000, 20000, false),
                                  "q", "q has 1 elements, needs at least 400000000");
            AssertNoBigAllocation(
                () => Attention.Simple(one, one, one, int.MaxValue, int.MaxValue, true),
                "q", "needs at least 4611686014132420609");
            float[] q = new float[6];
            AssertNoBigAllocation(() => Attention.Simple(q, q, one, 3, 2, true), "v",
                                  "v has 1 elements, needs at least 6");
            AssertNoBigAllocation(() => Attention.Simple(q, q, q, 3, 2, true, new bool[0]),
                                  "padMask", "padMask has 0 elements, needs at least 3");

            // The allocating descriptor overloads check their inputs first too.
            using (var big = new AttentionDesc.Builder().SeqLen(20000).HeadDim(20000).Build())
            {
                AssertNoBigAllocation(() => big.Forward(one, one, one), "q",
                                      "q has 1 elements, needs at least 400000000");
                AssertNoBigAllocation(() => big.Weights(one, one), "q",
                                      "q has 1 elements, needs at least 400000000");
            }
            // An output larger than any C# array: refused with its size, not OverflowException.
            using (var wide = new AttentionDesc.Builder().SeqLen(100000).HeadDim(1).Build())
            {
                float[] x = new float[100000];
                AssertNoBigAllocation(() => wide.Weights(x, x), "weights",
                                      "weights would need 10000000000 elements");
            }
        }

        [Test]
        public void LongerArraysAreAcceptedAndOnlyTheirPrefixIsUsed()
        {
            int n = 4, d = 3;
            float[] q = Util.Values(n * d, 1), k = Util.Values(n * d, 2), v = Util.Values(n * d, 3);
            float[] exact = Attention.Simple(q, k, v, n, d, true, new[] { true, true, false, true });
            Func<float[], float[]> longer = a => a.Concat(new[] { float.NaN, 7f }).ToArray();
            var output = new float[n * d + 2];
            output[n * d] = 42;
            output[n * d + 1] = 43;
            Attention.Simple(longer(q), longer(k), longer(v), n, d, true,
                             new[] { true, true, false, true, false, false }, output);
            CollectionAssert.AreEqual(exact, output.Take(n * d).ToArray());
            Assert.AreEqual(42f, output[n * d]);
            Assert.AreEqual(43f, output[n * d + 1]);
            CollectionAssert.AreEqual(exact, Attention.Simple(longer(q), k, longer(v), n, d, true,
                                                              new[] { true, true, false, true,
                                                                      true }));
        }

        [Test]
        public void EmptyOptionalArraysAreLengthErrorsAndNullMeansNotGiven()
        {
            using (var desc = Small())
            {
                float[] q = Util.Values(24, 1), kv = Util.Values(16, 2), o = new float[24];
                // `fixed` on an empty array gives NULL, which C would read as "no mask": refused.
                var e = Assert.Throws<ArgumentException>(
                    () => desc.Forward(q, kv, kv, new bool[0], null, o));
                Assert.AreEqual("keyValid", e.ParamName);
                StringAssert.Contains("keyValid has 0 elements, needs at least 8", e.Message);
                e = Assert.Throws<ArgumentException>(
                    () => desc.Forward(q, kv, kv, null, new bool[0], o));
                Assert.AreEqual("allowed", e.ParamName);
                e = Assert.Throws<ArgumentException>(() => desc.Weights(q, kv, new bool[0]));
                Assert.AreEqual("keyValid", e.ParamName);
                e = Assert.Throws<ArgumentException>(() => desc.Forward(new float[0], kv, kv));
                Assert.AreEqual("q", e.ParamName); // empty required: a length error, not null
                Assert.IsNotInstanceOf<ArgumentNullException>(e);
                float[] none = desc.Forward(q, kv, kv, null, null);
                float[] allTrue = desc.Forward(q, kv, kv, Enumerable.Repeat(true, 8).ToArray(),
                                               Enumerable.Repeat(true, 12).ToArray());
                CollectionAssert.AreEqual(none, allTrue, "null = not given = all true");
            }
            var se = Assert.Throws<ArgumentException>(
                () => Attention.Simple(new float[6], new float[6], new float[6], 3, 2, true,
                                       new bool[0]));
            Assert.AreEqual("padMask", se.ParamName);
        }

        [Test]
        public void IsaNamesWithNulOrNonAsciiAreRefusedWithTheLibrarysWording()
        {
            string before = Attention.Isa;
            foreach (string bad in new[] { "avx2\0junk", "scalar\0", "\0", "avx2\u00e9",
                                           "sse2\u2028", "\u0430vx2" })
            {
                var e = Assert.Throws<ArgumentException>(() => Attention.SetIsa(bad), bad);
                Assert.IsNotInstanceOf<ArgumentNullException>(e);
                Assert.AreEqual("name", e.ParamName);
                StringAssert.StartsWith("attn_set_isa: name \"", e.Message);
                StringAssert.Contains("\" is not one of scalar, sse2, avx2, avx512", e.Message);
                Assert.AreEqual(before, Attention.Isa, "the kernel did not change");
            }
            var nul = Assert.Throws<ArgumentException>(() => Attention.SetIsa("avx2\0junk"));
            StringAssert.Contains("name \"avx2\\0junk\"", nul.Message); // the NUL is shown
            // The list of names is the library's own (one table in C), whatever the name.
            var unknown = Assert.Throws<ArgumentException>(() => Attention.SetIsa("no-such-isa"));
            Func<string, string> list = m => m.Substring(m.IndexOf("is not one of ", StringComparison.Ordinal));
            Assert.AreEqual(list(unknown.Message), list(nul.Message));
            StringAssert.Contains("is not one of scalar, sse2, avx2, avx512, avx512fp16", unknown.Message);
            // The same wording as the library's own refusal of an unknown name.
            var lib = Assert.Throws<ArgumentException>(() => Attention.SetIsa("avx3"));
            StringAssert.Contains("attn_set_isa: name \"avx3\" is not one of scalar, sse2, avx2, "
                                      + "avx512",
                                  lib.Message);
            Attention.SetIsa("scalar");
            Assert.AreEqual("scalar", Attention.Isa);
            Attention.SetIsa("");
            Assert.AreEqual(before, Attention.Isa);
        }

        [Test]
        public void UseAfterDispose()
        {
            var desc = Small();
            float[] q = new float[24], kv = new float[16], o = new float[24];
            desc.Forward(q, kv, kv, null, null, o);
            Assert.IsFalse(desc.IsDisposed);
            Assert.IsFalse(desc.NativeReleased);
            desc.Dispose();
            Assert.IsTrue(desc.IsDisposed);
            Assert.IsTrue(desc.NativeReleased);
            desc.Dispose(); // idempotent
            var e = Assert.Throws<ObjectDisposedException>(
                () => desc.Forward(q, kv, kv, null, null, o));
            StringAssert.Contains("AttentionDesc", e.Message);
            Assert.Throws<ObjectDisposedException>(() => desc.Forward(q, kv, kv));
            Assert.Throws<ObjectDisposedException>(() => desc.Weights(q, kv));
            Assert.Throws<ObjectDisposedException>(() => desc.Weights(q, kv, null, null,
                                                                      new float[48]));
            Assert.Throws<ObjectDisposedException>(() => desc.RequiredLen(Operand.Q));
            // Disposed wins over bad arguments: nothing about the arrays is even looked at.
            Assert.Throws<ObjectDisposedException>(() => desc.Forward(null, null, null, null,
                                                                      null, null));
        }
    }

    [TestFixture]
    public class ConcurrencyTests
    {
        const int Threads = 8;

        [Test]
        public void ManyThreadsOnOneDescriptorEachWithItsOwnResultsAndErrors()
        {
            int B = 2, HQ = 4, HKV = 2, S = 24, D = 16;
            using (var desc = new AttentionDesc.Builder().Dims(B, HQ, HKV, S, S, D)
                                  .Causal(Causal.TopLeft).Build())
            {
                // Per-thread inputs and their expected outputs, computed one at a time first (the
                // dense call itself is checked by the shared vectors).
                var inputs = new float[Threads][][];
                var expected = new float[Threads][];
                var expectedLse = new float[Threads][];
                for (int t = 0; t < Threads; t++)
                {
                    inputs[t] = new[] { Util.Values(B * HQ * S * D, 10 * t + 1),
                                        Util.Values(B * HKV * S * D, 10 * t + 2),
                                        Util.Values(B * HKV * S * D, 10 * t + 3) };
                    expected[t] = new float[desc.RequiredLen(Operand.Out)];
                    expectedLse[t] = new float[desc.RequiredLen(Operand.Lse)];
                    desc.Forward(inputs[t][0], inputs[t][1], inputs[t][2], null, null, expected[t],
                                 expectedLse[t]);
                }

                var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
                var start = new Barrier(Threads);
                var threads = new Thread[Threads];
                for (int t = 0; t < Threads; t++)
                {
                    int me = t;
                    threads[t] = new Thread(() =>
                    {
                        try
                        {
                            start.SignalAndWait();
                            for (int it = 0; it < 60; it++)
                            {
                                var o = new float[expected[me].Length];
                                var lse = new float[expectedLse[me].Length];
                                desc.Forward(inputs[me][0], inputs[me][1], inputs[me][2], null,
                                             null, o, lse);
                                if (!o.SequenceEqual(expected[me]) ||
                                    !lse.SequenceEqual(expectedLse[me]))
                                    failures.Enqueue("thread " + me + ": wrong result, iteration "
                                                     + it);

                                // An error of this thread's own, between the others' calls: the
                                // message must be this call's (the C side's is per thread).
                                long hq = 4 * (me + 1) + 1; // never a multiple of 4
                                try
                                {
                                    new AttentionDesc.Builder().Dims(1, hq, 4, 2, 2, 2).Build()
                                        .Dispose();
                                    failures.Enqueue("thread " + me + ": bad heads accepted");
                                }
                                catch (ArgumentException e)
                                {
                                    if (!e.Message.Contains("heads_q") ||
                                        !e.Message.Contains("(" + hq + ")"))
                                        failures.Enqueue("thread " + me + ": foreign message '"
                                                         + e.Message + "'");
                                }
                                // And a library error on the shared descriptor (output aliases q).
                                try
                                {
                                    float[] qq = (float[])inputs[me][0].Clone();
                                    desc.Forward(qq, inputs[me][1], inputs[me][2], null, null, qq);
                                    failures.Enqueue("thread " + me + ": aliasing accepted");
                                }
                                catch (ArgumentException e)
                                {
                                    if (!e.Message.Contains("out overlaps") ||
                                        e.Message.Contains("heads_q"))
                                        failures.Enqueue("thread " + me + ": foreign message '"
                                                         + e.Message + "'");
                                }
                            }
                        }
                        catch (Exception e)
                        {
                            failures.Enqueue("thread " + me + ": " + e);
                        }
                    });
                    threads[t].Start();
                }
                foreach (var th in threads) th.Join();
                Assert.IsEmpty(failures.ToArray(), string.Join("\n", failures.Take(10)));
            }
        }

        [Test]
        public void DisposeWhileCallsAreInFlight()
        {
            int S = 64, D = 32;
            var desc = new AttentionDesc.Builder().SeqLen(S).HeadDim(D).Build();
            float[] q = Util.Values(S * D, 1), k = Util.Values(S * D, 2), v = Util.Values(S * D, 3);
            float[] expected = desc.Forward(q, k, v);
            var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
            int calls = 0, disposedSeen = 0;
            var threads = new Thread[Threads];
            for (int t = 0; t < Threads; t++)
            {
                threads[t] = new Thread(() =>
                {
                    var o = new float[S * D];
                    try
                    {
                        while (true)
                        {
                            Array.Clear(o, 0, o.Length);
                            desc.Forward(q, k, v, null, null, o);
                            if (!o.SequenceEqual(expected)) failures.Enqueue("wrong result");
                            Interlocked.Increment(ref calls);
                        }
                    }
                    catch (ObjectDisposedException)
                    {
                        Interlocked.Increment(ref disposedSeen);
                    }
                    catch (Exception e)
                    {
                        failures.Enqueue(e.ToString());
                    }
                });
                threads[t].Start();
            }
            while (Volatile.Read(ref calls) < 200) Thread.Sleep(1);
            desc.Dispose();
            foreach (var th in threads) Assert.IsTrue(th.Join(60000), "a thread hung");
            Assert.IsEmpty(failures.ToArray(), string.Join("\n", failures.Take(10)));
            Assert.AreEqual(Threads, disposedSeen, "every thread ends with ObjectDisposedException");
            Assert.IsTrue(desc.NativeReleased, "the native descriptor was freed after the last call");
        }
    }
}
