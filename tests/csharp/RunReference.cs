// An independent float64 reference of attn_run (0.2: every parameter and operand), in plain C#,
// written from capi/attn.h's score pipeline (the same rules as tests/reference/attn_ref.py):
//
//   padded query (query_valid false): out 0, lse -inf, weights 0
//   len_k(b) = seq_lens_k[b] or seq_k; diag(i) = i, or i + len_k(b) - seq_q for BottomRight
//   key j hidden: j >= len_k(b), key_valid false, j > diag(i) (causal), outside
//     [diag(i) - window_left, diag(i) + window_right] (a bound of -1 is unbounded), allowed false
//   s = scale * q.k; softcap c * tanh(s / c) (after the bias when bias_first); + bias;
//     - slope_h * (diag(i) - j) (ALiBi); a -inf score hides the key too
//   sink = sinks[h], or 0 with softmax_plus_one; M = max(max s, sink)
//   w_j = exp(s_j - M) / (exp(sink - M) + sum exp(s - M)); no visible key: 0 / -inf even with a sink
//   key_mass[b][h][j] = sum_i w_ij
// Element (b, h, s, d) of a strided operand is at b*B + h*H + s*R + d.
using System;
using System.Collections.Generic;

namespace LibAttn.Tests
{
    sealed class Problem
    {
        public int B, HQ, HKV, SQ, SK, D, DV;
        public int Causal;               // 0 none, 1 top-left, 2 bottom-right
        public double? Scale;            // null = 1/sqrt(D)
        public long WindowLeft = -1, WindowRight = -1;
        public double Softcap;
        public int Alibi;                // 0 none, 1 operand, 2 standard
        public bool PlusOne, BiasFirst;
        public int WeightsMode;          // 0 softmax, 1 scores, 2 masked, 3 capped
        public long[] QS, KS, VS, OS, BS; // strides (B, H, R); null = contiguous BHSD

        public Problem(int b, int hq, int hkv, int sq, int sk, int d)
        {
            B = b; HQ = hq; HKV = hkv; SQ = sq; SK = sk; D = d; DV = d;
        }

        public long[] Q { get { return QS ?? new long[] { (long)HQ * SQ * D, (long)SQ * D, D }; } }
        public long[] K { get { return KS ?? new long[] { (long)HKV * SK * D, (long)SK * D, D }; } }
        public long[] V { get { return VS ?? new long[] { (long)HKV * SK * DV, (long)SK * DV, DV }; } }
        public long[] O { get { return OS ?? new long[] { (long)HQ * SQ * DV, (long)SQ * DV, DV }; } }
        public long[] Bias { get { return BS ?? new long[] { (long)HQ * SQ * SK, (long)SQ * SK, SK }; } }

        static long Len(int b, int h, int s, int d, long[] st)
        {
            return (b - 1) * st[0] + (h - 1) * st[1] + (s - 1) * st[2] + d;
        }
        public long QLen { get { return Len(B, HQ, SQ, D, Q); } }
        public long KLen { get { return Len(B, HKV, SK, D, K); } }
        public long VLen { get { return Len(B, HKV, SK, DV, V); } }
        public long OutLen { get { return Len(B, HQ, SQ, DV, O); } }
        public long BiasLen { get { return Len(B, HQ, SQ, SK, Bias); } }

        public static long Off(long[] st, int b, int h, int s)
        {
            return b * st[0] + h * st[1] + s * st[2];
        }

        public AttentionDesc.Builder Builder()
        {
            var bl = new AttentionDesc.Builder().Dims(B, HQ, HKV, SQ, SK, D).Causal((Causal)Causal);
            if (Scale.HasValue) bl.Scale((float)Scale.Value);
            if (WindowLeft != -1 || WindowRight != -1) bl.Window(WindowLeft, WindowRight);
            if (Softcap != 0) bl.Softcap((float)Softcap);
            if (Alibi != 0) bl.Alibi((Alibi)Alibi);
            if (PlusOne) bl.SoftmaxPlusOne();
            if (DV != D) bl.HeadDimV(DV);
            if (BiasFirst) bl.BiasFirst();
            if (WeightsMode != 0) bl.WeightsMode((WeightsMode)WeightsMode);
            if (QS != null) bl.Strides(Operand.Q, QS[0], QS[1], QS[2]);
            if (KS != null) bl.Strides(Operand.K, KS[0], KS[1], KS[2]);
            if (VS != null) bl.Strides(Operand.V, VS[0], VS[1], VS[2]);
            if (OS != null) bl.Strides(Operand.Out, OS[0], OS[1], OS[2]);
            if (BS != null) bl.Strides(Operand.Bias, BS[0], BS[1], BS[2]);
            return bl;
        }
    }

