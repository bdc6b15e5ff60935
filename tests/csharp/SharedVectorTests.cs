// NUnit tests of the 0.1 shared vectors (tests/vectors/index.txt, the values of the float64
// references of C++ and Python) through AttentionDesc.Forward and Weights, on every ISA and
// thread count, writing $ATTN_XLANG_DIR/csharp.bin for the cross-language byte comparison.
using System;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class SharedVectorTests
    {
        // Runs every shared case (tolerance checks) and returns the cross-language bytes: for
        // each case in index order, out, lse and weights as little-endian float32.
        static byte[] RunAllCases(string label)
        {
            Assert.IsTrue(BitConverter.IsLittleEndian, "vector files are little-endian");
            var xlang = new MemoryStream();
            var cases = IndexCase.All();
            foreach (IndexCase c in cases) RunCase(c, xlang, label);
            Console.WriteLine("shared vectors [{0}]: {1} cases passed", label, cases.Count);
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
            Util.OnEveryIsa(isa => RunAllCases("isa " + isa));
            Util.AssertSameBytesOnOneAndManyThreads(RunAllCases);
        }

        // Forward (into output and lse) and Weights (into weights) of one case, checked as
        // VARIANTS.md says: within 1e-5, expected zeros (hidden keys, OUT gaps, rows with no
        // visible key) exactly 0, expected -inf lse exactly -inf.
        static void RunCase(IndexCase c, Stream xlang, string label)
        {
            string name = c.Name + " [" + label + "]";
            using (AttentionDesc desc = c.Builder().Build())
            {
                c.CheckLengths(desc);
                var output = new float[c.Out.Length]; // zero-initialised
                var lse = new float[c.Lse.Length];
                desc.Forward(c.Q, c.K, c.V, c.KeyValid, c.Allowed, output, lse);
                var weights = new float[c.Weights.Length];
                desc.Weights(c.Q, c.K, c.KeyValid, c.Allowed, weights);

                Vectors.Check(c.Out, output, name + " out");
                Vectors.Check(c.Lse, lse, name + " lse");
                Vectors.Check(c.Weights, weights, name + " weights");

                foreach (float[] part in new[] { output, lse, weights })
                {
                    var bytes = new byte[part.Length * 4];
                    Buffer.BlockCopy(part, 0, bytes, 0, bytes.Length);
                    xlang.Write(bytes, 0, bytes.Length);
                }
            }
        }
    }
}
