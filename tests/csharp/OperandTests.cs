// NUnit tests of every operand of the 0.2 extensible call on the shared vectors of
// tests/vectors/variants.txt (the values of the float64 references of C++ and Python) through
// AttentionArgs and AttentionDesc.Run, the weights modes, and Run against the 0.1 calls bit for
// bit. The whole of variants.txt, storage.txt, backward.txt and errors.txt runs in
// VariantVectorTests.cs.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
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
}
