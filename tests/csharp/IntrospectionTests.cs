// NUnit tests of the library's own tables through the C# face (capi/attn.h "Introspection"):
// Attention.Isas, Attention.Info(Param) and Attention.Info(Operand) against what the C queries
// answer when called directly (a P/Invoke of libattn itself, not the binding's SWIG layer), and
// against facts of attn.h written out here.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.InteropServices;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class IntrospectionTests
    {
        // The C queries, straight from libattn (LD_LIBRARY_PATH finds it, as it finds the glue).
        static class C
        {
            [DllImport("attn")]
            public static extern int attn_isa_info(int index, out IntPtr name, out int supported);
            [DllImport("attn")]
            public static extern int attn_param_info(int param, out IntPtr name, out int isFloat,
                                                     out double min, out double max,
                                                     out double dflt);
            [DllImport("attn")]
            public static extern int attn_operand_info(int which, out IntPtr name,
                                                       out uint inTypes, out uint outTypes,
                                                       out int rank, out int strided);
            [DllImport("attn")]
            public static extern int attn_operand_dims(int which, out IntPtr dims);
            [DllImport("attn")]
            public static extern IntPtr attn_last_error();

            public static string Str(IntPtr p) { return Marshal.PtrToStringAnsi(p); }

            // How many entries C's loop "from 0 until INVALID_ARGUMENT" lists.
            public static int Count(Func<int, int> query)
            {
                int n = 0;
                while (query(n) == 0) n++;
                Assert.AreEqual((int)Status.InvalidArgument, query(n), "the loop ends on InvalidArgument");
                return n;
            }
        }

        static ISet<Dtype> Set(params Dtype[] types) { return new HashSet<Dtype>(types); }

        [Test]
        public void IsaListIsTheLibrarysInItsOrderWithWhatThisCpuRuns()
        {
            IReadOnlyList<IsaInfo> isas = Attention.Isas;
            IntPtr name;
            int supported;
            Assert.AreEqual(C.Count(i => C.attn_isa_info(i, out name, out supported)), isas.Count);
            for (int i = 0; i < isas.Count; i++)
            {
                Assert.AreEqual(0, C.attn_isa_info(i, out name, out supported));
                Assert.AreEqual(C.Str(name), isas[i].Name, "isa " + i);
                Assert.AreEqual(supported != 0, isas[i].Supported, isas[i].Name);
            }
            Assert.AreEqual("scalar", isas[0].Name, "weakest first");
            Assert.IsTrue(isas[0].Supported, "scalar runs everywhere");
            Assert.AreEqual(isas.Count, isas.Select(x => x.Name).Distinct().Count());
            CollectionAssert.Contains(isas.Where(x => x.Supported).Select(x => x.Name).ToList(),
                                      Attention.Isa, "the default kernel is a supported one");
            // Supported means SetIsa accepts the name and runs that kernel.
            try
            {
                foreach (IsaInfo isa in isas)
                    if (isa.Supported)
                    {
                        Attention.SetIsa(isa.Name);
                        Assert.AreEqual(isa.Name, Attention.Isa);
                    }
                    else
                    {
                        var e = Assert.Throws<AttentionException>(() => Attention.SetIsa(isa.Name));
                        Assert.AreEqual(Status.Unsupported, e.Status, isa.Name);
                    }
            }
            finally
            {
                Attention.SetIsa(null);
            }
        }

        [Test]
        public void ParamInfoIsTheLibrarysTable()
        {
            IntPtr name;
            int isFloat;
            double min, max, dflt;
            Param[] all = (Param[])Enum.GetValues(typeof(Param));
            Assert.AreEqual(C.Count(p => C.attn_param_info(p, out name, out isFloat, out min,
                                                           out max, out dflt)), all.Length);
            using (var fresh = new AttentionDesc.Builder().SeqLen(3, 5).HeadDim(4).Build())
                foreach (Param p in all)
                {
                    ParamInfo info = Attention.Info(p);
                    Assert.AreEqual(0, C.attn_param_info((int)p, out name, out isFloat, out min,
                                                         out max, out dflt));
                    Assert.AreEqual(p, info.Param);
                    Assert.AreEqual(C.Str(name), info.Name, p.ToString());
                    Assert.AreEqual(isFloat != 0, info.IsFloat, p + " kind");
                    Assert.AreEqual(min, info.Min, p + " min");
                    Assert.AreEqual(max, info.Max, p + " max");
                    Assert.AreEqual(dflt, info.Default, p + " default");
                    ParamBounds b = Attention.Bounds(p);
                    Assert.AreEqual(b.IsFloat, info.IsFloat, p + " as attn_param_bounds");
                    Assert.AreEqual(b.Min, info.Min, p + " as attn_param_bounds");
                    Assert.AreEqual(b.Max, info.Max, p + " as attn_param_bounds");
                    // The default is what a new descriptor holds (NaN: it follows the shape).
                    if (!double.IsNaN(info.Default))
                        Assert.AreEqual(info.Default, fresh.GetDouble(p), p + " in a new descriptor");
                }
            ParamInfo causal = Attention.Info(Param.Causal);
            Assert.AreEqual("causal", causal.Name);
            Assert.IsFalse(causal.IsFloat);
            Assert.AreEqual(0.0, causal.Min);
            Assert.AreEqual(2.0, causal.Max);
            Assert.AreEqual(0.0, causal.Default);
            Assert.AreEqual("window_left", Attention.Info(Param.WindowLeft).Name);
            Assert.AreEqual(-1.0, Attention.Info(Param.WindowLeft).Default);
            Assert.IsTrue(Attention.Info(Param.Scale).IsFloat);
            Assert.IsNaN(Attention.Info(Param.Scale).Default, "1/sqrt(head_dim)");
            Assert.IsNaN(Attention.Info(Param.HeadDimV).Default, "head_dim");
        }

        [Test]
        public void OperandInfoIsTheLibrarysTable()
        {
            IntPtr name;
            uint inTypes, outTypes;
            int rank, strided;
            Operand[] all = (Operand[])Enum.GetValues(typeof(Operand));
            Assert.AreEqual(C.Count(w => C.attn_operand_info(w, out name, out inTypes, out outTypes,
                                                             out rank, out strided)), all.Length);
            foreach (Operand w in all)
            {
                OperandInfo info = Attention.Info(w);
                Assert.AreEqual(0, C.attn_operand_info((int)w, out name, out inTypes, out outTypes,
                                                       out rank, out strided));
                Assert.AreEqual(w, info.Operand);
                Assert.AreEqual(C.Str(name), info.Name, w.ToString());
                foreach (Dtype t in Enum.GetValues(typeof(Dtype)))
                {
                    Assert.AreEqual((inTypes >> (int)t & 1) != 0, info.InputTypes.Contains(t),
                                    w + " input " + t);
                    Assert.AreEqual((outTypes >> (int)t & 1) != 0, info.OutputTypes.Contains(t),
                                    w + " output " + t);
                }
                Assert.AreEqual(rank, info.Rank, w + " rank");
                Assert.AreEqual(strided != 0, info.Strided, w + " strided");
            }
            OperandInfo q = Attention.Info(Operand.Q);
            Assert.AreEqual("q", q.Name);
            CollectionAssert.AreEquivalent(Set(Dtype.F32, Dtype.F16, Dtype.Bf16), q.InputTypes);
            CollectionAssert.IsEmpty(q.OutputTypes);
            Assert.AreEqual(4, q.Rank);
            Assert.IsTrue(q.Strided);
            OperandInfo k = Attention.Info(Operand.K);
            var kv = Set(Dtype.F32, Dtype.F16, Dtype.Bf16, Dtype.I8, Dtype.Fp8E4m3, Dtype.Fp8E5m2);
            CollectionAssert.AreEquivalent(kv, k.InputTypes);
            CollectionAssert.AreEquivalent(kv, k.OutputTypes, "the caches KvAppend writes");
            OperandInfo lse = Attention.Info(Operand.Lse);
            CollectionAssert.IsEmpty(lse.InputTypes);
            CollectionAssert.AreEquivalent(Set(Dtype.F32), lse.OutputTypes);
            Assert.AreEqual(3, lse.Rank);
            Assert.IsFalse(lse.Strided);
            CollectionAssert.AreEquivalent(Set(Dtype.U8), Attention.Info(Operand.KeyValid).InputTypes);
            Assert.AreEqual(2, Attention.Info(Operand.KeyValid).Rank);
            CollectionAssert.AreEquivalent(Set(Dtype.I32), Attention.Info(Operand.SeqLensK).InputTypes);
            Assert.AreEqual(1, Attention.Info(Operand.Sinks).Rank);
        }

        [Test]
        public void OperandDimsAreTheWordsOfTheLibrarysShape()
        {
            IntPtr dims;
            Operand[] all = (Operand[])Enum.GetValues(typeof(Operand));
            Assert.AreEqual(C.Count(w => C.attn_operand_dims(w, out dims)), all.Length);
            foreach (Operand w in all)
            {
                OperandInfo info = Attention.Info(w);
                Assert.AreEqual(0, C.attn_operand_dims((int)w, out dims));
                Assert.AreEqual(info.Rank, info.Dims.Count, w + " rank");
                Assert.AreEqual(C.Str(dims), string.Join(" ", info.Dims), w.ToString());
            }
            // attn.h: q [batch, heads_q, seq_q, head_dim]; cu_seqlens_q [batch+1]
            CollectionAssert.AreEqual(new[] { "batch", "heads_q", "seq_q", "head_dim" },
                                      Attention.Info(Operand.Q).Dims);
            CollectionAssert.AreEqual(new[] { "batch+1" }, Attention.Info(Operand.CuSeqlensQ).Dims);
            var list = (IList<string>)Attention.Info(Operand.K).Dims;
            Assert.Throws<NotSupportedException>(() => list[0] = "x", "read-only");
        }

        [Test]
        public void UnknownParamOrOperandThrowsWithTheLibrarysMessage()
        {
            IntPtr name;
            int isFloat, rank, strided;
            double min, max, dflt;
            uint inTypes, outTypes;
            foreach (int bad in new[] { -1, 999, int.MinValue })
            {
                var e = Assert.Throws<ArgumentOutOfRangeException>(() => Attention.Info((Param)bad));
                Assert.AreEqual("param", e.ParamName);
                Assert.AreEqual((int)Status.InvalidArgument,
                                C.attn_param_info(bad, out name, out isFloat, out min, out max,
                                                  out dflt));
                string c = C.Str(C.attn_last_error());
                StringAssert.Contains("param (" + bad + ") is not an attn_param", c);
                StringAssert.StartsWith(c, e.Message, "the library's message");

                var o = Assert.Throws<ArgumentOutOfRangeException>(() => Attention.Info((Operand)bad));
                Assert.AreEqual("which", o.ParamName);
                Assert.AreEqual((int)Status.InvalidArgument,
                                C.attn_operand_info(bad, out name, out inTypes, out outTypes,
                                                    out rank, out strided));
                c = C.Str(C.attn_last_error());
                StringAssert.Contains("which (" + bad + ") is not an attn_operand", c);
                StringAssert.StartsWith(c, o.Message, "the library's message");
            }
        }
    }
}
