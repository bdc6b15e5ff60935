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
    // An independent float64 reference for contiguous BHSD problems (the shared vectors cover the
    // strided cases against the project's Python reference).
    static class Reference
    {
        public static bool Visible(int causal, int sq, int sk, bool[] keyValid, bool[] allowed,
                                   int b, int i, int j)
        {
            if (causal == 1 && j > i) return false;
            if (causal == 2 && j > i + (sk - sq)) return false;
            if (keyValid != null && !keyValid[b * sk + j]) return false;
            if (allowed != null && !allowed[i * sk + j]) return false;
            return true;
        }

        // out [B][HQ][SQ][D], lse [B][HQ][SQ], weights [B][HQ][SQ][SK] in float64.
        public static void Compute(int B, int HQ, int HKV, int SQ, int SK, int D, int causal,
                                   double scale, float[] q, float[] k, float[] v, bool[] keyValid,
                                   bool[] allowed, out double[] output, out double[] lse,
                                   out double[] weights)
        {
            output = new double[B * HQ * SQ * D];
            lse = new double[B * HQ * SQ];
            weights = new double[B * HQ * SQ * SK];
            int group = HQ / HKV;
            var s = new double[SK];
            for (int b = 0; b < B; b++)
                for (int h = 0; h < HQ; h++)
                    for (int i = 0; i < SQ; i++)
                    {
                        int hk = h / group, row = (b * HQ + h) * SQ + i;
                        double m = double.NegativeInfinity;
                        for (int j = 0; j < SK; j++)
                        {
                            s[j] = double.NegativeInfinity;
                            if (!Visible(causal, SQ, SK, keyValid, allowed, b, i, j)) continue;
                            double dot = 0;
                            for (int d = 0; d < D; d++)
                                dot += (double)q[row * D + d]
                                       * k[((b * HKV + hk) * SK + j) * D + d];
                            s[j] = dot * scale;
                            m = Math.Max(m, s[j]);
                        }
                        double sum = 0;
                        for (int j = 0; j < SK; j++)
                            if (!double.IsNegativeInfinity(s[j])) sum += Math.Exp(s[j] - m);
                        lse[row] = sum > 0 ? m + Math.Log(sum) : double.NegativeInfinity;
                        for (int j = 0; j < SK; j++)
                        {
                            double w = sum > 0 && !double.IsNegativeInfinity(s[j])
                                           ? Math.Exp(s[j] - m) / sum : 0;
                            weights[row * SK + j] = w;
                            if (w == 0) continue;
                            for (int d = 0; d < D; d++)
                                output[row * D + d] += w * v[((b * HKV + hk) * SK + j) * D + d];
                        }
                    }
        }
    }

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

    [TestFixture]
    public class SharedVectorTests
    {
        // Runs every shared case (tolerance checks) and returns the cross-language bytes: for
        // each case in index order, out, lse and weights as little-endian float32.
        static byte[] RunAllCases(string label)
        {
            Assert.IsTrue(BitConverter.IsLittleEndian, "vector files are little-endian");
            string dir = Environment.GetEnvironmentVariable("ATTN_VECTORS_DIR");
            Assert.IsFalse(string.IsNullOrEmpty(dir), "ATTN_VECTORS_DIR is not set");
            string index = Path.Combine(dir, "index.txt");
            Assert.IsTrue(File.Exists(index), "missing " + index);

            var xlang = new MemoryStream();
            int cases = 0;
            foreach (string raw in File.ReadAllLines(index))
            {
                string line = raw.Trim();
                if (line.Length == 0 || line.StartsWith("#")) continue;
                var kv = new Dictionary<string, string>();
                foreach (string tok in line.Split((char[])null,
                                                  StringSplitOptions.RemoveEmptyEntries))
                {
                    int eq = tok.IndexOf('=');
                    Assert.Greater(eq, 0, "bad token '" + tok + "' in: " + line);
                    kv[tok.Substring(0, eq)] = tok.Substring(eq + 1);
                }
                RunCase(dir, kv, xlang, label);
                cases++;
            }
            Assert.Greater(cases, 0, "no cases in " + index);
            Console.WriteLine("shared vectors [{0}]: {1} cases passed", label, cases);
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

        static void RunCase(string dir, Dictionary<string, string> c, Stream xlang,
                            string label)
        {
            string name = c["name"] + " [" + label + "]";
            Func<string, int> I = key => int.Parse(c[key], CultureInfo.InvariantCulture);
            int B = I("batch"), HQ = I("heads_q"), HKV = I("heads_kv"), SQ = I("seq_q"),
                SK = I("seq_k"), D = I("head_dim"), causal = I("causal");

            var builder = new AttentionDesc.Builder().Dims(B, HQ, HKV, SQ, SK, D)
                              .Causal((Causal)causal);
            if (c["scale"] != "default")
                builder.Scale(float.Parse(c["scale"], NumberStyles.Float,
                                          CultureInfo.InvariantCulture));
            var ops = new[] { Operand.Q, Operand.K, Operand.V, Operand.Out };
            var keys = new[] { "q_strides", "k_strides", "v_strides", "out_strides" };
            for (int o = 0; o < 4; o++)
            {
                if (c[keys[o]] == "default") continue;
                long[] st = c[keys[o]].Split(',')
                                .Select(x => long.Parse(x, CultureInfo.InvariantCulture))
                                .ToArray();
                Assert.AreEqual(3, st.Length, name + ": " + keys[o]);
                builder.Strides(ops[o], st[0], st[1], st[2]);
            }

            string p = Path.Combine(dir, c["name"] + ".");
            float[] q = Util.ReadF32(p + "q.f32"), k = Util.ReadF32(p + "k.f32"),
                    v = Util.ReadF32(p + "v.f32");
            float[] expOut = Util.ReadF32(p + "out.f32"), expLse = Util.ReadF32(p + "lse.f32"),
                    expW = Util.ReadF32(p + "weights.f32");
            bool[] keyValid = c["key_valid"] == "1" ? Util.ReadU8(p + "key_valid.u8") : null;
            bool[] allowed = c["allowed"] == "1" ? Util.ReadU8(p + "allowed.u8") : null;

            using (AttentionDesc desc = builder.Build())
            {
                Assert.AreEqual((ulong)q.Length, desc.RequiredLen(Operand.Q), name + " Q len");
                Assert.AreEqual((ulong)k.Length, desc.RequiredLen(Operand.K), name + " K len");
                Assert.AreEqual((ulong)v.Length, desc.RequiredLen(Operand.V), name + " V len");
                Assert.AreEqual((ulong)expOut.Length, desc.RequiredLen(Operand.Out), name);
                Assert.AreEqual((ulong)(B * HQ * SQ), desc.RequiredLen(Operand.Lse), name);
                Assert.AreEqual((ulong)(B * HQ * SQ * SK), desc.RequiredLen(Operand.Weights), name);
                Assert.AreEqual(expLse.Length, B * HQ * SQ, name + " lse file");
                Assert.AreEqual(expW.Length, B * HQ * SQ * SK, name + " weights file");

                var output = new float[expOut.Length]; // zero-initialised
                var lse = new float[expLse.Length];
                desc.Forward(q, k, v, keyValid, allowed, output, lse);
                var weights = new float[expW.Length];
                desc.Weights(q, k, keyValid, allowed, weights);

                for (int i = 0; i < expOut.Length; i++)
                    Util.AssertClose(expOut[i], output[i], name + " out[" + i + "]");
                for (int i = 0; i < expLse.Length; i++)
                    Util.AssertClose(expLse[i], lse[i], name + " lse[" + i + "]");
                for (int b = 0; b < B; b++)
                    for (int h = 0; h < HQ; h++)
                        for (int i = 0; i < SQ; i++)
                            for (int j = 0; j < SK; j++)
                            {
                                int at = ((b * HQ + h) * SQ + i) * SK + j;
                                string what = name + " weights[" + b + "][" + h + "][" + i + "]["
                                              + j + "]";
                                if (!Reference.Visible(causal, SQ, SK, keyValid, allowed, b, i, j))
                                {
                                    Assert.AreEqual(0.0f, expW[at], what + " (expected file)");
                                    Assert.AreEqual(0.0f, weights[at], what + " masked");
                                }
                                else
                                    Util.AssertClose(expW[at], weights[at], what);
                            }

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
        public void SimpleWithPadMaskMatchesReference()
        {
            int n = 7, d = 5;
            float[] q = Util.Values(n * d, 1), k = Util.Values(n * d, 2), v = Util.Values(n * d, 3);
            bool[] pad = { true, true, false, true, true, false, false };
            // Padded K/V rows are never read: poison them.
            for (int j = 0; j < n; j++)
                if (!pad[j])
                    for (int x = 0; x < d; x++) k[j * d + x] = v[j * d + x] = float.NaN;
            foreach (bool causal in new[] { false, true })
            {
                float[] got = Attention.Simple(q, k, v, n, d, causal, pad);
                double[] o, lse, w;
                Reference.Compute(1, 1, 1, n, n, d, causal ? 1 : 0, 1 / Math.Sqrt(d), q, k, v,
                                  pad, null, out o, out lse, out w);
                for (int i = 0; i < o.Length; i++)
                    Util.AssertClose(o[i], got[i], "causal=" + causal + " out[" + i + "]");
                var into = new float[n * d];
                Attention.Simple(q, k, v, n, d, causal, pad, into);
                CollectionAssert.AreEqual(got, into);
            }
        }

        [Test]
        public void DescriptorGqaMasksScaleMatchReference()
        {
            int B = 2, HQ = 4, HKV = 2, SQ = 5, SK = 9, D = 6;
            float scale = 0.3f;
            float[] q = Util.Values(B * HQ * SQ * D, 4), k = Util.Values(B * HKV * SK * D, 5),
                    v = Util.Values(B * HKV * SK * D, 6);
            bool[] keyValid = new bool[B * SK];
            for (int i = 0; i < keyValid.Length; i++) keyValid[i] = i % 4 != 3;
            bool[] allowed = new bool[SQ * SK];
            for (int i = 0; i < allowed.Length; i++) allowed[i] = i % 5 != 1;
            foreach (Causal causal in new[] { Causal.None, Causal.TopLeft, Causal.BottomRight })
                using (var desc = AttentionDesc.CreateBuilder().Batch(B).Heads(HQ, HKV)
                                      .SeqLen(SQ, SK).HeadDim(D).Causal(causal).Scale(scale)
                                      .Build())
                {
                    Assert.AreEqual(causal, desc.Causal);
                    Assert.AreEqual(HQ, desc.HeadsQ);
                    var output = new float[desc.RequiredLen(Operand.Out)];
                    var lse = new float[desc.RequiredLen(Operand.Lse)];
                    desc.Forward(q, k, v, keyValid, allowed, output, lse);
                    float[] w = desc.Weights(q, k, keyValid, allowed);
                    double[] eo, el, ew;
                    Reference.Compute(B, HQ, HKV, SQ, SK, D, (int)causal, scale, q, k, v, keyValid,
                                      allowed, out eo, out el, out ew);
                    for (int i = 0; i < eo.Length; i++) Util.AssertClose(eo[i], output[i], "out");
                    for (int i = 0; i < el.Length; i++) Util.AssertClose(el[i], lse[i], "lse");
                    for (int i = 0; i < ew.Length; i++)
                    {
                        Util.AssertClose(ew[i], w[i], "weights");
                        if (ew[i] == 0) Assert.AreEqual(0.0f, w[i], "hidden key weight");
                    }
                    CollectionAssert.AreEqual(output, desc.Forward(q, k, v, keyValid, allowed));
                    // Longer arrays than required are fine; the tail is left alone.
                    var longer = new float[output.Length + 3];
                    longer[output.Length] = 42;
                    desc.Forward(q, k, v, keyValid, allowed, longer);
                    Assert.AreEqual(42f, longer[output.Length]);
                    CollectionAssert.AreEqual(output, longer.Take(output.Length).ToArray());
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
            // Enum values out of range and NaN are refused when set, naming the value.
            var re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().SeqLen(3).HeadDim(2).Causal((Causal)7));
            Assert.AreEqual("causal", re.ParamName);
            StringAssert.Contains("causal (7) is not a Causal value", re.Message);
            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().Causal((Causal)(-1)));
            StringAssert.Contains("causal (-1)", re.Message);

            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().SeqLen(3).HeadDim(2).Scale(float.NaN));
            Assert.AreEqual("scale", re.ParamName);
            StringAssert.Contains("scale must not be NaN", re.Message);
            re = Assert.Throws<ArgumentOutOfRangeException>(
                () => new AttentionDesc.Builder().Scale(float.PositiveInfinity));
            StringAssert.Contains("scale (Infinity) is outside", re.Message);

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

        // Issue 14: impossible sizes are argument errors found before anything is allocated.
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
                // Per-thread inputs and their expected outputs, computed one at a time first.
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
                    double[] eo, el, ew;
                    Reference.Compute(B, HQ, HKV, S, S, D, 1, 1 / Math.Sqrt(D), inputs[t][0],
                                      inputs[t][1], inputs[t][2], null, null, out eo, out el,
                                      out ew);
                    for (int i = 0; i < eo.Length; i++)
                        Util.AssertClose(eo[i], expected[t][i], "reference out");
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
