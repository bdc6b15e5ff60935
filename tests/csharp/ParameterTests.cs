// NUnit tests of every parameter of the 0.2 extensible call through the C# face: the public
// enums mirror the header, Builder setters, properties read back from the library,
// attn_param_bounds, the fp16 compute mode, and bad values refused naming the argument.
using System;
using System.Collections.Generic;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
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
                              Operand.NewVScale, Operand.QScale };
            for (int i = 0; i < ops.Length; i++) Assert.AreEqual(i, (int)ops[i]);
            Assert.AreEqual(ops.Length, Enum.GetValues(typeof(Operand)).Length);
            Assert.AreEqual(9, (int)Param.BiasFirst);
            Assert.AreEqual(13, (int)Param.BatchInvariant);
            Assert.AreEqual(14, (int)Param.Compute);
            Assert.AreEqual(1, (int)Compute.Fp16);
            Assert.AreEqual(2, (int)Compute.Int8);
            Assert.AreEqual(3, (int)Compute.Bf16);
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
                { Param.Compute, Tuple.Create(false, 0.0, 3.0) },
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
                // VarlenTests.ServingParametersAreReadBackAndChecked).
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
            foreach (Compute mode in new[] { Compute.Int8, Compute.Bf16 })
            {
                using (AttentionDesc a = Small().Compute(mode).Build(),
                                     b = Small().Set(Param.Compute, (long)mode).Build())
                {
                    Assert.AreEqual(mode, a.Compute);
                    Assert.AreEqual((long)mode, a.GetInt(Param.Compute));
                    Assert.AreEqual(mode, b.Compute);
                }
            }
        }

        [Test]
        public void ComputeRefusesAnInvalidValue()
        {
            // Refused when set, with the library's message and the argument's name.
            var e = Assert.Throws<ArgumentOutOfRangeException>(() => Small().Compute((Compute)4));
            Assert.AreEqual("mode", e.ParamName);
            StringAssert.Contains("(4) is outside [0, 3]", e.Message);
            e = Assert.Throws<ArgumentOutOfRangeException>(() => Small().Set(Param.Compute, 4L));
            StringAssert.Contains("(4) is outside [0, 3]", e.Message);
            // The library's own check: its message names ATTN_PARAM_COMPUTE.
            IntPtr raw;
            Errors.Check(AttnNative.attn_desc_create(out raw, 1, 2, 2, 64, 64, 32));
            try
            {
                var ae = Assert.Throws<ArgumentException>(
                    () => Errors.Check(AttnNative.attn_desc_set_int(raw, (attn_param)Param.Compute, 4)));
                StringAssert.Contains("attn_desc_set_int: ATTN_PARAM_COMPUTE (4)", ae.Message);
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
                Tuple.Create<TestDelegate, string, string>(() => Small().Strides((Operand)255, 1, 1, 1),
                    "which", "which (255) is not an Operand value"),
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
}