    // Inputs of one call; null = not bound.
    sealed class Inputs
    {
        public float[] Q, K, V, Bias, AlibiSlopes, Sinks;
        public bool[] KeyValid, Allowed, QueryValid;
        public int[] SeqLensK;
    }

    sealed class Expected
    {
        public double[] Out, Lse, Weights, KeyMass;
        public bool[] Hidden; // [b][h][i][j]: the key is hidden (weight exactly 0)
    }

    static class RunReference
    {
        // Standard ALiBi slopes for n heads (Press et al. 2022, as BLOOM computes them).
        public static double[] StandardSlopes(int n)
        {
            int m = 1;
            while (m * 2 <= n) m *= 2;
            var r = new List<double>();
            for (int h = 0; h < m; h++) r.Add(Math.Pow(2.0, -8.0 * (h + 1) / m));
            for (int x = 0; x < n - m; x++) r.Add(Math.Pow(2.0, -8.0 * (2 * x + 1) / (2 * m)));
            return r.ToArray();
        }

        static double Cap(Problem p, double s)
        {
            return p.Softcap * Math.Tanh(s / p.Softcap);
        }

        public static Expected Run(Problem p, Inputs a)
        {
            double scale = p.Scale ?? 1.0 / Math.Sqrt(p.D);
            double[] slopes = p.Alibi == 1 ? Array.ConvertAll(a.AlibiSlopes, x => (double)x)
                              : p.Alibi == 2 ? StandardSlopes(p.HQ) : null;
            int group = p.HQ / p.HKV;
            var e = new Expected
            {
                Out = new double[p.OutLen],
                Lse = new double[p.B * p.HQ * p.SQ],
                Weights = new double[p.B * p.HQ * p.SQ * p.SK],
                KeyMass = new double[p.B * p.HQ * p.SK],
                Hidden = new bool[p.B * p.HQ * p.SQ * p.SK],
            };
            long[] qs = p.Q, ks = p.K, vs = p.V, os = p.O, bs = p.Bias;
            var s = new double[p.SK];
            var vis = new bool[p.SK];
            for (int b = 0; b < p.B; b++)
            {
                int L = a.SeqLensK != null ? a.SeqLensK[b] : p.SK;
                for (int h = 0; h < p.HQ; h++)
                {
                    int hk = h / group;
                    double? sink = a.Sinks != null ? a.Sinks[h] : p.PlusOne ? 0.0 : (double?)null;
                    for (int i = 0; i < p.SQ; i++)
                    {
                        int row = (b * p.HQ + h) * p.SQ + i;
                        for (int j = 0; j < p.SK; j++) e.Hidden[row * p.SK + j] = true;
                        if (a.QueryValid != null && !a.QueryValid[b * p.SQ + i])
                        {
                            e.Lse[row] = double.NegativeInfinity;
                            continue;
                        }
                        long dg = p.Causal == 2 ? i + L - p.SQ : i;
                        double m = double.NegativeInfinity;
                        int nvis = 0;
                        for (int j = 0; j < p.SK; j++)
                        {
                            vis[j] = false;
                            if (j >= L) continue;
                            if (a.KeyValid != null && !a.KeyValid[b * p.SK + j]) continue;
                            if (p.Causal != 0 && j > dg) continue;
                            if (p.WindowLeft >= 0 && j < dg - p.WindowLeft) continue;
                            if (p.WindowRight >= 0 && j > dg + p.WindowRight) continue;
                            if (a.Allowed != null && !a.Allowed[i * p.SK + j]) continue;
                            long qo = Problem.Off(qs, b, h, i), ko = Problem.Off(ks, b, hk, j);
                            double dot = 0;
                            for (int d = 0; d < p.D; d++) dot += (double)a.Q[qo + d] * a.K[ko + d];
                            double x = scale * dot;
                            if (p.Softcap > 0 && !p.BiasFirst) x = Cap(p, x);
                            if (a.Bias != null) x += a.Bias[Problem.Off(bs, b, h, i) + j];
                            if (p.Softcap > 0 && p.BiasFirst) x = Cap(p, x);
                            if (slopes != null) x += -slopes[h] * (dg - j);
                            if (double.IsNegativeInfinity(x)) continue;
                            s[j] = x;
                            vis[j] = true;
                            nvis++;
                            m = Math.Max(m, x);
                        }
                        if (nvis == 0)
                        {
                            e.Lse[row] = double.NegativeInfinity;
                            continue;
                        }
                        if (sink.HasValue) m = Math.Max(m, sink.Value);
                        double total = sink.HasValue ? Math.Exp(sink.Value - m) : 0;
                        for (int j = 0; j < p.SK; j++)
                            if (vis[j]) total += Math.Exp(s[j] - m);
                        e.Lse[row] = m + Math.Log(total);
                        var acc = new double[p.DV];
                        for (int j = 0; j < p.SK; j++)
                        {
                            if (!vis[j]) continue;
                            double w = Math.Exp(s[j] - m) / total;
                            e.Weights[row * p.SK + j] = w;
                            e.Hidden[row * p.SK + j] = false;
                            e.KeyMass[(b * p.HQ + h) * p.SK + j] += w;
                            if (a.V == null) continue;
                            long vo = Problem.Off(vs, b, hk, j);
                            for (int d = 0; d < p.DV; d++) acc[d] += w * a.V[vo + d];
                        }
                        long oo = Problem.Off(os, b, h, i);
                        for (int d = 0; d < p.DV; d++) e.Out[oo + d] = acc[d];
                    }
                }
            }
            return e;
        }

