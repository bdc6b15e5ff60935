// The helpers the NUnit tests of tests/csharp share (the shared vector files' reader, Vectors, is
// in VariantVectorTests.cs). The suites run as one assembly, by ctest as csharp_tests:
//   nunit-console -nologo -noshadow LibAttn.Tests.dll
// Environment (set by cmake/csharp.cmake): ATTN_VECTORS_DIR = tests/vectors (required),
// ATTN_XLANG_DIR = where the csharp*.bin files are written for the cross-language byte
// comparison.
using System;
using System.Buffers;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
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

        // Runs body(isa) with the kernel set to each ISA this CPU and build run (Attention.Isas,
        // the library's list); restores the default. Scalar and the default kernel must be among
        // them.
        public static void OnEveryIsa(Action<string> body)
        {
            var ran = new List<string>();
            try
            {
                foreach (IsaInfo isa in Attention.Isas)
                {
                    if (!isa.Supported) continue;
                    Attention.SetIsa(isa.Name);
                    Assert.AreEqual(isa.Name, Attention.Isa);
                    body(isa.Name);
                    ran.Add(isa.Name);
                }
            }
            finally
            {
                Attention.SetIsa(null);
            }
            CollectionAssert.Contains(ran, "scalar");
            CollectionAssert.Contains(ran, Attention.Isa, "the default kernel was among them");
        }

        // OnEveryIsa on 1 and 2 threads each; restores the default thread count.
        public static void OnEveryIsaAndThreadCount(Action<string> body)
        {
            try
            {
                OnEveryIsa(isa =>
                {
                    foreach (int threads in new[] { 1, 2 })
                    {
                        Attention.NumThreads = threads;
                        body(isa + ", " + threads + " thread(s)");
                    }
                });
            }
            finally
            {
                Attention.NumThreads = 0;
            }
        }

        // run(label) on the default number of threads and on one: the bytes must be identical.
        public static void AssertSameBytesOnOneAndManyThreads(Func<string, byte[]> run)
        {
            byte[] many = run("threads " + Attention.NumThreads);
            try
            {
                Attention.NumThreads = 1;
                CollectionAssert.AreEqual(many, run("threads 1"), "bit-identical for any thread count");
            }
            finally
            {
                Attention.NumThreads = 0; // the default again
            }
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

    // The operands of one call; null = not bound.
    sealed class TestInputs
    {
        public float[] Q, K, V, Bias, AlibiSlopes, Sinks;
        public bool[] KeyValid, Allowed, QueryValid;
        public int[] SeqLensK;
        // The inputs without a field of their own (e.g. q_scale), bound by their array type.
        public readonly Dictionary<Operand, Array> Other = new Dictionary<Operand, Array>();
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
                foreach (var x in a.Other)
                {
                    if (x.Value is float[]) args.Bind(x.Key, (float[])x.Value);
                    else if (x.Value is int[]) args.Bind(x.Key, (int[])x.Value);
                    else args.Bind(x.Key, (bool[])x.Value);
                }
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
        // checked as VARIANTS.md says: out and lse within the line's tol (1e-5 unless a fast mode
        // gives one), weights and (mass=1) key_mass within 1e-5 of the expected files,
        // expected zeros exactly 0, expected -inf exactly -inf.
        public static void Check(Dictionary<string, string> c, AttentionDesc.Builder builder = null)
        {
            string name = c["name"];
            using (AttentionDesc desc = (builder ?? Vectors.Builder(c)).Build())
            {
                TestInputs a = Vectors.Load(c, desc);
                float[] o, l, w, m;
                Both(desc, a, out o, out l, out w, out m);
                Vectors.Check(Vectors.Expected(desc, Operand.Out, c, "out"), o, name + " out",
                              Vectors.Tol(c));
                Vectors.Check(Vectors.Expected(desc, Operand.Lse, c, "lse"), l, name + " lse",
                              Vectors.Tol(c));
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

    // Memory not backed by a managed array (AllocHGlobal), for the MemoryHandle pinning path of
    // AttentionArgs (cu_seqlens among them: the face reads those values to size the pack). T is
    // float, byte or int: blittable, Marshal.SizeOf its size.
    sealed unsafe class NativeMemory<T> : MemoryManager<T> where T : struct
    {
        static readonly int Size = Marshal.SizeOf(typeof(T));
        readonly IntPtr ptr;
        readonly int length;
        public int Pins; // how many times a call pinned it

        public NativeMemory(int length)
        {
            this.length = length;
            ptr = Marshal.AllocHGlobal(Math.Max(1, length) * Size);
        }

        // A copy of values.
        public NativeMemory(T[] values) : this(values.Length)
        {
            new Span<T>(values).CopyTo(GetSpan());
        }

        public override Span<T> GetSpan() { return new Span<T>((void*)ptr, length); }

        public override MemoryHandle Pin(int elementIndex = 0)
        {
            Pins++;
            return new MemoryHandle((byte*)ptr + (long)elementIndex * Size);
        }

        public override void Unpin() { }

        protected override void Dispose(bool disposing) { Marshal.FreeHGlobal(ptr); }
    }


    // Three sequences of one layer: q lengths {5, 0, 9}, k lengths {40, 7, 66}, GQA 4/2,
    // head_dim 24. Per sequence dense [heads][len][D]; the varlen pack token-major.
    sealed class Seqs
    {
        public const int B = 3, HQ = 4, HKV = 2, D = 24, MaxQ = 9, MaxK = 66;
        public const float Sentinel = 777f; // in output beyond what a call may write
        public static readonly int[] LQ = { 5, 0, 9 }, LK = { 40, 7, 66 };
        public readonly float[][] Q = new float[B][], K = new float[B][], V = new float[B][];
        public readonly int[] CuQ = Cu(LQ), CuK = Cu(LK);

        public Seqs(int seed)
        {
            var r = new Random(seed);
            for (int b = 0; b < B; b++)
            {
                Q[b] = Uniform(r, HQ * LQ[b] * D, 1);
                K[b] = Uniform(r, HKV * LK[b] * D, 1);
                V[b] = Uniform(r, HKV * LK[b] * D, 2);
            }
        }

        // The varlen descriptor of these sequences: BOTTOM_RIGHT, batch invariant.
        public static AttentionDesc.Builder PackBuilder()
        {
            return new AttentionDesc.Builder()
                .Dims(B, HQ, HKV, MaxQ, MaxK, D).Causal(Causal.BottomRight).BatchInvariant().Varlen();
        }

        public int TotalQ { get { return CuQ[B]; } }
        public int TotalK { get { return CuK[B]; } }

        public static int[] Cu(int[] lens)
        {
            var cu = new int[lens.Length + 1];
            for (int b = 0; b < lens.Length; b++) cu[b + 1] = cu[b] + lens[b];
            return cu;
        }

        public static float[] Uniform(Random r, int n, double scale)
        {
            var x = new float[n];
            for (int i = 0; i < n; i++) x[i] = (float)((r.NextDouble() * 2 - 1) * scale);
            return x;
        }

        public static float[] Filled(int n, float value)
        {
            return Enumerable.Repeat(value, n).ToArray();
        }

        // Token-major [sum of (to - from)][heads][D] rows of tokens [from[b], to[b]) of each
        // sequence (src[b] is [heads][len[b]][D]).
        public static float[] Rows(float[][] src, int heads, int[] len, int[] from, int[] to)
        {
            int n = 0;
            for (int b = 0; b < B; b++) n += to[b] - from[b];
            var rows = new float[n * heads * D];
            int t = 0;
            for (int b = 0; b < B; b++)
                for (int j = from[b]; j < to[b]; j++, t++)
                    for (int h = 0; h < heads; h++)
                        Array.Copy(src[b], (h * len[b] + j) * D, rows, (t * heads + h) * D, D);
            return rows;
        }

        public float[] PackQ() { return Rows(Q, HQ, LQ, new int[B], LQ); }
        public float[] PackK() { return Rows(K, HKV, LK, new int[B], LK); }
        public float[] PackV() { return Rows(V, HKV, LK, new int[B], LK); }

        // Sequence b alone, dense BHSD, BOTTOM_RIGHT (or causal), batch invariant: out [HQ][lq][D], lse
        // [HQ][lq], through the 0.1 call whose values the shared vectors check (without
        // BatchInvariant, which changes the tiling, not the values: the two agree within 1e-5).
        public void Alone(int b, out float[] output, out float[] lse,
                          Causal causal = Causal.BottomRight)
        {
            var bl = new AttentionDesc.Builder().Dims(1, HQ, HKV, LQ[b], LK[b], D).Causal(causal);
            float[] plain = new float[HQ * LQ[b] * D], plainLse = new float[HQ * LQ[b]];
            using (AttentionDesc desc = bl.Build())
                desc.Forward(Q[b], K[b], V[b], null, null, plain, plainLse);
            using (AttentionDesc desc = bl.BatchInvariant().Build())
            {
                output = new float[desc.RequiredLen(Operand.Out)];
                lse = new float[desc.RequiredLen(Operand.Lse)];
                desc.Forward(Q[b], K[b], V[b], null, null, output, lse);
            }
            for (int i = 0; i < plain.Length; i++)
                Util.AssertClose(plain[i], output[i], "sequence " + b + " alone out[" + i + "]");
            for (int i = 0; i < plainLse.Length; i++)
                Util.AssertClose(plainLse[i], lse[i], "sequence " + b + " alone lse[" + i + "]");
        }

        // The rows of every sequence in a varlen result (out [total_q][HQ][D], lse
        // [HQ][total_q]) bit for bit against the sequence alone.
        public void AssertPackIsAlone(float[] output, float[] lse, string what,
                                      Causal causal = Causal.BottomRight)
        {
            for (int b = 0; b < B; b++)
            {
                if (LQ[b] == 0) continue;
                float[] o, l;
                Alone(b, out o, out l, causal);
                for (int h = 0; h < HQ; h++)
                    for (int i = 0; i < LQ[b]; i++)
                    {
                        for (int x = 0; x < D; x++)
                            Bits.AssertSame(o[(h * LQ[b] + i) * D + x],
                                            output[((CuQ[b] + i) * HQ + h) * D + x],
                                            what + ": out of sequence " + b + " (h " + h + ", i " + i
                                                + ", d " + x + ")");
                        Bits.AssertSame(l[h * LQ[b] + i], lse[h * TotalQ + CuQ[b] + i],
                                        what + ": lse of sequence " + b + " (h " + h + ", i " + i + ")");
                    }
            }
        }
    }

    static class Bits
    {
        public static unsafe int Of(float x) { return *(int*)&x; }

        public static void AssertSame(float expected, float got, string what)
        {
            if (Of(expected) != Of(got))
                Assert.Fail("{0}: got {1:R} (0x{2:x8}), expected {3:R} (0x{4:x8})", what, got,
                            Of(got), expected, Of(expected));
        }

        public static void AssertAllSame(float[] expected, float[] got, string what)
        {
            Assert.AreEqual(expected.Length, got.Length, what + ": length");
            for (int i = 0; i < expected.Length; i++)
                AssertSame(expected[i], got[i], what + "[" + i + "]");
        }

        // tests/reference/reference.hpp's rel_err: |got - want| / max(1, |want|); infinities exact.
        public static double RelErr(double got, double want)
        {
            if (double.IsInfinity(want)) return got == want ? 0.0 : 1e30;
            if (double.IsNaN(got)) return 1e30;
            return Math.Abs(got - want) / Math.Max(1.0, Math.Abs(want));
        }
    }
}
