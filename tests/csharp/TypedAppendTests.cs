// NUnit tests of typed caches: KvAppend into a paged f16 cache, then decode; the backward with
// bfloat16 inputs; both against float64 written plainly here.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class TypedAppendTests
    {
        static double F16Value(ushort u)
        {
            int e = (u >> 10) & 0x1f, m = u & 0x3ff;
            double mag = e == 0 ? m * Math.Pow(2, -24) : (1024 + m) * Math.Pow(2, e - 25);
            return (u & 0x8000) != 0 ? -mag : mag;
        }

        // The binary16 nearest to x (|x| < 65504), ties to the even pattern, chosen in float64.
        static ushort F16Nearest(float x)
        {
            double a = Math.Abs((double)x);
            int lo = 0, hi = 0x7bff;
            while (lo < hi)
            {
                int mid = (lo + hi + 1) / 2;
                if (F16Value((ushort)mid) <= a)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            int up = lo + 1;
            double dl = a - F16Value((ushort)lo), dh = F16Value((ushort)up) - a;
            int r = dl < dh ? lo : dh < dl ? up : (lo & 1) != 0 ? up : lo;
            return (ushort)(r | (x < 0 ? 0x8000 : 0));
        }

        internal static double[] Attend64(double[] q, double[][] k, double[][] v, double scale)
        {
            var s = new double[k.Length];
            double m = double.NegativeInfinity, den = 0;
            for (int j = 0; j < k.Length; j++)
            {
                for (int e = 0; e < q.Length; e++)
                    s[j] += q[e] * k[j][e];
                s[j] *= scale;
                m = Math.Max(m, s[j]);
            }
            for (int j = 0; j < s.Length; j++)
            {
                s[j] = Math.Exp(s[j] - m);
                den += s[j];
            }
            var o = new double[v[0].Length];
            for (int j = 0; j < v.Length; j++)
                for (int e = 0; e < o.Length; e++)
                    o[e] += s[j] / den * v[j][e];
            return o;
        }

        // Compares outp ([b][hq][d], one query per sequence) with float64 attention over each
        // sequence's lens[b] cached keys: key j of KV head h is row slot(b, j) * hkv + h, its
        // element e val(false, row, e) for K and val(true, row, e) for V.
        internal static void CheckPagedDecode(string label, float[] outp, float[] q, int[] lens, int hq,
                                              int hkv, int d, Func<int, int, int> slot,
                                              Func<bool, int, int, double> val)
        {
            for (int b = 0; b < lens.Length; b++)
                for (int h = 0; h < hq; h++)
                {
                    int kvh = h / (hq / hkv);
                    var kk = new double[lens[b]][];
                    var vv = new double[lens[b]][];
                    for (int j = 0; j < lens[b]; j++)
                    {
                        int r = slot(b, j) * hkv + kvh;
                        kk[j] = new double[d];
                        vv[j] = new double[d];
                        for (int e = 0; e < d; e++)
                        {
                            kk[j][e] = val(false, r, e);
                            vv[j][e] = val(true, r, e);
                        }
                    }
                    var qr = new double[d];
                    for (int e = 0; e < d; e++)
                        qr[e] = q[(b * hq + h) * d + e];
                    double[] want = Attend64(qr, kk, vv, 1 / Math.Sqrt(d));
                    for (int e = 0; e < d; e++)
                        Assert.AreEqual(want[e], outp[(b * hq + h) * d + e], 1e-5,
                                        label + " out[" + b + "][" + h + "][" + e + "]");
                }
        }

        [Test]
        public void PagedF16CacheFilledByKvAppendArgsThenDecoded()
        {
            const int B = 2, HQ = 4, HKV = 2, D = 16, P = 4, MaxPages = 3, NumPages = 6;
            int[] lens = { 6, 9 };
            int[] table = { 4, 3, -1, 2, 1, 0 };
            Func<int, int, int> slot = (b, j) => table[b * MaxPages + j / P] * P + j % P;
            var g = new Random(29);
            int rows = NumPages * P * HKV;
            var k16 = new ushort[rows * D];
            var v16 = new ushort[rows * D];
            for (int b = 0; b < B; b++)
                for (int j = 0; j < lens[b] - 1; j++)
                    for (int h = 0; h < HKV; h++)
                        for (int e = 0; e < D; e++)
                        {
                            int r = slot(b, j) * HKV + h;
                            k16[r * D + e] = F16Nearest((float)(4 * g.NextDouble() - 2));
                            v16[r * D + e] = F16Nearest((float)(4 * g.NextDouble() - 2));
                        }
            var newK = new float[B * HKV * D];
            var newV = new float[B * HKV * D];
            var q = new float[B * HQ * D];
            for (int e = 0; e < newK.Length; e++)
            {
                newK[e] = (float)(4 * g.NextDouble() - 2);
                newV[e] = (float)(4 * g.NextDouble() - 2);
            }
            for (int e = 0; e < q.Length; e++)
                q[e] = (float)(2 * g.NextDouble() - 1);
            var before = (ushort[])k16.Clone();
            var outp = new float[B * HQ * D];
            using (var desc = new AttentionDesc.Builder().Dims(B, HQ, HKV, 1, MaxPages * P, D)
                       .PageSize(P).Causal(Causal.BottomRight).Build())
            using (var args = new AttentionArgs())
            {
                args.BindF16(Operand.K, k16).BindF16(Operand.V, v16).Bind(Operand.NewK, newK)
                    .Bind(Operand.NewV, newV).Bind(Operand.SeqLensK, lens)
                    .Bind(Operand.BlockTable, table);
                desc.KvAppendArgs(args);
                for (int b = 0; b < B; b++)
                    for (int h = 0; h < HKV; h++)
                    {
                        int r = slot(b, lens[b] - 1) * HKV + h;
                        for (int e = 0; e < D; e++)
                        {
                            Assert.AreEqual(F16Nearest(newK[(b * HKV + h) * D + e]), k16[r * D + e],
                                            "k row " + r + " element " + e);
                            Assert.AreEqual(F16Nearest(newV[(b * HKV + h) * D + e]), v16[r * D + e]);
                            before[r * D + e] = k16[r * D + e];
                        }
                    }
                CollectionAssert.AreEqual(before, k16, "only the destination rows are written");
                args.Bind(Operand.Q, q).Bind(Operand.Out, outp);
                desc.Run(Op.Forward, args);
            }
            CheckPagedDecode("f16", outp, q, lens, HQ, HKV, D, slot,
                             (isV, r, e) => F16Value((isV ? v16 : k16)[r * D + e]));
        }

        [Test]
        public void KvAppendArgsErrorsNameTheOperand()
        {
            using (var desc = new AttentionDesc.Builder().Dims(1, 1, 1, 1, 4, 4).Build())
            using (var args = new AttentionArgs())
            {
                var k = new ushort[16];
                var v = new ushort[16];
                args.BindF16(Operand.K, k).BindF16(Operand.V, v).Bind(Operand.NewK, new float[4])
                    .Bind(Operand.SeqLensK, new[] { 2 }).BindBF16(Operand.NewV, new ushort[4]);
                var e = Assert.Throws<ArgumentException>(() => desc.KvAppendArgs(args));
                StringAssert.Contains("new_v is bf16 but v is f16", e.Message);
                args.BindF16(Operand.NewV, new ushort[] { 0x3C00, 0x3C00, 0x3C00, 0x3C00 });
                desc.KvAppendArgs(args);
                Assert.AreEqual(0x3C00, v[4]);
                Assert.AreEqual(0, v[0]);
                Assert.Throws<ArgumentNullException>(() => desc.KvAppendArgs(null));
            }
        }

        // float64 gradients of out = softmax(scale q k^T) v, one head, every key visible.
        static double[][][] Backward64(double[][] q, double[][] k, double[][] v, double[][] dout,
                                       double scale)
        {
            int n = q.Length, m = k.Length, d = q[0].Length;
            Func<int, double[][]> zeros = r => Enumerable.Range(0, r).Select(_ => new double[d]).ToArray();
            double[][] dq = zeros(n), dk = zeros(m), dv = zeros(m);
            for (int i = 0; i < n; i++)
            {
                var p = new double[m];
                double mx = double.NegativeInfinity, den = 0, dsum = 0;
                for (int j = 0; j < m; j++)
                {
                    for (int e = 0; e < d; e++)
                        p[j] += q[i][e] * k[j][e];
                    p[j] *= scale;
                    mx = Math.Max(mx, p[j]);
                }
                for (int j = 0; j < m; j++)
                {
                    p[j] = Math.Exp(p[j] - mx);
                    den += p[j];
                }
                var dp = new double[m];
                for (int j = 0; j < m; j++)
                {
                    p[j] /= den;
                    for (int e = 0; e < d; e++)
                    {
                        dp[j] += dout[i][e] * v[j][e];
                        dv[j][e] += p[j] * dout[i][e];
                    }
                    dsum += p[j] * dp[j];
                }
                for (int j = 0; j < m; j++)
                {
                    double ds = p[j] * (dp[j] - dsum) * scale;
                    for (int e = 0; e < d; e++)
                    {
                        dq[i][e] += ds * k[j][e];
                        dk[j][e] += ds * q[i][e];
                    }
                }
            }
            return new[] { dq, dk, dv };
        }

        [Test]
        public void BackwardWithBF16InputsMatchesFloat64OverTheWidenedValues()
        {
            const int B = 2, H = 3, SQ = 5, SK = 7, D = 8;
            var g = new Random(16);
            int[] rowsOf = { SQ, SK, SK, SQ };
            var bits = new ushort[4][];
            var wide = new float[4][];
            for (int x = 0; x < 4; x++)
            {
                var raw = new float[B * H * rowsOf[x] * D];
                for (int e = 0; e < raw.Length; e++)
                    raw[e] = (float)(3 * g.NextDouble() - 1.5);
                bits[x] = Attention.ConvertF32ToBF16(raw);
                wide[x] = Attention.ConvertBF16ToF32(bits[x]);
            }
            var outp = new float[B * H * SQ * D];
            var lse = new float[B * H * SQ];
            var grads = new[] { new float[B * H * SQ * D], new float[B * H * SK * D],
                                new float[B * H * SK * D] };
            using (var desc = new AttentionDesc.Builder().Dims(B, H, H, SQ, SK, D).Build())
            using (var args = new AttentionArgs())
            {
                args.BindBF16(Operand.Q, bits[0]).BindBF16(Operand.K, bits[1])
                    .BindBF16(Operand.V, bits[2]).Bind(Operand.Out, outp).Bind(Operand.Lse, lse);
                desc.Run(Op.Forward, args);
                args.BindBF16(Operand.DOut, bits[3]).Bind(Operand.DQ, grads[0])
                    .Bind(Operand.DK, grads[1]).Bind(Operand.DV, grads[2]);
                desc.Run(Op.Backward, args);
            }
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                {
                    var inp = new double[4][][];
                    for (int x = 0; x < 4; x++)
                    {
                        inp[x] = new double[rowsOf[x]][];
                        for (int i = 0; i < rowsOf[x]; i++)
                        {
                            inp[x][i] = new double[D];
                            for (int e = 0; e < D; e++)
                                inp[x][i][e] = wide[x][((b * H + h) * rowsOf[x] + i) * D + e];
                        }
                    }
                    double[][][] want = Backward64(inp[0], inp[1], inp[2], inp[3], 1 / Math.Sqrt(D));
                    for (int x = 0; x < 3; x++)
                        for (int i = 0; i < rowsOf[x]; i++)
                            for (int e = 0; e < D; e++)
                                Assert.AreEqual(want[x][i][e],
                                                grads[x][((b * H + h) * rowsOf[x] + i) * D + e], 1e-5,
                                                "gradient " + x + " [" + b + "][" + h + "][" + i + "][" + e + "]");
                }
        }
    }
}
