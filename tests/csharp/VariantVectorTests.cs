// The shared vectors of the extensible call (tests/vectors/VARIANTS.md) through the C# face:
// every line of variants.txt, storage.txt (Q/K/V bound through BindF16 / BindBF16 /
// Bind(sbyte[]) + KScale / VScale) and backward.txt (forward, then Op.Backward with DOut and the
// listed gradients) runs through AttentionDesc.Builder + AttentionArgs + AttentionDesc.Run, is
// checked as VARIANTS.md says and its raw results are written to
// $ATTN_XLANG_DIR/csharp.{variants,storage,backward}.bin for xlang_identical. errors.txt runs
// in ErrorVectorTests.cs.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    // The reader of the shared vector files (tests/vectors/*.txt and their data files): the
    // one every C# test uses, for index.txt (the 0.1 cases, SharedVectorTests) as for
    // variants.txt, storage.txt, backward.txt and errors.txt (VARIANTS.md).
    static class Vectors
    {
        static readonly CultureInfo Inv = CultureInfo.InvariantCulture;

        public static string Dir()
        {
            string dir = Environment.GetEnvironmentVariable("ATTN_VECTORS_DIR");
            Assert.IsFalse(string.IsNullOrEmpty(dir), "ATTN_VECTORS_DIR is not set");
            return dir;
        }

        static readonly string[] LineKeys = {
            "name", "batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "causal",
            "window_left", "window_right", "softcap", "alibi", "softmax_plus_one", "head_dim_v",
            "bias_first", "weights_mode", "scale", "varlen", "diagonal", "alibi_form",
            "strides.q", "strides.k", "strides.v", "strides.out", "strides.bias",
            "strides.alibi_slopes", "in", "mass", "compute", "tol" };
        static readonly string[] ErrorKeys = { "op", "break", "status", "names" };
        static readonly string[] StorageKeys = { "store.q", "store.k", "store.v",
                                                 "strides.k_scale", "strides.v_scale" };
        static readonly string[] BackwardKeys = { "grads" };
        // index.txt (the 0.1 format): every key always present.
        static readonly string[] IndexKeys = {
            "name", "batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "causal",
            "scale", "q_strides", "k_strides", "v_strides", "out_strides", "key_valid",
            "allowed" };
        public static readonly string[] GradNames = { "dq", "dk", "dv", "dbias", "dsinks" };

        static bool KnownKey(string file, string key)
        {
            if (file == "index.txt") return IndexKeys.Contains(key);
            return LineKeys.Contains(key) || (file == "errors.txt" && ErrorKeys.Contains(key))
                   || (file == "storage.txt" && StorageKeys.Contains(key))
                   || (file == "backward.txt" && BackwardKeys.Contains(key));
        }

        // The cases of a file; a key the format does not define fails the test.
        public static List<Dictionary<string, string>> Lines(string file)
        {
            string path = Path.Combine(Dir(), file);
            Assert.IsTrue(File.Exists(path), "missing " + path);
            string[] required = file == "index.txt" ? IndexKeys
                                : new[] { "name", "batch", "heads_q", "heads_kv", "seq_q",
                                          "seq_k", "head_dim", "in", "mass" };
            var r = new List<Dictionary<string, string>>();
            foreach (string raw in File.ReadAllLines(path))
            {
                string line = raw.Trim();
                if (line.Length == 0 || line.StartsWith("#")) continue;
                var kv = new Dictionary<string, string>();
                foreach (string tok in line.Split((char[])null, StringSplitOptions.RemoveEmptyEntries))
                {
                    int eq = tok.IndexOf('=');
                    Assert.Greater(eq, 0, "bad token '" + tok + "' in: " + line);
                    string key = tok.Substring(0, eq);
                    Assert.IsFalse(kv.ContainsKey(key), "repeated key in: " + line);
                    Assert.IsTrue(KnownKey(file, key),
                                  "unknown key '" + key + "' in " + file + ": " + line);
                    kv[key] = tok.Substring(eq + 1);
                }
                foreach (string key in required)
                    Assert.IsTrue(kv.ContainsKey(key), "no " + key + " in: " + line);
                r.Add(kv);
            }
            Assert.Greater(r.Count, 0, "no cases in " + path);
            return r;
        }

        // The case of a file with this name.
        public static Dictionary<string, string> Line(string file, string name)
        {
            var c = Lines(file).SingleOrDefault(x => x["name"] == name);
            Assert.IsNotNull(c, "no case " + name + " in " + file);
            return c;
        }

        // Where the data files of a case start: <dir>/<name>.
        public static string Prefix(Dictionary<string, string> c)
        {
            return Path.Combine(Dir(), c["name"] + ".");
        }

        public static Operand OperandOf(string name)
        {
            int i = Array.IndexOf(AttentionArgs.Names, name);
            Assert.GreaterOrEqual(i, 0, "unknown operand " + name);
            return (Operand)i;
        }

        // The descriptor of a line, configured through the idiomatic setters (the generic Set
        // only for values a typed setter cannot express, e.g. softmax_plus_one=2). Parameters in
        // VARIANTS.md order, strides after them (the builder applies them in that order anyway).
        public static AttentionDesc.Builder Builder(Dictionary<string, string> c)
        {
            Func<string, long> I = key => long.Parse(c[key], Inv);
            var b = new AttentionDesc.Builder().Dims(I("batch"), I("heads_q"), I("heads_kv"),
                                                     I("seq_q"), I("seq_k"), I("head_dim"));
            string v;
            if (c.TryGetValue("causal", out v)) b.Causal((Causal)int.Parse(v, Inv));
            if (c.ContainsKey("window_left") || c.ContainsKey("window_right"))
                b.Window(c.ContainsKey("window_left") ? I("window_left") : -1,
                         c.ContainsKey("window_right") ? I("window_right") : -1);
            if (c.TryGetValue("softcap", out v)) b.Softcap(float.Parse(v, NumberStyles.Float, Inv));
            if (c.TryGetValue("alibi", out v)) b.Alibi((Alibi)int.Parse(v, Inv));
            if (c.TryGetValue("softmax_plus_one", out v))
            {
                long x = long.Parse(v, Inv);
                if (x == 0 || x == 1) b.SoftmaxPlusOne(x == 1);
                else b.Set(Param.SoftmaxPlusOne, x);
            }
            if (c.ContainsKey("head_dim_v")) b.HeadDimV(I("head_dim_v"));
            if (c.TryGetValue("bias_first", out v))
            {
                long x = long.Parse(v, Inv);
                if (x == 0 || x == 1) b.BiasFirst(x == 1);
                else b.Set(Param.BiasFirst, x);
            }
            if (c.TryGetValue("weights_mode", out v)) b.WeightsMode((WeightsMode)int.Parse(v, Inv));
            if (c.TryGetValue("scale", out v))
            {
                double x = double.Parse(v, NumberStyles.Float, Inv);
                if ((double)(float)x == x) b.Scale((float)x);
                else b.Set(Param.Scale, x); // not a float (1e39): the library's bounds decide
            }
            if (c.TryGetValue("varlen", out v))
            {
                long x = long.Parse(v, Inv);
                if (x == 0 || x == 1) b.Varlen(x == 1);
                else b.Set(Param.Varlen, x);
            }
            if (c.TryGetValue("diagonal", out v)) b.Diagonal((Diagonal)int.Parse(v, Inv));
            if (c.TryGetValue("alibi_form", out v)) b.AlibiForm((AlibiForm)int.Parse(v, Inv));
            if (c.TryGetValue("compute", out v)) b.Compute((Compute)int.Parse(v, Inv));
            // storage.txt: the int8 scales' strides after the others
            foreach (string op in new[] { "q", "k", "v", "out", "bias", "k_scale", "v_scale",
                                          "alibi_slopes" })
                if (c.TryGetValue("strides." + op, out v))
                    Strides(b, OperandOf(op), v, c["name"] + ": strides." + op);
            return b;
        }

        // "B,H,R" -> Builder.Strides(which, B, H, R).
        public static void Strides(AttentionDesc.Builder b, Operand which, string value, string what)
        {
            long[] s = value.Split(',').Select(x => long.Parse(x, Inv)).ToArray();
            Assert.AreEqual(3, s.Length, what);
            b.Strides(which, s[0], s[1], s[2]);
        }

        // The in= list of a line: each name must be an operand the library's table
        // (Attention.Info) lists as an input, so a new operand needs no change here.
        public static string[] Inputs(Dictionary<string, string> c)
        {
            string[] names = c["in"].Split(new[] { ',' }, StringSplitOptions.RemoveEmptyEntries);
            foreach (string n in names)
                Assert.IsTrue(Attention.Info(OperandOf(n)).InputTypes.Count > 0,
                              c["name"] + ": in= names " + n + ", not an input operand");
            return names;
        }

        // The element type of an input operand's file, from the types the library lists for
        // it: byte masks u8, int32 i32, every other input f32.
        public static string FileType(Operand op)
        {
            ISet<Dtype> t = Attention.Info(op).InputTypes;
            return t.Contains(Dtype.U8) ? "u8" : t.Contains(Dtype.I32) ? "i32" : "f32";
        }

        public static T[] ReadRaw<T>(string file, int size) where T : struct
        {
            byte[] raw = File.ReadAllBytes(file);
            Assert.AreEqual(0, raw.Length % size, file + ": not a whole number of elements");
            var x = new T[raw.Length / size];
            Buffer.BlockCopy(raw, 0, x, 0, raw.Length);
            return x;
        }

        // The fp32 inputs of a variants.txt / backward.txt line (no store.* keys) as typed
        // arrays (masks as bool[]), each checked against RequiredLen; an input the line does
        // not list stays null.
        public static TestInputs Load(Dictionary<string, string> c, AttentionDesc desc)
        {
            string p = Prefix(c);
            var a = new TestInputs();
            foreach (string input in Inputs(c))
            {
                Assert.IsFalse(c.ContainsKey("store." + input), c["name"] + ": stored " + input);
                Operand op = OperandOf(input);
                string type = FileType(op);
                Array x;
                if (type == "i32")
                {
                    int[] n = ReadRaw<int>(p + input + ".i32", 4);
                    if (input == "seq_lens_k") a.SeqLensK = n;
                    else a.Other[op] = n;
                    x = n;
                }
                else if (type == "u8")
                {
                    bool[] m = File.ReadAllBytes(p + input + ".u8").Select(y => y != 0).ToArray();
                    if (input == "key_valid") a.KeyValid = m;
                    else if (input == "allowed") a.Allowed = m;
                    else if (input == "query_valid") a.QueryValid = m;
                    else a.Other[op] = m;
                    x = m;
                }
                else
                {
                    float[] f = Util.ReadF32(p + input + ".f32");
                    switch (input)
                    {
                        case "q": a.Q = f; break;
                        case "k": a.K = f; break;
                        case "v": a.V = f; break;
                        case "bias": a.Bias = f; break;
                        case "alibi_slopes": a.AlibiSlopes = f; break;
                        case "sinks": a.Sinks = f; break;
                        default: a.Other[op] = f; break;
                    }
                    x = f;
                }
                Assert.AreEqual(desc.RequiredLen(op), (ulong)x.Length, c["name"] + ": " + input + " length");
            }
            return a;
        }

        // Binds the inputs of a line, each through its typed setter (store.q/k/v: BindF16,
        // BindBF16, Bind(sbyte[]) with its scale operand), every file checked against
        // RequiredLen.
        public static void BindInputs(Dictionary<string, string> c, AttentionDesc desc,
                                      AttentionArgs args, bool boolMasks)
        {
            string p = Prefix(c), name = c["name"];
            Action<Operand, long, string> len = (op, n, file) =>
                Assert.AreEqual(desc.RequiredLen(op), (ulong)n, name + ": " + file + " length");
            foreach (string key in c.Keys.Where(x => x.StartsWith("store.")))
                CollectionAssert.Contains(Inputs(c), key.Substring(6), name + ": " + key);
            foreach (string input in Inputs(c))
            {
                Operand op = OperandOf(input);
                string store;
                if (c.TryGetValue("store." + input, out store))
                {
                    string file = p + input + "." + store;
                    if (store == "f16" || store == "bf16")
                    {
                        ushort[] x = ReadRaw<ushort>(file, 2);
                        len(op, x.Length, file);
                        if (store == "f16") args.BindF16(op, x);
                        else args.BindBF16(op, x);
                    }
                    else
                    {
                        Assert.AreEqual("i8", store, name + ": store." + input);
                        sbyte[] x = ReadRaw<sbyte>(file, 1);
                        len(op, x.Length, file);
                        args.Bind(op, x);
                        Operand sop = OperandOf(input + "_scale");
                        float[] scale = Util.ReadF32(p + input + "_scale.f32");
                        len(sop, scale.Length, input + "_scale.f32");
                        args.Bind(sop, scale);
                    }
                    continue;
                }
                string type = FileType(op);
                string path = p + input + "." + type;
                if (type == "f32")
                {
                    float[] x = Util.ReadF32(path);
                    len(op, x.Length, path);
                    args.Bind(op, x);
                }
                else if (type == "u8")
                {
                    byte[] x = File.ReadAllBytes(path);
                    len(op, x.Length, path);
                    if (boolMasks) args.Bind(op, x.Select(y => y != 0).ToArray());
                    else args.Bind(op, x);
                }
                else
                {
                    int[] x = ReadRaw<int>(path, 4);
                    len(op, x.Length, path);
                    args.Bind(op, x);
                }
            }
        }

        // An expected output of a case (<name>.<part>.f32), RequiredLen(op) floats long.
        public static float[] Expected(AttentionDesc desc, Operand op, Dictionary<string, string> c,
                                       string part)
        {
            string file = Prefix(c) + part + ".f32";
            float[] x = Util.ReadF32(file);
            Assert.AreEqual(desc.RequiredLen(op), (ulong)x.Length, c["name"] + ": " + file + " length");
            return x;
        }

        // The tolerance of a line's forward out and lse: its tol (a fast mode's), else 1e-5.
        public static double Tol(Dictionary<string, string> c)
        {
            string v;
            return c.TryGetValue("tol", out v) ? double.Parse(v, NumberStyles.Float, Inv) : 1e-5;
        }

        // VARIANTS.md's check: within rel relative-or-absolute; every expected 0 exactly 0
        // (unless exactZeros is false: gradients), every expected -inf exactly -inf.
        public static void Check(float[] expected, float[] got, string what, double rel = 1e-5,
                                 bool exactZeros = true)
        {
            Assert.GreaterOrEqual(got.Length, expected.Length, what + ": length");
            for (int i = 0; i < expected.Length; i++)
            {
                if (expected[i] == 0 && exactZeros)
                    Assert.AreEqual(0.0f, got[i], what + "[" + i + "] exactly 0");
                else
                    Util.AssertClose(expected[i], got[i], what + "[" + i + "]", rel);
            }
        }
    }

    [TestFixture]
    public class VariantVectorTests
    {
        // ---- variants.txt, storage.txt, backward.txt ---------------------------------------

        // Runs every case of a file; returns the xlang bytes (per case: out, lse, weights,
        // key_mass; backward.txt: the listed gradients).
        static byte[] RunAll(string file, string label, bool boolMasks)
        {
            Assert.IsTrue(BitConverter.IsLittleEndian, "vector files are little-endian");
            var xlang = new MemoryStream();
            var lines = Vectors.Lines(file);
            foreach (var c in lines) RunCase(c, xlang, label, boolMasks, file == "backward.txt");
            Console.WriteLine("{0} [{1}]: {2} cases passed", file, label, lines.Count);
            return xlang.ToArray();
        }

        static void Write(Stream xlang, float[] part)
        {
            var bytes = new byte[part.Length * 4];
            Buffer.BlockCopy(part, 0, bytes, 0, bytes.Length);
            xlang.Write(bytes, 0, bytes.Length);
        }

        static void RunCase(Dictionary<string, string> c, Stream xlang, string label,
                            bool boolMasks, bool backward)
        {
            string name = c["name"] + " [" + label + "]";
            bool mass = c["mass"] == "1";
            Assert.AreEqual(backward, c.ContainsKey("grads"), name + ": grads");
            using (AttentionDesc desc = Vectors.Builder(c).Build())
            using (var args = new AttentionArgs())
            {
                Vectors.BindInputs(c, desc, args, boolMasks);
                float[] expOut = Vectors.Expected(desc, Operand.Out, c, "out"),
                        expLse = Vectors.Expected(desc, Operand.Lse, c, "lse");
                float[] expMass = mass ? Vectors.Expected(desc, Operand.KeyMass, c, "key_mass")
                                       : null;
                var output = new float[expOut.Length]; // zero: elements OUT does not address
                var lse = new float[expLse.Length];
                float[] keyMass = mass ? new float[expMass.Length] : null;
                args.Bind(Operand.Out, output).Bind(Operand.Lse, lse);
                if (mass) args.Bind(Operand.KeyMass, keyMass);
                desc.Run(Op.Forward, args);
                // Within 1e-5 (out and lse: the line's tol); every expected 0 (hidden weights,
                // padded rows, OUT gaps, unseen keys' mass) exactly 0, every expected -inf lse
                // exactly -inf.
                Vectors.Check(expOut, output, name + " out", Vectors.Tol(c));
                Vectors.Check(expLse, lse, name + " lse", Vectors.Tol(c));
                if (mass) Vectors.Check(expMass, keyMass, name + " key_mass");
                if (backward)
                {
                    RunBackward(c, desc, args, name, xlang);
                    return;
                }
                float[] expW = Vectors.Expected(desc, Operand.Weights, c, "weights");
                var weights = new float[expW.Length];
                args.Bind(Operand.Weights, weights); // the same inputs, V included: ignored
                desc.Run(Op.Weights, args);
                Vectors.Check(expW, weights, name + " weights");
                foreach (float[] part in new[] { output, lse, weights, keyMass })
                    if (part != null) Write(xlang, part);
            }
        }

        // backward.txt: the same args (inputs, the forward's out and lse) + dout and the listed
        // gradients, zero-filled; each within 1e-4, zeros included (no exact-zero rule: with one
        // visible key ds is 0 in exact arithmetic, about 1e-7 in float32).
        static void RunBackward(Dictionary<string, string> c, AttentionDesc desc,
                                AttentionArgs args, string name, Stream xlang)
        {
            string[] grads = c["grads"].Split(new[] { ',' }, StringSplitOptions.RemoveEmptyEntries);
            Assert.IsNotEmpty(grads, name + ": grads");
            int last = -1;
            foreach (string g in grads)
            {
                int at = Array.IndexOf(Vectors.GradNames, g);
                Assert.Greater(at, last, name + ": grads=" + c["grads"] + " (order dq dk dv dbias dsinks)");
                last = at;
            }
            args.Bind(Operand.DOut, Vectors.Expected(desc, Operand.DOut, c, "dout"));
            var got = new List<float[]>();
            var want = new List<float[]>();
            foreach (string g in grads)
            {
                Operand op = Vectors.OperandOf(g);
                want.Add(Vectors.Expected(desc, op, c, g));
                got.Add(new float[want[want.Count - 1].Length]);
                args.Bind(op, got[got.Count - 1]);
            }
            desc.Run(Op.Backward, args);
            for (int i = 0; i < grads.Length; i++)
            {
                Vectors.Check(want[i], got[i], name + " " + grads[i], 1e-4, false);
                Write(xlang, got[i]);
            }
        }

        static void WriteXlang(string file, byte[] bytes)
        {
            string xdir = Environment.GetEnvironmentVariable("ATTN_XLANG_DIR");
            if (!string.IsNullOrEmpty(xdir))
            {
                Directory.CreateDirectory(xdir);
                File.WriteAllBytes(Path.Combine(xdir, file), bytes);
            }
        }

        [Test]
        public void VariantsMatchWithin1e5AndWriteXlangBytes()
        {
            byte[] bytes = RunAll("variants.txt", "default isa " + Attention.Isa, false);
            WriteXlang("csharp.variants.bin", bytes);
            // bool[] masks give the same bytes as byte[] masks.
            CollectionAssert.AreEqual(bytes, RunAll("variants.txt", "bool masks", true));
        }

        [Test]
        public void StorageTypesMatchWithin1e5AndWriteXlangBytes()
        {
            WriteXlang("csharp.storage.bin",
                       RunAll("storage.txt", "default isa " + Attention.Isa, false));
        }

        [Test]
        public void BackwardMatchesWithin1e4AndWritesXlangBytes()
        {
            WriteXlang("csharp.backward.bin",
                       RunAll("backward.txt", "default isa " + Attention.Isa, false));
        }

        static readonly string[] VectorFiles = { "variants.txt", "storage.txt", "backward.txt" };

        static byte[] RunAllFiles(string label)
        {
            var all = new MemoryStream();
            foreach (string f in VectorFiles)
            {
                byte[] b = RunAll(f, label, false);
                all.Write(b, 0, b.Length);
            }
            return all.ToArray();
        }

        [Test]
        public void VariantsOnEveryIsaAndBitIdenticalForAnyThreadCount()
        {
            Util.OnEveryIsa(isa => RunAllFiles("isa " + isa));
            Util.AssertSameBytesOnOneAndManyThreads(RunAllFiles);
        }
    }
}
