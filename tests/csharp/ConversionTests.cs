// NUnit tests of the storage conversions of Attention (ConvertF32ToF16, ConvertF32ToBF16,
// ConvertF16ToF32, ConvertBF16ToF32, QuantizeI8): rounding to nearest even, exact widening,
// span windows, short destinations and non-finite rows refused naming the argument.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ConversionTests
    {
        static float F(int bits)
        {
            return BitConverter.ToSingle(BitConverter.GetBytes(bits), 0);
        }

        [Test]
        public void F16RoundsToNearestEvenAndWidensExactly()
        {
            float tieDown = 1.0f + (float)Math.Pow(2, -11); // halfway between 1 and 1 + 2^-10
            float tieUp = 1.0f + 3 * (float)Math.Pow(2, -11); // halfway: rounds to the even 1 + 2^-9
            var src = new[] { 1.0f, -2.0f, 0.5f, tieDown, tieUp, 65504f, 65520f, float.NaN,
                              float.NegativeInfinity, 0.0f, -0.0f, F(1) };
            ushort[] h = Attention.ConvertF32ToF16(src);
            CollectionAssert.AreEqual(
                new ushort[] { 0x3C00, 0xC000, 0x3800, 0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0, 0xFC00,
                               0x0000, 0x8000, 0x0000 },
                h.Select((x, i) => i == 7 ? (ushort)0 : x).ToArray());
            Assert.AreEqual(0x7C00, h[7] & 0x7C00, "NaN stays NaN (exponent all ones)");
            Assert.AreNotEqual(0, h[7] & 0x03FF, "NaN stays NaN (mantissa nonzero)");

            float[] back = Attention.ConvertF16ToF32(h);
            Assert.AreEqual(1.0f, back[3], "1 + 2^-11 -> 1.0");
            Assert.AreEqual(1.0f + (float)Math.Pow(2, -9), back[4], "1 + 3*2^-11 -> 1 + 2^-9");
            Assert.AreEqual(65504f, back[5]);
            Assert.AreEqual(float.PositiveInfinity, back[6], "overflow gives infinity");
            Assert.IsTrue(float.IsNaN(back[7]));
            Assert.AreEqual(float.NegativeInfinity, back[8]);
            Assert.AreEqual(0x80000000u, BitConverter.ToUInt32(BitConverter.GetBytes(back[10]), 0),
                            "-0 stays -0");
            // Values that f16 holds survive the round trip exactly.
            var exact = new[] { 1.0f, -2.0f, 0.5f, 0.099975586f, 6.1035156e-05f, 5.9604645e-08f };
            CollectionAssert.AreEqual(exact, Attention.ConvertF16ToF32(Attention.ConvertF32ToF16(exact)));
        }

        [Test]
        public void BF16RoundsToNearestEvenAndWidensExactly()
        {
            float tieDown = 1.0f + (float)Math.Pow(2, -8); // halfway between 1 and 1 + 2^-7
            float tieUp = 1.0f + 3 * (float)Math.Pow(2, -8);
            var src = new[] { 1.0f, -2.0f, tieDown, tieUp, float.MaxValue, 3.0e38f };
            ushort[] b = Attention.ConvertF32ToBF16(src);
            CollectionAssert.AreEqual(new ushort[] { 0x3F80, 0xC000, 0x3F80, 0x3F82, 0x7F80, 0x7F62 },
                                      b);
            float[] back = Attention.ConvertBF16ToF32(b);
            Assert.AreEqual(1.0f + (float)Math.Pow(2, -6), back[3]);
            Assert.AreEqual(float.PositiveInfinity, back[4], "FLT_MAX rounds up to infinity");
            ushort[] nan = Attention.ConvertF32ToBF16(new[] { float.NaN });
            Assert.IsTrue(float.IsNaN(Attention.ConvertBF16ToF32(nan)[0]), "NaN stays NaN");
        }

        [Test]
        public void SpansWindowsAndShortDestinations()
        {
            var src = new[] { 9f, 1f, 2f, 3f, 9f };
            var dst = new ushort[6];
            Attention.ConvertF32ToF16(new ReadOnlySpan<float>(src, 1, 3), new Span<ushort>(dst, 2, 3));
            CollectionAssert.AreEqual(new ushort[] { 0, 0, 0x3C00, 0x4000, 0x4200, 0 }, dst);
            var wide = new float[4];
            Attention.ConvertF16ToF32(new ReadOnlySpan<ushort>(dst, 2, 3), wide);
            CollectionAssert.AreEqual(new[] { 1f, 2f, 3f, 0f }, wide);
            Attention.ConvertF32ToF16(ReadOnlySpan<float>.Empty, Span<ushort>.Empty); // n = 0: ok

            var e = Assert.Throws<ArgumentException>(() => Attention.ConvertF32ToF16(src, new ushort[4]));
            Assert.AreEqual("dst", e.ParamName);
            StringAssert.Contains("dst has 4 elements, needs at least 5", e.Message);
            e = Assert.Throws<ArgumentException>(() => Attention.ConvertBF16ToF32(new ushort[3], new float[2]));
            StringAssert.Contains("dst has 2 elements, needs at least 3", e.Message);
            Assert.Throws<ArgumentNullException>(() => Attention.ConvertF32ToBF16((float[])null));
            Assert.Throws<ArgumentNullException>(() => Attention.ConvertF16ToF32((ushort[])null));
        }

        [Test]
        public void QuantizeI8PerRowScalesAndNonFiniteRowsNamed()
        {
            // Row 0: max 127 -> scale 1, 0.5 -> 0 and 1.5 -> 2 (nearest even); row 1: all zero
            // -> scale 0, q 0; row 2: max 254 -> scale 2, 3 -> 1.5 -> 2, -5 -> -2.5 -> -2.
            var src = new[] { 127f, -3f, 0.5f, 1.5f, 0f, 0f, 0f, 0f, -254f, 3f, -5f, 1f };
            float[] scales;
            sbyte[] q = Attention.QuantizeI8(src, 4, out scales);
            CollectionAssert.AreEqual(new float[] { 1f, 0f, 2f }, scales);
            CollectionAssert.AreEqual(new sbyte[] { 127, -3, 0, 2, 0, 0, 0, 0, -127, 2, -2, 0 }, q);
            // rows of dim 0 have max |x| = 0: scale 0 each, as in C and every face
            var s3 = new[] { 7f, 7f, 7f };
            Attention.QuantizeI8(ReadOnlySpan<float>.Empty, 3, 0, Span<sbyte>.Empty, s3);
            CollectionAssert.AreEqual(new float[3], s3);

            // A NaN in row 1 of 3: the library names the row; row 0 is written.
            var bad = new[] { 1f, 2f, 3f, float.NaN, 5f, 6f };
            var dst = new sbyte[6];
            var sc = new float[3];
            var e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(bad, 3, 2, dst, sc));
            StringAssert.Contains("attn_quantize_i8: src row 1 holds a non-finite value", e.Message);
            Assert.AreEqual("src", e.ParamName);
            Assert.AreEqual(2f / 127f, sc[0], "rows before the bad one are written");
            e = Assert.Throws<ArgumentException>(
                () => Attention.QuantizeI8(new[] { 1f, float.PositiveInfinity }, 1, out scales));
            StringAssert.Contains("src row 1", e.Message);

            // Shapes, checked before the call.
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 4, 4, dst, sc));
            StringAssert.Contains("src has 12 elements, needs at least rows (4) x dim (4)", e.Message);
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 3, 4, new sbyte[11], sc));
            Assert.AreEqual("dst", e.ParamName);
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 3, 4, new sbyte[12], new float[2]));
            StringAssert.Contains("scales has 2 elements, needs at least 3", e.Message);
            e = Assert.Throws<ArgumentException>(() => Attention.QuantizeI8(src, 5, out scales));
            StringAssert.Contains("not a whole number of rows", e.Message);
            Assert.Throws<ArgumentOutOfRangeException>(() => Attention.QuantizeI8(src, -1, 4, dst, sc));
            Assert.Throws<ArgumentOutOfRangeException>(() => Attention.QuantizeI8(src, 0, out scales));
        }
    }
}
