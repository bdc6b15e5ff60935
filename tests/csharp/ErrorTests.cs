// NUnit tests of bad input to the 0.1 calls and the library-wide settings: each is refused with
// the exception of its status, naming the argument, with the library's message (docs/errors.md).
using System;
using System.Collections.Generic;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
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
}