        // The score matrix of the score modes (attn_weights_mode): 1 Scores = scale * q.k;
        // 4 Softcapped = softcap(scale * q.k); 2 Masked = scale * q.k + bias + ALiBi with -inf
        // for hidden entries; 3 Capped = every step (softcap in the bias_first order), masked.
        // Padded keys (key_valid false, j >= seq_lens_k[b]) are -inf in every mode. Contiguous
        // or strided Q, K; no query padding.
        public static double[] Scores(Problem p, Inputs a, int mode)
        {
            double scale = p.Scale ?? 1.0 / Math.Sqrt(p.D);
            double[] slopes = p.Alibi == 1 ? Array.ConvertAll(a.AlibiSlopes, x => (double)x)
                              : p.Alibi == 2 ? StandardSlopes(p.HQ) : null;
            int group = p.HQ / p.HKV;
            var r = new double[p.B * p.HQ * p.SQ * p.SK];
            for (int b = 0; b < p.B; b++)
            {
                int L = a.SeqLensK != null ? a.SeqLensK[b] : p.SK;
                for (int h = 0; h < p.HQ; h++)
                    for (int i = 0; i < p.SQ; i++)
                    {
                        int row = (b * p.HQ + h) * p.SQ + i;
                        long dg = p.Causal == 2 ? i + L - p.SQ : i;
                        for (int j = 0; j < p.SK; j++)
                        {
                            if (j >= L || (a.KeyValid != null && !a.KeyValid[b * p.SK + j]))
                            {
                                r[row * p.SK + j] = double.NegativeInfinity; // never read
                                continue;
                            }
                            long qo = Problem.Off(p.Q, b, h, i), ko = Problem.Off(p.K, b, h / group, j);
                            double dot = 0;
                            for (int d = 0; d < p.D; d++) dot += (double)a.Q[qo + d] * a.K[ko + d];
                            double x = scale * dot;
                            if (mode == 4 && p.Softcap > 0) x = Cap(p, x);
                            if (mode == 2 || mode == 3)
                            {
                                bool hidden = (p.Causal != 0 && j > dg)
                                              || (p.WindowLeft >= 0 && j < dg - p.WindowLeft)
                                              || (p.WindowRight >= 0 && j > dg + p.WindowRight)
                                              || (a.Allowed != null && !a.Allowed[i * p.SK + j]);
                                bool cap = mode == 3 && p.Softcap > 0;
                                if (cap && !p.BiasFirst) x = Cap(p, x);
                                if (a.Bias != null) x += a.Bias[Problem.Off(p.Bias, b, h, i) + j];
                                if (cap && p.BiasFirst) x = Cap(p, x);
                                if (slopes != null) x += -slopes[h] * (dg - j);
                                if (hidden) x = double.NegativeInfinity;
                            }
                            r[row * p.SK + j] = x;
                        }
                    }
            }
            return r;
        }
    }
}
