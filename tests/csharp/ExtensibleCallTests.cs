// NUnit tests of the 0.2 extensible call through the C# face: every parameter (Builder setters,
// properties read back from the library, attn_param_bounds), every operand (AttentionArgs,
// AttentionDesc.Run) on the shared vectors of tests/vectors/variants.txt (the values of the
// float64 references of C++ and Python), and bad input naming the argument. The whole of
// variants.txt, storage.txt, backward.txt and errors.txt runs in VariantVectorTests.cs.
using System;
using System.Buffers;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;
using NUnit.Framework;

namespace LibAttn.Tests
{
    // The operands of one call; null = not bound.
    sealed class TestInputs
    {
        public float[] Q, K, V, Bias, AlibiSlopes, Sinks;
        public bool[] KeyValid, Allowed, QueryValid;
        public int[] SeqLensK;
    }

    static class Run02
    {
        // Binds the inputs (every operand: an absent one as null, which unbinds it), runs
        // Forward (out, lse, key_mass) and Weights, returns the results.
        public static void Both(AttentionDesc desc, TestInputs a, out float[] output, out float[] lse,
                                out float[] weights, out float[] mass)
        {
            output = new float[desc.RequiredLen(Operand.Out)];
            lse = new float[desc.RequiredLen(Operand.Lse)];
            weights = new float[desc.RequiredLen(Operand.Weights)];
            mass = new float[desc.RequiredLen(Operand.KeyMass)];
            using (var args = new AttentionArgs())
            {
                args.Bind(Operand.Q, a.Q).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                    .Bind(Operand.Bias, a.Bias).Bind(Operand.AlibiSlopes, a.AlibiSlopes)
                    .Bind(Operand.Sinks, a.Sinks).Bind(Operand.KeyValid, a.KeyValid)
                    .Bind(Operand.Allowed, a.Allowed).Bind(Operand.QueryValid, a.QueryValid)
                    .Bind(Operand.SeqLensK, a.SeqLensK);
                args.Bind(Operand.Out, output).Bind(Operand.Lse, lse).Bind(Operand.KeyMass, mass);
                desc.Run(Op.Forward, args);
                args.Bind(Operand.Weights, weights);
                desc.Run(Op.Weights, args);
            }
        }

        // The variants.txt cases a predicate selects (at least min of them), each through Check.
        public static int CheckVectors(Func<Dictionary<string, string>, bool> select, int min,
                                       string what)
        {
            var lines = Vectors.Lines("variants.txt").Where(select).ToList();
            Assert.GreaterOrEqual(lines.Count, min, what + ": cases in variants.txt");
            foreach (var c in lines) Check(c);
            return lines.Count;
        }

        // One variants.txt case through Both (the descriptor from its line, or from builder),
        // checked as VARIANTS.md says: out, lse, weights and (mass=1) key_mass within 1e-5 of
        // the expected files, expected zeros exactly 0, expected -inf exactly -inf.
        public static void Check(Dictionary<string, string> c, AttentionDesc.Builder builder = null)
        {
            string name = c["name"];
            using (AttentionDesc desc = (builder ?? Vectors.Builder(c)).Build())
            {
                TestInputs a = Vectors.Load(c, desc);
                float[] o, l, w, m;
                Both(desc, a, out o, out l, out w, out m);
                Vectors.Check(Vectors.Expected(desc, Operand.Out, c, "out"), o, name + " out");
                Vectors.Check(Vectors.Expected(desc, Operand.Lse, c, "lse"), l, name + " lse");
                Vectors.Check(Vectors.Expected(desc, Operand.Weights, c, "weights"), w, name + " weights");
                if (c["mass"] == "1")
                    Vectors.Check(Vectors.Expected(desc, Operand.KeyMass, c, "key_mass"), m,
                                  name + " key_mass");
            }
        }

        public static bool Has(Dictionary<string, string> c, string input)
        {
            return Vectors.Inputs(c).Contains(input);
        }

        // Q, K, V of a descriptor's lengths, from Util.Values.
        public static TestInputs Random(AttentionDesc desc, int salt)
        {
            return new TestInputs { Q = Util.Values((int)desc.RequiredLen(Operand.Q), salt),
                                    K = Util.Values((int)desc.RequiredLen(Operand.K), salt + 1),
                                    V = Util.Values((int)desc.RequiredLen(Operand.V), salt + 2) };
        }

        public static bool[] Mask(int n, int period, int offset = 0)
        {
            var r = new bool[n];
            for (int i = 0; i < n; i++) r[i] = (i + offset) % period != 0;
            return r;
        }
    }

    [TestFixture]
    public class ParameterTests
    {
        static AttentionDesc.Builder Small()
        {
            return new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4);
        }

        [Test]
        public void PublicEnumsMirrorTheHeader()
        {
            // The public enums (gen_enums.cmake) against SWIG's internal ones from attn.h: same
            // members (ATTN_PARAM_WINDOW_LEFT <-> WindowLeft), same values, none missing.
            var pairs = new[] {
                Tuple.Create(typeof(attn_param), typeof(Param), "ATTN_PARAM_"),
                Tuple.Create(typeof(attn_alibi), typeof(Alibi), "ATTN_ALIBI_"),
                Tuple.Create(typeof(attn_weights_mode), typeof(WeightsMode), "ATTN_WEIGHTS_"),
                Tuple.Create(typeof(attn_compute), typeof(Compute), "ATTN_COMPUTE_"),
                Tuple.Create(typeof(attn_diagonal), typeof(Diagonal), "ATTN_DIAGONAL_"),
                Tuple.Create(typeof(attn_alibi_form), typeof(AlibiForm), "ATTN_ALIBI_"),
                Tuple.Create(typeof(attn_op), typeof(Op), "ATTN_OP_") };
            foreach (var t in pairs)
            {
                string[] raw = Enum.GetNames(t.Item1);
                Assert.AreEqual(raw.Length, Enum.GetNames(t.Item2).Length, t.Item2.Name);
                foreach (string c in raw)
                {
                    string pascal = string.Concat(c.Substring(t.Item3.Length).Split('_')
                        .Select(x => x.Substring(0, 1) + x.Substring(1).ToLowerInvariant()));
                    Assert.IsTrue(Enum.IsDefined(t.Item2, pascal), t.Item2.Name + "." + pascal);
                    Assert.AreEqual((int)Enum.Parse(t.Item1, c), (int)Enum.Parse(t.Item2, pascal), c);
                }
            }
            var ops = new[] { Operand.Q, Operand.K, Operand.V, Operand.Out, Operand.Lse,
                              Operand.Weights, Operand.KeyValid, Operand.Allowed, Operand.Bias,
                              Operand.AlibiSlopes, Operand.Sinks, Operand.QueryValid,
                              Operand.SeqLensK, Operand.KeyMass, Operand.CuSeqlensQ,
                              Operand.CuSeqlensK, Operand.BlockTable, Operand.NewK, Operand.NewV,
                              Operand.DOut, Operand.DQ, Operand.DK, Operand.DV, Operand.DBias,
                              Operand.DSinks, Operand.KScale, Operand.VScale, Operand.NewKScale,
                              Operand.NewVScale };
            for (int i = 0; i < ops.Length; i++) Assert.AreEqual(i, (int)ops[i]);
            Assert.AreEqual(ops.Length, Enum.GetValues(typeof(Operand)).Length);
            Assert.AreEqual(9, (int)Param.BiasFirst);
            Assert.AreEqual(13, (int)Param.BatchInvariant);
            Assert.AreEqual(14, (int)Param.Compute);
            Assert.AreEqual(1, (int)Compute.Fp16);
            Assert.AreEqual(2, (int)Alibi.Standard);
            Assert.AreEqual(3, (int)WeightsMode.Capped);
            Assert.AreEqual(2, (int)Op.Backward);
        }

        [Test]
        public void PublicSurfaceIsTheFaceAndTheEnums()
        {
            string[] exported = typeof(Attention).Assembly.GetExportedTypes()
                                    .Select(x => x.FullName).OrderBy(x => x).ToArray();
            CollectionAssert.AreEqual(
                new[] { "LibAttn.Alibi", "LibAttn.AlibiForm", "LibAttn.Attention",
                        "LibAttn.AttentionArgs", "LibAttn.AttentionDesc",
                        "LibAttn.AttentionDesc+Builder", "LibAttn.AttentionException",
                        "LibAttn.Causal", "LibAttn.Compute", "LibAttn.Diagonal", "LibAttn.Dtype",
                        "LibAttn.IsaInfo", "LibAttn.Op", "LibAttn.Operand", "LibAttn.OperandInfo",
                        "LibAttn.Param", "LibAttn.ParamBounds", "LibAttn.ParamInfo",
                        "LibAttn.Status", "LibAttn.WeightsMode" },
                exported, "no SWIGTYPE_p_* or raw class leaks: " + string.Join(", ", exported));
        }

        [Test]
        public void BoundsComeFromTheLibrary()
        {
            var expected = new Dictionary<Param, Tuple<bool, double, double>> {
                { Param.Causal, Tuple.Create(false, 0.0, 2.0) },
                { Param.Scale, Tuple.Create(true, -(double)float.MaxValue, (double)float.MaxValue) },
                { Param.WindowLeft, Tuple.Create(false, -1.0, 2147483647.0) },
                { Param.WindowRight, Tuple.Create(false, -1.0, 2147483647.0) },
                { Param.Softcap, Tuple.Create(true, 0.0, (double)float.MaxValue) },
                { Param.Alibi, Tuple.Create(false, 0.0, 2.0) },
                { Param.SoftmaxPlusOne, Tuple.Create(false, 0.0, 1.0) },
                { Param.HeadDimV, Tuple.Create(false, 1.0, 2147483647.0) },
                { Param.WeightsMode, Tuple.Create(false, 0.0, 4.0) },
                { Param.BiasFirst, Tuple.Create(false, 0.0, 1.0) },
                { Param.Varlen, Tuple.Create(false, 0.0, 1.0) },
                { Param.PageSize, Tuple.Create(false, 0.0, 2147483647.0) },
                { Param.MaxPages, Tuple.Create(false, 0.0, 2147483647.0) },
                { Param.BatchInvariant, Tuple.Create(false, 0.0, 1.0) },
                { Param.Compute, Tuple.Create(false, 0.0, 1.0) },
                { Param.Diagonal, Tuple.Create(false, 0.0, 2.0) },
                { Param.AlibiForm, Tuple.Create(false, 0.0, 1.0) } };
            foreach (Param p in Enum.GetValues(typeof(Param)))
            {
                ParamBounds b = Attention.Bounds(p);
                Assert.AreEqual(p, b.Param);
                Assert.AreEqual(expected[p].Item1, b.IsFloat, p + " kind");
                Assert.AreEqual(expected[p].Item2, b.Min, p + " min");
                Assert.AreEqual(expected[p].Item3, b.Max, p + " max");
                Assert.IsFalse(b.Accepts(double.NaN));
            }
            Assert.IsTrue(Attention.Bounds(Param.Softcap).Accepts(0.5));
            Assert.IsFalse(Attention.Bounds(Param.HeadDimV).Accepts(2.5));
            foreach (int bad in new[] { 255, -1, 1000, int.MinValue }) // no attn.h id
            {
                var e = Assert.Throws<ArgumentOutOfRangeException>(() => Attention.Bounds((Param)bad));
                Assert.AreEqual("param", e.ParamName);
                StringAssert.Contains("param (" + bad + ") is not an attn_param", e.Message);
            }
        }

        [Test]
        public void DefaultScaleIsExactlyTheLibrarysFloat()
        {
            foreach (int d in new[] { 1, 3, 6, 7, 17, 64, 96, 128, 192 })
                using (var desc = new AttentionDesc.Builder().SeqLen(5, 7).HeadDim(d).Build())
                {
                    // 1.0f / sqrtf(d) in float arithmetic: sqrt and division of floats rounded once
                    // each (a double result rounded to float is the correctly rounded float one).
                    float sqrtf = (float)Math.Sqrt(d);
                    float expected = (float)(1.0 / sqrtf);
                    Assert.AreEqual(expected, desc.Scale, "head_dim " + d);
                    Assert.AreEqual((double)expected, desc.GetDouble(Param.Scale), "head_dim " + d);
                    // Bit for bit the same results as that scale given explicitly.
                    TestInputs a = Run02.Random(desc, d);
                    float[] o1, l1, w1, m1, o2, l2, w2, m2;
                    Run02.Both(desc, a, out o1, out l1, out w1, out m1);
                    using (var explicitScale = new AttentionDesc.Builder().SeqLen(5, 7).HeadDim(d)
                                                   .Scale(desc.Scale).Build())
                        Run02.Both(explicitScale, a, out o2, out l2, out w2, out m2);
                    CollectionAssert.AreEqual(o1, o2, "head_dim " + d);
                    CollectionAssert.AreEqual(l1, l2, "head_dim " + d);
                    CollectionAssert.AreEqual(w1, w2, "head_dim " + d);
                }
        }

        [Test]
        public void EveryParameterIsReadBackFromTheLibrary()
        {
            using (var desc = Small().Build())
            {
                Assert.AreEqual(Causal.None, desc.Causal);
                Assert.AreEqual(0.5f, desc.Scale);
                Assert.AreEqual(-1, desc.WindowLeft);
                Assert.AreEqual(-1, desc.WindowRight);
                Assert.AreEqual(0f, desc.Softcap);
                Assert.AreEqual(Alibi.None, desc.Alibi);
                Assert.IsFalse(desc.SoftmaxPlusOne);
                Assert.AreEqual(4, desc.HeadDimV);
                Assert.AreEqual(WeightsMode.Softmax, desc.WeightsMode);
                Assert.IsFalse(desc.BiasFirst);
            }
            using (var desc = Small().Causal(Causal.BottomRight).Scale(0.3f).Window(2, 0)
                                  .Softcap(7.5f).Alibi(Alibi.Standard).SoftmaxPlusOne()
                                  .HeadDimV(6).WeightsMode(WeightsMode.Capped).BiasFirst().Build())
            {
                Assert.AreEqual(Causal.BottomRight, desc.Causal);
                Assert.AreEqual(0.3f, desc.Scale);
                Assert.AreEqual(2, desc.WindowLeft);
                Assert.AreEqual(0, desc.WindowRight);
                Assert.AreEqual(7.5f, desc.Softcap);
                Assert.AreEqual(Alibi.Standard, desc.Alibi);
                Assert.IsTrue(desc.SoftmaxPlusOne);
                Assert.AreEqual(6, desc.HeadDimV);
                Assert.AreEqual(WeightsMode.Capped, desc.WeightsMode);
                Assert.IsTrue(desc.BiasFirst);
                // head_dim_v resizes V and OUT (contiguous, 6 per row).
                Assert.AreEqual(2UL * 2 * 5 * 6, desc.RequiredLen(Operand.V));
                Assert.AreEqual(2UL * 4 * 3 * 6, desc.RequiredLen(Operand.Out));
                Assert.AreEqual(2UL * 2 * 5 * 4, desc.RequiredLen(Operand.K));
                // The generic getters agree.
                Assert.AreEqual(2, desc.GetInt(Param.Causal));
                Assert.AreEqual((double)0.3f, desc.GetDouble(Param.Scale));
                Assert.AreEqual(7, desc.GetInt(Param.Softcap)); // rounded toward zero
                Assert.AreEqual(7.5, desc.GetDouble(Param.Softcap));
                Assert.AreEqual(6.0, desc.GetDouble(Param.HeadDimV));
                // 255: an id attn.h does not define (10..13 are the serving parameters:
                // ServingTests.ServingParametersAreReadBackAndChecked).
                var e = Assert.Throws<ArgumentOutOfRangeException>(() => desc.GetInt((Param)255));
                StringAssert.Contains("param (255)", e.Message);
                Assert.Throws<ArgumentOutOfRangeException>(() => desc.GetDouble((Param)(-1)));
            }
            // The generic setters, from an integer or a double.
            using (var desc = Small().Set(Param.WindowLeft, 3L).Set(Param.WindowRight, 1.0)
                                  .Set(Param.Softcap, 2L).Set(Param.Scale, 0.25)
                                  .Set(Param.Causal, 1L).Build())
            {
                Assert.AreEqual(3, desc.WindowLeft);
                Assert.AreEqual(1, desc.WindowRight);
                Assert.AreEqual(2f, desc.Softcap);
                Assert.AreEqual(0.25f, desc.Scale);
                Assert.AreEqual(Causal.TopLeft, desc.Causal);
            }
            // Later settings win; a builder builds many descriptors.
            var bl = Small().Window(1, 1).Window(5, -1);
            using (AttentionDesc a = bl.Build(), b = bl.HeadDimV(2).Build())
            {
                Assert.AreEqual(5, a.WindowLeft);
                Assert.AreEqual(-1, a.WindowRight);
                Assert.AreEqual(4, a.HeadDimV);
                Assert.AreEqual(2, b.HeadDimV);
            }
        }

        // True when this CPU has AVX512-FP16 (Linux: the avx512_fp16 flag of /proc/cpuinfo).
        static bool CpuHasAvx512Fp16()
        {
            try
            {
                foreach (string line in System.IO.File.ReadLines("/proc/cpuinfo"))
                    if (line.StartsWith("flags", StringComparison.Ordinal)
                        && line.Split((char[])null, StringSplitOptions.RemoveEmptyEntries)
                               .Contains("avx512_fp16"))
                        return true;
            }
            catch (System.IO.IOException)
            {
                // not Linux: unknown, so only closeness is checked
            }
            catch (UnauthorizedAccessException)
            {
            }
            return false;
        }

        [Test]
        public void ComputeDefaultsToExactAndIsReadBack()
        {
            using (var desc = Small().Build())
            {
                Assert.AreEqual(Compute.Exact, desc.Compute);
                Assert.AreEqual(0, desc.GetInt(Param.Compute));
            }
            using (var desc = Small().Compute(Compute.Fp16).Build())
            {
                Assert.AreEqual(Compute.Fp16, desc.Compute);
                Assert.AreEqual(1, desc.GetInt(Param.Compute));
                Assert.AreEqual(1.0, desc.GetDouble(Param.Compute));
            }
            // The generic setters; later settings win.
            using (AttentionDesc a = Small().Set(Param.Compute, 1L).Build(),
                                 b = Small().Set(Param.Compute, 1.0).Build(),
                                 c = Small().Compute(Compute.Fp16).Compute(Compute.Exact).Build())
            {
                Assert.AreEqual(Compute.Fp16, a.Compute);
                Assert.AreEqual(Compute.Fp16, b.Compute);
                Assert.AreEqual(Compute.Exact, c.Compute);
            }
        }

        [Test]
        public void ComputeRefusesAnInvalidValue()
        {
            // Refused when set, with the library's message and the argument's name.
            var e = Assert.Throws<ArgumentOutOfRangeException>(() => Small().Compute((Compute)2));
            Assert.AreEqual("mode", e.ParamName);
            StringAssert.Contains("(2) is outside [0, 1]", e.Message);
            e = Assert.Throws<ArgumentOutOfRangeException>(() => Small().Set(Param.Compute, 2L));
            StringAssert.Contains("(2) is outside [0, 1]", e.Message);
            // The library's own check: its message names ATTN_PARAM_COMPUTE.
            IntPtr raw;
            Errors.Check(AttnNative.attn_desc_create(out raw, 1, 2, 2, 64, 64, 32));
            try
            {
                var ae = Assert.Throws<ArgumentException>(
                    () => Errors.Check(AttnNative.attn_desc_set_int(raw, (attn_param)Param.Compute, 2)));
                StringAssert.Contains("attn_desc_set_int: ATTN_PARAM_COMPUTE (2)", ae.Message);
                long v;
                Errors.Check(AttnNative.attn_desc_get_int(raw, (attn_param)Param.Compute, out v));
                Assert.AreEqual(0, v, "the refused value changed nothing");
            }
            finally
            {
                AttnNative.attn_desc_destroy(raw);
            }
        }

        [Test]
        public void ComputeFp16StaysCloseToExactOnAPrefill()
        {
            var rng = new System.Random(1400);
            int n = 1 * 2 * 64 * 32;
            float[] q = new float[n], k = new float[n], v = new float[n];
            foreach (float[] a in new[] { q, k, v })
                for (int i = 0; i < n; i++) a[i] = (float)(2 * rng.NextDouble() - 1);
            float[] exact, fp16;
            var b = new AttentionDesc.Builder().Dims(1, 2, 2, 64, 64, 32);
            using (var desc = b.Build()) exact = desc.Forward(q, k, v);
            using (var desc = b.Compute(Compute.Fp16).Build()) fp16 = desc.Forward(q, k, v);
            double worst = 0;
            int differ = 0;
            for (int i = 0; i < n; i++)
            {
                worst = Math.Max(worst, Math.Abs((double)fp16[i] - exact[i]));
                if (fp16[i] != exact[i]) differ++;
            }
            Assert.LessOrEqual(worst, 1e-2, "max |fp16 - exact|");
            // With AVX512-FP16 (and the kernels not capped below avx512: Isa "avx512", or
            // "avx512fp16" where the library names that level) the fast path runs: its rounding
            // shows.
            if (CpuHasAvx512Fp16() && Attention.Isa.StartsWith("avx512", StringComparison.Ordinal))
                Assert.Greater(differ, 0, "Fp16 gave Exact's bits: the fast path did not run");
        }

        [Test]
        public void BadParametersAreRefusedWhenSetNamingTheArgumentAndValue()
        {
            var cases = new List<Tuple<TestDelegate, string, string>> {
                Tuple.Create<TestDelegate, string, string>(() => Small().Window(-2, 0), "left",
                    "(-2) is outside [-1, "),
                Tuple.Create<TestDelegate, string, string>(() => Small().Window(0, 1L << 31), "right",
                    "(2147483648) is outside [-1, "),
                Tuple.Create<TestDelegate, string, string>(() => Small().Window(long.MinValue, 0), "left",
                    "(-9.2233720368547758e+18) is outside"), // no truncation to 32 bits
                Tuple.Create<TestDelegate, string, string>(() => Small().Softcap(-1f), "cap",
                    "(-1) is outside"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Softcap(float.NaN), "cap",
                    "must not be NaN"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Softcap(float.PositiveInfinity),
                    "cap", "(inf) is outside"),
                Tuple.Create<TestDelegate, string, string>(() => Small().HeadDimV(0), "headDimV",
                    "(0) is outside [1, "),
                Tuple.Create<TestDelegate, string, string>(() => Small().HeadDimV(1L << 32), "headDimV",
                    "(4294967296) is outside"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Alibi((Alibi)3), "mode",
                    "(3) is outside [0, 2]"),
                Tuple.Create<TestDelegate, string, string>(() => Small().WeightsMode((WeightsMode)5),
                    "mode", "(5) is outside [0, 4]"),
                Tuple.Create<TestDelegate, string, string>(() => Small().WeightsMode((WeightsMode)(-1)),
                    "mode", "(-1) is outside [0, 4]"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Causal((Causal)3), "causal",
                    "(3) is outside [0, 2]"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Scale(float.NegativeInfinity),
                    "scale", "(-inf) is outside"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Set(Param.Scale, 1e39), "value",
                    "e+38) is outside [-3.4"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Set(Param.SoftmaxPlusOne, 2L),
                    "value", "(2) is outside [0, 1]"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Set(Param.BiasFirst, -1L),
                    "value", "(-1) is outside [0, 1]"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Set(Param.HeadDimV, 2.5),
                    "value", "(2.5) must be an integer"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Set(Param.WindowLeft, double.NaN),
                    "value", "must not be NaN"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Set((Param)255, 1L), "param",
                    "param (255) is not an attn_param"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Set((Param)(-7), 1.0), "param",
                    "param (-7) is not an attn_param"),
                Tuple.Create<TestDelegate, string, string>(() => Small().Strides((Operand)29, 1, 1, 1),
                    "which", "which (29) is not an Operand value"),
            };
            foreach (var c in cases)
            {
                var e = Assert.Throws<ArgumentOutOfRangeException>(c.Item1, c.Item3);
                Assert.AreEqual(c.Item2, e.ParamName, c.Item3);
                StringAssert.Contains(c.Item3, e.Message);
            }
            // Combinations only the library can judge: at Build, with its message.
            // head_dim_v reaches the library before the strides, whatever the order of the calls:
            // OUT rows 4 floats apart nest for head_dim 4, not for head_dim_v 6.
            Small().Strides(Operand.Out, 48, 12, 4).Build().Dispose();
            var be = Assert.Throws<ArgumentException>(
                () => Small().Strides(Operand.Out, 48, 12, 4).HeadDimV(6).Build());
            StringAssert.Contains("out strides (48, 12, 4) do not nest: output rows of 6 floats",
                                  be.Message);
            be = Assert.Throws<ArgumentException>(
                () => new AttentionDesc.Builder().Dims(1L << 20, 1, 1, 1L << 20, 1, 4)
                          .HeadDimV(int.MaxValue).Build());
            StringAssert.Contains("ATTN_PARAM_HEAD_DIM_V (2147483647) makes the V or OUT size overflow",
                                  be.Message);
            // A refused setter leaves the builder as it was.
            var ok = Small();
            Assert.Throws<ArgumentOutOfRangeException>(() => ok.Window(3, -9));
            using (var desc = ok.Build())
            {
                Assert.AreEqual(-1, desc.WindowLeft);
                Assert.AreEqual(-1, desc.WindowRight);
            }
        }
    }

    [TestFixture]
    public class OperandTests
    {
        // Every operation of this fixture runs cases of tests/vectors/variants.txt through
        // Run02.Both (Builder's typed setters, every operand bound, Forward then Weights) and
        // checks them against the expected files.

        [Test]
        public void WindowMatchesSharedVectors()
        {
            // Left and right windows, alone and with each causal rule, seq 70 (more than one
            // key tile, the window crossing tile boundaries), GQA with sinks.
            Run02.CheckVectors(c => c.ContainsKey("window_left") || c.ContainsKey("window_right"),
                               9, "window");
            CollectionAssert.IsSubsetOf(new[] { "win_diag_only", "win_right_only", "win_tl_seq70",
                                                "win_causal_br_sq_gt_sk" },
                                        Vectors.Lines("variants.txt").Select(c => c["name"]));
        }

        [Test]
        public void SoftcapAndBiasInBothOrdersMatchSharedVectors()
        {
            var lines = Vectors.Lines("variants.txt");
            Func<Dictionary<string, string>, string, bool> first = (c, v) =>
                c.ContainsKey("softcap") && Run02.Has(c, "bias")
                && (c.ContainsKey("bias_first") ? c["bias_first"] : "0") == v;
            Assert.IsTrue(lines.Any(c => first(c, "0")) && lines.Any(c => first(c, "1")),
                          "softcap with a bias in both orders");
            Run02.CheckVectors(c => c.ContainsKey("softcap"), 5, "softcap");
        }

        [Test]
        public void BiasStridesBroadcastAndMinusInfinityMatchSharedVectors()
        {
            // Full, broadcast over batch and heads (strides 0, 0, seq_k), over queries (row
            // stride 0), with NaN gaps and -inf entries that hide keys (a whole row in one case).
            Run02.CheckVectors(c => Run02.Has(c, "bias"), 7, "bias");
            var ninf = Vectors.Line("variants.txt", "bias_ninf");
            Assert.IsTrue(Util.ReadF32(Vectors.Prefix(ninf) + "lse.f32").Any(float.IsNegativeInfinity),
                          "bias_ninf has a row whose keys the bias hides");
            Assert.AreEqual("0,0,6", Vectors.Line("variants.txt", "bias_bcast_bh")["strides.bias"]);
            Assert.AreEqual("18,9,0", Vectors.Line("variants.txt", "bias_bcast_rows")["strides.bias"]);
        }

        [Test]
        public void AlibiOperandAndStandardMatchSharedVectors()
        {
            Run02.CheckVectors(c => c.ContainsKey("alibi") && c["alibi"] == "1", 3, "alibi operand");
            Run02.CheckVectors(c => c.ContainsKey("alibi") && c["alibi"] == "2", 4, "alibi standard");

            // The standard slopes themselves (capi/attn.h: 2^(-8 (h + 1) / n) for the largest
            // power of two n <= heads, then 2^(-8 (2 x + 1) / (2 n)) for the remaining heads),
            // read off the Masked scores of a zero query: one query, bottom-right, so key j is
            // seq_k - 1 - j behind it and scores -slope_h * (seq_k - 1 - j), exactly.
            var slopes = new Dictionary<int, double[]> {
                { 4, new[] { 0.25, 0.0625, 0.015625, 0.00390625 } },
                { 5, new[] { 0.25, 0.0625, 0.015625, 0.00390625, 0.5 } },
                { 6, new[] { 0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125 } },
                { 8, Enumerable.Range(1, 8).Select(h => Math.Pow(2, -h)).ToArray() } };
            const int SK = 6, D = 4;
            foreach (var e in slopes)
                using (var desc = new AttentionDesc.Builder().Dims(1, e.Key, 1, 1, SK, D)
                                      .Causal(Causal.BottomRight).Alibi(Alibi.Standard)
                                      .WeightsMode(WeightsMode.Masked).Build())
                using (var args = new AttentionArgs())
                {
                    var w = new float[desc.RequiredLen(Operand.Weights)];
                    args.Bind(Operand.Q, new float[e.Key * D]).Bind(Operand.K, Util.Values(SK * D, e.Key))
                        .Bind(Operand.Weights, w);
                    desc.Run(Op.Weights, args);
                    for (int h = 0; h < e.Key; h++)
                        for (int j = 0; j < SK; j++)
                            Assert.AreEqual(-e.Value[h] * (SK - 1 - j), (double)w[h * SK + j],
                                            e.Key + " heads: head " + h + ", key " + j);
                }
        }

        [Test]
        public void SinksAndPlusOneMatchSharedVectors()
        {
            Run02.CheckVectors(c => Run02.Has(c, "sinks") || c.ContainsKey("softmax_plus_one"), 5,
                               "sinks and +1");
            // A row with no visible key is 0 / -inf even with a sink; +1 over a batch of padding.
            var masked = Vectors.Line("variants.txt", "sinks_masked_row");
            Assert.IsTrue(Util.ReadF32(Vectors.Prefix(masked) + "lse.f32").Any(float.IsNegativeInfinity),
                          "sinks_masked_row has a row without a visible key");
            Assert.IsTrue(Run02.Has(Vectors.Line("variants.txt", "plus_one_padded_batch"), "key_valid"));
        }

        [Test]
        public void QueryPaddingSeqLensAndKeyMassMatchSharedVectors()
        {
            // Padded queries, per-batch key lengths (0 included: decode), the key mass output;
            // padding K/V rows of the files are NaN, never read.
            Run02.CheckVectors(c => Run02.Has(c, "query_valid") || Run02.Has(c, "seq_lens_k")
                                    || c["mass"] == "1", 7, "query padding, seq lens, key mass");
        }

        [Test]
        public void HeadDimVAndStridesMatchSharedVectors()
        {
            Run02.CheckVectors(c => c.ContainsKey("head_dim_v") || c.Keys.Any(k => k.StartsWith("strides.")),
                               6, "head_dim_v and strides");
            // BSHD everywhere with head_dim_v 20, set after the strides in the builder (Build
            // applies it before them, so V and OUT keep these strides).
            var hdv = Vectors.Line("variants.txt", "hdv_8_20_bshd");
            Assert.AreEqual("20", hdv["head_dim_v"]);
            var b = new AttentionDesc.Builder().Dims(2, 4, 2, 5, 7, 8);
            foreach (string op in new[] { "q", "k", "v", "out" })
                Vectors.Strides(b, Vectors.OperandOf(op), hdv["strides." + op], "strides." + op);
            Run02.Check(hdv, b.HeadDimV(20));
        }

        [Test]
        public void EverythingAtOnceMatchesSharedVectors()
        {
            // Every parameter and operand in one call, with sinks and with "+1".
            Run02.CheckVectors(c => c["name"].StartsWith("all_combined"), 2, "all combined");
        }

        // Op.Weights of a variants.txt line (which may have been changed by Without) in a score
        // mode: the [batch][heads_q][seq_q][seq_k] scores.
        static float[] ScoresOf(Dictionary<string, string> c, WeightsMode mode)
        {
            using (var desc = Vectors.Builder(c).WeightsMode(mode).Build())
            using (var args = new AttentionArgs())
            {
                Assert.AreEqual(mode, desc.WeightsMode);
                Vectors.BindInputs(c, desc, args, true); // V too: Op.Weights ignores it
                var w = new float[desc.RequiredLen(Operand.Weights)];
                args.Bind(Operand.Weights, w);
                desc.Run(Op.Weights, args);
                return w;
            }
        }

        // A copy of a line without some parameters and inputs (the data files stay the case's).
        static Dictionary<string, string> Without(Dictionary<string, string> c, string[] keys,
                                                  params string[] inputs)
        {
            var r = new Dictionary<string, string>(c);
            foreach (string k in keys) r.Remove(k);
            r["in"] = string.Join(",", Vectors.Inputs(c).Where(x => !inputs.Contains(x)));
            return r;
        }

        // Scores of the logits the softmax reads against the case's expected probabilities and
        // lse: w = exp(s - lse) within 1e-5, and where w is exactly 0 (a hidden key) s is -inf,
        // unless visibleOnly (for a stage before the masks: only the visible keys are compared).
        // Padded query rows (query_valid false) are skipped. Returns the entries compared.
        static int CheckAgainstSoftmax(Dictionary<string, string> c, float[] s, bool visibleOnly,
                                       string what)
        {
            string p = Vectors.Prefix(c);
            float[] w = Util.ReadF32(p + "weights.f32"), lse = Util.ReadF32(p + "lse.f32");
            Assert.AreEqual(w.Length, s.Length, what + ": length");
            int hq = int.Parse(c["heads_q"]), sq = int.Parse(c["seq_q"]), sk = int.Parse(c["seq_k"]);
            byte[] qv = Run02.Has(c, "query_valid") ? File.ReadAllBytes(p + "query_valid.u8") : null;
            int n = 0;
            for (int i = 0; i < w.Length; i++)
            {
                int row = i / sk, b = row / (hq * sq), q = row % sq;
                if (qv != null && qv[b * sq + q] == 0) continue;
                string at = what + " [row " + row + ", key " + (i % sk) + "]";
                if (w[i] == 0)
                {
                    if (!visibleOnly) Assert.AreEqual(float.NegativeInfinity, s[i], at + " hidden");
                    continue;
                }
                Util.AssertClose(w[i], (float)Math.Exp((double)s[i] - lse[row]), at);
                n++;
            }
            return n;
        }

        [Test]
        public void WeightsModesWriteTheScoresOfEachStage()
        {
            // The scores of each stage, anchored on the shared vectors: the final logits (Capped,
            // and Masked / Scores / Softcapped where the stages they skip are absent) must give
            // the expected probabilities as exp(s - lse); what a stage skips must not change it.
            string[] capped = { "softcap_bias_after", "softcap_bias_first", "strided_gaps_softcap",
                                "kvpad_nan_bias_alibi", "alibi_standard_5h_br_lens", "bias_ninf",
                                "sinks_masked_row", "win_causal_br_sq_lt_sk", "all_combined",
                                "all_combined_plus_one" };
            var lines = capped.Select(n => Vectors.Line("variants.txt", n)).ToList();
            string[] cap = { "softcap", "bias_first" };
            foreach (var c in lines)
            {
                string name = c["name"];
                float[] s = ScoresOf(c, WeightsMode.Capped);
                Assert.Greater(CheckAgainstSoftmax(c, s, false, name + " Capped"), 0, name);
                float[] masked = ScoresOf(c, WeightsMode.Masked);
                if (!c.ContainsKey("softcap"))
                {
                    // Masked is every step but the softcap: here the final logits too.
                    CollectionAssert.AreEqual(s, masked, name + ": Masked = Capped without a softcap");
                    continue;
                }
                // The softcap changes Capped, not Masked.
                CollectionAssert.AreEqual(ScoresOf(Without(c, cap), WeightsMode.Masked), masked,
                                          name + ": Masked ignores the softcap");
                CollectionAssert.AreEqual(ScoresOf(Without(c, cap), WeightsMode.Capped), masked,
                                          name + ": Masked = Capped without the softcap");
                CollectionAssert.AreNotEqual(s, masked, name + ": Capped applies the softcap");
                // Softcapped is softcap(scale q.k) alone: no bias, ALiBi or mask changes it.
                float[] soft = ScoresOf(c, WeightsMode.Softcapped);
                string[] rest = { "causal", "window_left", "window_right", "alibi", "bias_first",
                                  "softmax_plus_one" };
                CollectionAssert.AreEqual(
                    ScoresOf(Without(c, rest, "bias", "alibi_slopes", "allowed", "sinks"),
                             WeightsMode.Softcapped),
                    soft, name + ": Softcapped ignores bias, ALiBi and masks");
                if (!Run02.Has(c, "bias") && !c.ContainsKey("alibi") && !c.ContainsKey("causal")
                    && !Run02.Has(c, "allowed") && !c.ContainsKey("window_left"))
                    CheckAgainstSoftmax(c, soft, false, name + " Softcapped");
            }

            // Scores is scale * q.k alone: no softcap, bias, ALiBi or mask changes it, and on the
            // visible keys of a case without softcap, bias and ALiBi it is the final logit.
            string[] all = { "causal", "window_left", "window_right", "softcap", "alibi",
                             "bias_first", "softmax_plus_one" };
            foreach (var c in lines)
                CollectionAssert.AreEqual(
                    ScoresOf(Without(c, all, "bias", "alibi_slopes", "allowed", "sinks"),
                             WeightsMode.Scores),
                    ScoresOf(c, WeightsMode.Scores), c["name"] + ": Scores ignores every later stage");
            foreach (string n in new[] { "win_causal_br_sq_lt_sk", "sinks_masked_row",
                                         "seqlens_br_prefill", "qpad_causal_br_mass" })
            {
                var c = Vectors.Line("variants.txt", n);
                float[] s = ScoresOf(c, WeightsMode.Scores);
                Assert.Greater(CheckAgainstSoftmax(c, s, true, n + " Scores"), 0, n);
                Assert.IsFalse(s.Any(float.IsNaN), n + ": Scores");
            }
            var only = Vectors.Line("variants.txt", "softcap_only");
            Assert.IsTrue(!Run02.Has(only, "bias") && !only.ContainsKey("causal"));
            float[] so = ScoresOf(only, WeightsMode.Softcapped);
            Assert.AreEqual(so.Length, CheckAgainstSoftmax(only, so, false, "softcap_only Softcapped"));
            CollectionAssert.AreNotEqual(ScoresOf(only, WeightsMode.Scores), so, "Scores has no softcap");

            // Padded keys (key_valid false, j >= seq_lens_k[b]) are never read (their K rows are
            // NaN in the files): -inf in every score mode; masks hide entries only in Masked and
            // Capped.
            var pc = Vectors.Line("variants.txt", "seqlens_br_prefill");
            byte[] kv = File.ReadAllBytes(Vectors.Prefix(pc) + "key_valid.u8");
            int[] lens = Vectors.ReadRaw<int>(Vectors.Prefix(pc) + "seq_lens_k.i32", 4);
            int hq = int.Parse(pc["heads_q"]), sq = int.Parse(pc["seq_q"]), sk = int.Parse(pc["seq_k"]);
            Assert.AreEqual("2", pc["causal"]);
            foreach (WeightsMode mode in new[] { WeightsMode.Scores, WeightsMode.Masked,
                                                 WeightsMode.Capped, WeightsMode.Softcapped })
            {
                float[] s = ScoresOf(pc, mode);
                bool masks = mode == WeightsMode.Masked || mode == WeightsMode.Capped;
                int hidden = 0;
                for (int i = 0; i < s.Length; i++)
                {
                    int j = i % sk, b = i / (sk * sq * hq);
                    if (kv[b * sk + j] == 0 || j >= lens[b])
                        Assert.AreEqual(float.NegativeInfinity, s[i], mode + " padded key [" + i + "]");
                    else if (!masks)
                        Assert.IsFalse(float.IsNaN(s[i]) || float.IsInfinity(s[i]), mode + " [" + i + "]");
                    else if (float.IsNegativeInfinity(s[i]))
                        hidden++;
                }
                if (masks) Assert.Greater(hidden, 0, mode + ": the causal rule hides keys");
                if (masks) CheckAgainstSoftmax(pc, s, false, "seqlens_br_prefill " + mode);
            }
        }

        [Test]
        public void RunMatchesThe01CallsBitForBit()
        {
            int B = 2, HQ = 4, HKV = 2, SQ = 5, SK = 9, D = 6;
            float[] q = Util.Values(B * HQ * SQ * D, 4), k = Util.Values(B * HKV * SK * D, 5),
                    v = Util.Values(B * HKV * SK * D, 6);
            bool[] kv = Run02.Mask(B * SK, 4), al = Run02.Mask(SQ * SK, 5);
            using (var desc = new AttentionDesc.Builder().Dims(B, HQ, HKV, SQ, SK, D)
                                  .Causal(Causal.BottomRight).Build())
            using (var args = new AttentionArgs())
            {
                var o1 = new float[desc.RequiredLen(Operand.Out)];
                var l1 = new float[desc.RequiredLen(Operand.Lse)];
                desc.Forward(q, k, v, kv, al, o1, l1);
                float[] w1 = desc.Weights(q, k, kv, al);
                var o2 = new float[o1.Length];
                var l2 = new float[l1.Length];
                var w2 = new float[w1.Length];
                args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v)
                    .Bind(Operand.KeyValid, kv).Bind(Operand.Allowed, al)
                    .Bind(Operand.Out, o2).Bind(Operand.Lse, l2).Bind(Operand.Weights, w2);
                desc.Run(Op.Forward, args);
                desc.Run(Op.Weights, args);
                CollectionAssert.AreEqual(o1, o2);
                CollectionAssert.AreEqual(l1, l2);
                CollectionAssert.AreEqual(w1, w2);
            }
        }
    }

    // Memory not backed by a managed array (AllocHGlobal), for the MemoryHandle pinning path.
    sealed unsafe class NativeFloats : MemoryManager<float>
    {
        readonly IntPtr ptr;
        readonly int length;
        public int Pins;

        public NativeFloats(int length)
        {
            this.length = length;
            ptr = Marshal.AllocHGlobal(length * sizeof(float));
        }

        public override Span<float> GetSpan() { return new Span<float>((void*)ptr, length); }

        public override MemoryHandle Pin(int elementIndex = 0)
        {
            Pins++;
            return new MemoryHandle((float*)ptr + elementIndex);
        }

        public override void Unpin() { }

        protected override void Dispose(bool disposing) { Marshal.FreeHGlobal(ptr); }
    }

    sealed unsafe class NativeBytes : MemoryManager<byte>
    {
        readonly IntPtr ptr;
        readonly int length;

        public NativeBytes(int length)
        {
            this.length = length;
            ptr = Marshal.AllocHGlobal(length);
        }

        public override Span<byte> GetSpan() { return new Span<byte>((void*)ptr, length); }

        public override MemoryHandle Pin(int elementIndex = 0)
        {
            return new MemoryHandle((byte*)ptr + elementIndex);
        }

        public override void Unpin() { }

        protected override void Dispose(bool disposing) { Marshal.FreeHGlobal(ptr); }
    }

    [TestFixture]
    public class ArgsTests
    {
        // B=2, HQ=4, HKV=2, SQ=3, SK=5, D=4: Q/OUT 96, K/V 80, LSE 24, W 120, KV 10, ALLOWED 15,
        // BIAS 120, heads 4, QV 6, SEQ_LENS 2, MASS 40.
        static AttentionDesc Desc(int alibi = 0)
        {
            return new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4).Alibi((Alibi)alibi).Build();
        }

        static AttentionArgs Filled(float[] q, float[] kv, float[] o)
        {
            return new AttentionArgs().Bind(Operand.Q, q).Bind(Operand.K, kv).Bind(Operand.V, kv)
                       .Bind(Operand.Out, o);
        }

        [Test]
        public void RequiredLenOfEveryOperand()
        {
            using (var desc = Desc())
            {
                var want = new ulong[] { 96, 80, 80, 96, 24, 120, 10, 15, 120, 4, 4, 6, 2, 40 };
                for (int i = 0; i < want.Length; i++)
                    Assert.AreEqual(want[i], desc.RequiredLen((Operand)i), ((Operand)i).ToString());
            }
        }

        [Test]
        public void MasksAsBoolsBytesOrMemoryAndSlicesGiveIdenticalBits()
        {
            bool[] kv = Run02.Mask(10, 3), qv = Run02.Mask(6, 4);
            byte[] kvb = kv.Select(x => x ? (byte)7 : (byte)0).ToArray(); // any nonzero is true
            byte[] qvb = qv.Select(x => x ? (byte)1 : (byte)0).ToArray();
            int[] lens = { 4, 5 };
            using (var desc = new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4).Causal(Causal.TopLeft)
                                  .Build())
            {
                TestInputs a = Run02.Random(desc, 91);
                Func<Action<AttentionArgs>, float[]> run = bind =>
                {
                    var o = new float[96];
                    using (var args = new AttentionArgs())
                    {
                        bind(args);
                        args.Bind(Operand.Out, o);
                        desc.Run(Op.Forward, args);
                    }
                    return o;
                };
                float[] plain = run(x => x.Bind(Operand.Q, a.Q).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                                          .Bind(Operand.KeyValid, kv).Bind(Operand.QueryValid, qv)
                                          .Bind(Operand.SeqLensK, lens));
                float[] bytes = run(x => x.Bind(Operand.Q, a.Q).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                                          .Bind(Operand.KeyValid, kvb).Bind(Operand.QueryValid, qvb)
                                          .Bind(Operand.SeqLensK, lens));
                // Slices of bigger arrays: each Memory window starts at an offset.
                Func<float[], Memory<float>> slice = x =>
                    new Memory<float>(new float[3].Concat(x).Concat(new float[2]).ToArray(), 3, x.Length);
                float[] sliced = run(x => x.Bind(Operand.Q, slice(a.Q))
                                          .Bind(Operand.K, (ReadOnlyMemory<float>)slice(a.K))
                                          .Bind(Operand.V, slice(a.V))
                                          .Bind(Operand.KeyValid, new ReadOnlyMemory<bool>(
                                              new[] { false }.Concat(kv).ToArray(), 1, 10))
                                          .Bind(Operand.QueryValid, new ReadOnlyMemory<byte>(
                                              new byte[] { 0, 0 }.Concat(qvb).ToArray(), 2, 6))
                                          .Bind(Operand.SeqLensK, new ReadOnlyMemory<int>(
                                              new[] { 99, 4, 5 }, 1, 2)));
                CollectionAssert.AreEqual(plain, bytes);
                CollectionAssert.AreEqual(plain, sliced);
                Assert.IsTrue(plain.Any(x => x != 0));

                // Memory not backed by an array: pinned through MemoryManager.Pin for each call.
                using (var nq = new NativeFloats(96))
                using (var no = new NativeFloats(96))
                using (var nkv = new NativeBytes(10))
                {
                    a.Q.AsSpan().CopyTo(nq.GetSpan());
                    kvb.AsSpan().CopyTo(nkv.GetSpan());
                    no.GetSpan().Fill(0);
                    using (var args = new AttentionArgs())
                    {
                        args.Bind(Operand.Q, nq.Memory).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                            .Bind(Operand.KeyValid, (ReadOnlyMemory<byte>)nkv.Memory)
                            .Bind(Operand.QueryValid, qv).Bind(Operand.SeqLensK, lens)
                            .Bind(Operand.Out, no.Memory);
                        desc.Run(Op.Forward, args);
                        desc.Run(Op.Forward, args);
                    }
                    CollectionAssert.AreEqual(plain, no.GetSpan().ToArray());
                    Assert.AreEqual(2, nq.Pins, "pinned once per call");
                }
            }
        }

        [Test]
        public void LongerArraysAreFineAndOnlyTheRequiredPrefixIsWritten()
        {
            using (var desc = Desc())
            {
                float[] q = Util.Values(96, 1), kv = Util.Values(80, 2);
                var exact = new float[96];
                using (var args = Filled(q, kv, exact)) desc.Run(Op.Forward, args);
                var longer = Enumerable.Repeat(42f, 100).ToArray();
                var mass = Enumerable.Repeat(43f, 41).ToArray();
                using (var args = Filled(q.Concat(new[] { float.NaN }).ToArray(), kv, longer)
                                      .Bind(Operand.KeyMass, mass)
                                      .Bind(Operand.KeyValid, Enumerable.Repeat(true, 11).ToArray()))
                    desc.Run(Op.Forward, args);
                CollectionAssert.AreEqual(exact, longer.Take(96).ToArray());
                CollectionAssert.AreEqual(new[] { 42f, 42f, 42f, 42f }, longer.Skip(96).ToArray());
                Assert.AreEqual(43f, mass[40]);
            }
        }

        [Test]
        public void BadOperandsAreRefusedNamingTheArgument()
        {
            using (var desc = Desc())
            {
                float[] q = new float[96], kv = new float[80], o = new float[96];
                var shortCases = new Dictionary<string, Action<AttentionArgs>> {
                    { "q has 95 elements, needs at least 96", a => a.Bind(Operand.Q, new float[95]) },
                    { "v has 0 elements, needs at least 80", a => a.Bind(Operand.V, new float[0]) },
                    { "out has 24 elements, needs at least 96", a => a.Bind(Operand.Out, new float[24]) },
                    { "lse has 23 elements, needs at least 24", a => a.Bind(Operand.Lse, new float[23]) },
                    { "key_mass has 0 elements, needs at least 40", a => a.Bind(Operand.KeyMass, new float[0]) },
                    // Empty optional operands are length errors, never "not given".
                    { "bias has 0 elements, needs at least 120", a => a.Bind(Operand.Bias, new float[0]) },
                    { "sinks has 3 elements, needs at least 4", a => a.Bind(Operand.Sinks, new float[3]) },
                    { "key_valid has 0 elements, needs at least 10", a => a.Bind(Operand.KeyValid, new bool[0]) },
                    { "allowed has 14 elements, needs at least 15", a => a.Bind(Operand.Allowed, new byte[14]) },
                    { "query_valid has 0 elements, needs at least 6",
                      a => a.Bind(Operand.QueryValid, ReadOnlyMemory<bool>.Empty) },
                    { "seq_lens_k has 0 elements, needs at least 2", a => a.Bind(Operand.SeqLensK, new int[0]) },
                    { "k has 0 elements, needs at least 80",
                      a => a.Bind(Operand.K, default(ReadOnlyMemory<float>)) },
                    { "q has 0 elements, needs at least 96",
                      a => a.Bind(Operand.Q, new Memory<float>(new float[96], 96, 0)) },
                };
                foreach (var c in shortCases)
                    using (var args = Filled(q, kv, o))
                    {
                        c.Value(args);
                        var e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args), c.Key);
                        Assert.IsNotInstanceOf<ArgumentNullException>(e, c.Key);
                        StringAssert.StartsWith("attn_run: " + c.Key, e.Message);
                        Assert.AreEqual(c.Key.Substring(0, c.Key.IndexOf(' ')), e.ParamName);
                    }
                // An operand the operation does not read is ignored, short or not (as in C).
                using (var args = Filled(q, new float[80], o).Bind(Operand.V, new float[1])
                                      .Bind(Operand.Weights, new float[120]))
                    desc.Run(Op.Weights, args);

                // Required operands not bound: the library's NullPointer, as ArgumentNullException.
                foreach (var c in new[] { Tuple.Create(Operand.Q, Op.Forward, "q"),
                                          Tuple.Create(Operand.V, Op.Forward, "v"),
                                          Tuple.Create(Operand.Out, Op.Forward, "out"),
                                          Tuple.Create(Operand.K, Op.Weights, "k"),
                                          Tuple.Create(Operand.Weights, Op.Weights, "weights") })
                    using (var args = Filled(q, kv, o).Bind(Operand.Weights, new float[120]))
                    {
                        args.Unbind(c.Item1);
                        Assert.IsFalse(args.IsBound(c.Item1));
                        var e = Assert.Throws<ArgumentNullException>(() => desc.Run(c.Item2, args));
                        Assert.AreEqual(c.Item3, e.ParamName);
                        StringAssert.Contains("attn_run: " + c.Item3 + " is NULL", e.Message);
                    }
                using (var args = Filled(q, kv, o).Bind(Operand.Q, (float[])null))
                    Assert.AreEqual("q", Assert.Throws<ArgumentNullException>(
                        () => desc.Run(Op.Forward, args)).ParamName);
                Assert.AreEqual("args", Assert.Throws<ArgumentNullException>(
                    () => desc.Run(Op.Forward, null)).ParamName);

                // Outputs overlapping another operand: the library's error and message.
                var alias = new Dictionary<string, Action<AttentionArgs>> {
                    { "attn_run: out overlaps q", a => a.Bind(Operand.Out, q) },
                    { "attn_run: lse overlaps k", a => a.Bind(Operand.Lse, kv) },
                    { "attn_run: key_mass overlaps k", a => a.Bind(Operand.KeyMass, kv) },
                    { "attn_run: out overlaps lse", a => a.Bind(Operand.Lse, o) },
                };
                foreach (var c in alias)
                    using (var args = Filled(q, kv, o))
                    {
                        c.Value(args);
                        var e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args));
                        StringAssert.Contains(c.Key, e.Message);
                    }
                using (var args = Filled(q, q, o)) desc.Run(Op.Forward, args); // inputs may alias

                // Values and combinations only the library can judge.
                using (var args = Filled(q, kv, o).Bind(Operand.SeqLensK, new[] { 3, 6 }))
                    StringAssert.Contains("seq_lens_k[1] (6) is outside [0, seq_k = 5]",
                        Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args)).Message);
                using (var args = Filled(q, kv, o).Bind(Operand.AlibiSlopes, new float[4]))
                    StringAssert.Contains("alibi_slopes is bound but ATTN_PARAM_ALIBI is not",
                        Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args)).Message);
                using (var plus = new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4).SoftmaxPlusOne().Build())
                using (var args = Filled(q, kv, o).Bind(Operand.Sinks, new float[4]))
                    StringAssert.Contains("sinks cannot be combined with ATTN_PARAM_SOFTMAX_PLUS_ONE",
                        Assert.Throws<ArgumentException>(() => plus.Run(Op.Forward, args)).Message);
                using (var withSlopes = Desc(1))
                using (var args = Filled(q, kv, o))
                {
                    var e = Assert.Throws<ArgumentNullException>(() => withSlopes.Run(Op.Forward, args));
                    Assert.AreEqual("alibi_slopes", e.ParamName);
                }

                // Enum values out of range: the library's refusal of an op, the face's of an
                // operand it cannot index.
                using (var args = Filled(q, kv, o))
                {
                    var oe = Assert.Throws<ArgumentException>(() => desc.Run((Op)3, args));
                    Assert.AreEqual("op", oe.ParamName);
                    StringAssert.Contains("attn_run: op (3) is not an attn_op", oe.Message);
                    oe = Assert.Throws<ArgumentException>(() => desc.Run((Op)(-1), args));
                    StringAssert.Contains("op (-1)", oe.Message);
                    var re = Assert.Throws<ArgumentOutOfRangeException>(() => args.Bind((Operand)29, q));
                    StringAssert.Contains("which (29) is not an Operand value", re.Message);
                    re = Assert.Throws<ArgumentOutOfRangeException>(() => args.Unbind((Operand)(-1)));
                    Assert.AreEqual("which", re.ParamName);
                    // Backward with a forward's operands only: the library asks for dout.
                    var ae = Assert.Throws<ArgumentNullException>(() => desc.Run(Op.Backward, args));
                    StringAssert.Contains("dout is NULL", ae.Message);
                }

                // An operand bound with the wrong element type.
                using (var args = new AttentionArgs())
                {
                    var wrong = new Dictionary<string, TestDelegate> {
                        { "Operand.KeyValid (key_valid) cannot be bound with Single data", () => args.Bind(Operand.KeyValid, q) },
                        { "Operand.Q (q) cannot be bound with Boolean data", () => args.Bind(Operand.Q, new bool[96]) },
                        { "Operand.SeqLensK (seq_lens_k) cannot be bound with Byte data", () => args.Bind(Operand.SeqLensK, new byte[2]) },
                        { "Operand.Allowed (allowed) cannot be bound with Int32 data", () => args.Bind(Operand.Allowed, new int[15]) },
                        { "Operand.Out (out) cannot be bound with read-only Single data",
                          () => args.Bind(Operand.Out, new ReadOnlyMemory<float>(o)) },
                    };
                    foreach (var c in wrong)
                    {
                        var e = Assert.Throws<ArgumentException>(c.Value, c.Key);
                        StringAssert.StartsWith(c.Key, e.Message);
                        Assert.AreEqual("data", e.ParamName);
                    }
                    Assert.IsFalse(Enumerable.Range(0, 14).Any(i => args.IsBound((Operand)i)));
                }
                Assert.IsTrue(o.All(x => x == 0), "no refused call wrote anything");
            }
        }

        [Test]
        public void RunCopiesAndAllocatesNothingPerCall()
        {
            // Every operand of the extensible call bound (the all_combined case of
            // variants.txt; the ALiBi slopes as a window of a bigger array, key_valid as bool[],
            // the other masks as byte[]), 400 calls, no allocation.
            var c = Vectors.Line("variants.txt", "all_combined");
            string p = Vectors.Prefix(c);
            using (var desc = Vectors.Builder(c).Build())
            using (var args = new AttentionArgs())
            {
                Vectors.BindInputs(c, desc, args, false);
                float[] slopes = Util.ReadF32(p + "alibi_slopes.f32");
                args.Bind(Operand.AlibiSlopes,
                          new Memory<float>(new[] { float.NaN }.Concat(slopes).ToArray(), 1, slopes.Length))
                    .Bind(Operand.KeyValid, Util.ReadU8(p + "key_valid.u8"));
                Assert.IsTrue(new[] { Operand.Bias, Operand.Sinks, Operand.Allowed, Operand.QueryValid,
                                      Operand.SeqLensK }.All(args.IsBound));
                var o = new float[desc.RequiredLen(Operand.Out)];
                var lse = new float[desc.RequiredLen(Operand.Lse)];
                var mass = new float[desc.RequiredLen(Operand.KeyMass)];
                var w = new float[desc.RequiredLen(Operand.Weights)];
                args.Bind(Operand.Out, o).Bind(Operand.Lse, lse).Bind(Operand.KeyMass, mass)
                    .Bind(Operand.Weights, w);
                for (int i = 0; i < 10; i++) // JIT and thread pool warm-up
                {
                    desc.Run(Op.Forward, args);
                    desc.Run(Op.Weights, args);
                }
                long before = GC.GetAllocatedBytesForCurrentThread();
                for (int i = 0; i < 200; i++)
                {
                    desc.Run(Op.Forward, args);
                    desc.Run(Op.Weights, args);
                }
                long perCall = (GC.GetAllocatedBytesForCurrentThread() - before) / 400;
                Assert.AreEqual(0, perCall, "bytes allocated per Run");
                // Every result is the library's own, in the caller's arrays (nothing copied
                // back): the outputs hold the case's expected values.
                Vectors.Check(Vectors.Expected(desc, Operand.Out, c, "out"), o, "out");
                Vectors.Check(Vectors.Expected(desc, Operand.Lse, c, "lse"), lse, "lse");
                Vectors.Check(Vectors.Expected(desc, Operand.KeyMass, c, "key_mass"), mass, "key_mass");
                Vectors.Check(Vectors.Expected(desc, Operand.Weights, c, "weights"), w, "weights");
            }
        }

        [Test]
        public void OperandsAreUnboundAfterEachCallAndTheArraysMayMove()
        {
            using (var desc = Desc())
            using (var args = new AttentionArgs())
            {
                float[] q = Util.Values(96, 1), kv = Util.Values(80, 2);
                var o1 = new float[96];
                args.Bind(Operand.Q, q).Bind(Operand.K, kv).Bind(Operand.V, kv).Bind(Operand.Out, o1)
                    .Bind(Operand.KeyValid, Run02.Mask(10, 3));
                desc.Run(Op.Forward, args);
                // Garbage everywhere, compaction: the next call pins the arrays where they are now.
                for (int i = 0; i < 20; i++) GC.KeepAlive(new float[10000]);
                GC.Collect(2, GCCollectionMode.Forced, true, true);
                GC.WaitForPendingFinalizers();
                var o2 = new float[96];
                args.Bind(Operand.Out, o2);
                desc.Run(Op.Forward, args);
                CollectionAssert.AreEqual(o1, o2);
                // Unbinding a mask makes it "not given" again for the library.
                args.Unbind(Operand.KeyValid);
                var o3 = new float[96];
                args.Bind(Operand.Out, o3);
                desc.Run(Op.Forward, args);
                var o4 = desc.Forward(q, kv, kv);
                CollectionAssert.AreEqual(o4, o3);
                CollectionAssert.AreNotEqual(o1, o3);
                // Clear forgets everything.
                args.Clear();
                Assert.Throws<ArgumentNullException>(() => desc.Run(Op.Forward, args));
            }
        }

        [Test]
        public void DisposeOfArgsAndDescriptor()
        {
            var desc = Desc();
            float[] q = new float[96], kv = new float[80], o = new float[96];
            var args = Filled(q, kv, o);
            desc.Run(Op.Forward, args);
            Assert.IsFalse(args.IsDisposed);
            args.Dispose();
            Assert.IsTrue(args.IsDisposed);
            Assert.IsTrue(args.NativeReleased);
            args.Dispose(); // idempotent
            StringAssert.Contains("AttentionArgs",
                Assert.Throws<ObjectDisposedException>(() => desc.Run(Op.Forward, args)).Message);
            Assert.Throws<ObjectDisposedException>(() => args.Bind(Operand.Q, q));
            Assert.Throws<ObjectDisposedException>(() => args.Clear());
            var fresh = Filled(q, kv, o);
            desc.Dispose();
            StringAssert.Contains("AttentionDesc",
                Assert.Throws<ObjectDisposedException>(() => desc.Run(Op.Forward, fresh)).Message);
            Assert.Throws<ObjectDisposedException>(() => desc.GetInt(Param.Causal));
            Assert.Throws<ObjectDisposedException>(() => desc.Run((Op)9, null)); // disposed first
            fresh.Dispose();

            // Never disposed: the SafeHandles' finalizers free the native objects.
            long released = Interlocked.Read(ref AttnArgsHandle.Released);
            MakeGarbage(20);
            for (int i = 0; i < 3; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Assert.Greater(Interlocked.Read(ref AttnArgsHandle.Released), released + 10,
                           "finalizers freed the abandoned args objects");
        }

        static void MakeGarbage(int n)
        {
            for (int i = 0; i < n; i++) new AttentionArgs().Bind(Operand.Q, new float[4]);
        }

        [Test]
        public void ManyThreadsEachWithTheirOwnArgsOrSharingOne()
        {
            const int T = 6;
            using (var desc = new AttentionDesc.Builder().Dims(2, 4, 2, 16, 24, 16)
                                  .Causal(Causal.BottomRight).Window(9, -1).Softcap(3)
                                  .Alibi(Alibi.Standard).Build())
            using (var shared = new AttentionArgs())
            {
                // Each thread's results against the same call made alone first (whose values
                // the shared vectors check: OperandTests, VariantVectorTests).
                TestInputs a = Run02.Random(desc, 101);
                a.SeqLensK = new[] { 24, 13 };
                a.QueryValid = Run02.Mask(32, 7);
                float[] o0, l0, w0, m0;
                Run02.Both(desc, a, out o0, out l0, out w0, out m0);
                shared.Bind(Operand.Q, a.Q).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                      .Bind(Operand.SeqLensK, a.SeqLensK).Bind(Operand.QueryValid, a.QueryValid);
                var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
                var threads = new Thread[T];
                for (int t = 0; t < T; t++)
                {
                    int me = t;
                    threads[t] = new Thread(() =>
                    {
                        try
                        {
                            for (int it = 0; it < 40; it++)
                            {
                                float[] o, l, w, m;
                                Run02.Both(desc, a, out o, out l, out w, out m);
                                if (!o.SequenceEqual(o0) || !l.SequenceEqual(l0) ||
                                    !w.SequenceEqual(w0) || !m.SequenceEqual(m0))
                                    failures.Enqueue("thread " + me + ": own args, wrong result");
                                // One args object shared by every thread: calls run one at a time.
                                var out2 = new float[o0.Length];
                                lock (shared)
                                {
                                    shared.Bind(Operand.Out, out2);
                                    desc.Run(Op.Forward, shared);
                                }
                                if (!out2.SequenceEqual(o0))
                                    failures.Enqueue("thread " + me + ": shared args, wrong result");
                                try
                                {
                                    using (var bad = new AttentionArgs().Bind(Operand.Q, a.Q)
                                                         .Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                                                         .Bind(Operand.Out, a.K))
                                        desc.Run(Op.Forward, bad);
                                    failures.Enqueue("thread " + me + ": aliasing accepted");
                                }
                                catch (ArgumentException e)
                                {
                                    if (!e.Message.Contains("out overlaps k") &&
                                        !e.Message.Contains("out has"))
                                        failures.Enqueue("thread " + me + ": foreign message " + e.Message);
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
                foreach (var th in threads) Assert.IsTrue(th.Join(120000), "a thread hung");
                Assert.IsEmpty(failures.ToArray(), string.Join("\n", failures.Take(5)));
            }
        }
    }
}
