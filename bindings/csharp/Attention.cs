// libattn C# binding: the simple API and library-wide settings.
using System;
using System.Globalization;
using System.Runtime.InteropServices;
using System.Text;

namespace LibAttn
{
    /// <summary>
    /// Exact masked scaled-dot-product attention (fp32, CPU). The one-sequence, one-head
    /// <see cref="Simple(float[], float[], float[], int, int, bool, bool[])"/> call, the
    /// library's version, kernel (ISA) and thread settings, and the conversions that fill 16-bit
    /// and int8 K/V caches (<see cref="ConvertF32ToF16(ReadOnlySpan{float}, Span{ushort})"/>,
    /// <see cref="QuantizeI8(ReadOnlySpan{float}, long, long, Span{sbyte}, Span{float})"/>). For batches, heads, GQA, strides,
    /// masks, log-sum-exp and weights use <see cref="AttentionDesc"/>.
    /// All members may be called from any number of threads at once.
    /// </summary>
    public static class Attention
    {
        // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
        static Attention()
        {
            NativeLoader.Preload();
        }

        /// <summary>
        /// The original attention(Q, K, V, causal, pad_mask) for one sequence and one head, scale
        /// 1/sqrt(d). Every argument is checked before the result is allocated, so impossible
        /// sizes (n = 40000 with tiny arrays) are an ArgumentException, never an
        /// OutOfMemoryException.
        /// </summary>
        /// <param name="q">[n][d] queries, row-major: at least n*d floats (a longer array is
        /// fine: only the first n*d are read).</param>
        /// <param name="k">[n][d] keys: at least n*d floats.</param>
        /// <param name="v">[n][d] values: at least n*d floats.</param>
        /// <param name="n">Sequence length, &gt; 0.</param>
        /// <param name="d">Vector size, &gt; 0.</param>
        /// <param name="causal">true: query i sees keys j &lt;= i; false: no causal rule.</param>
        /// <param name="padMask">[n], true = real token, false = padding (never attended); null =
        /// no padding (an empty array is a length error, not "no padding").</param>
        /// <returns>[n][d] outputs, row-major (n*d floats).</returns>
        /// <exception cref="ArgumentNullException">q, k or v is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException">n or d is not positive.</exception>
        /// <exception cref="ArgumentException">an array is shorter than n*d (padMask:
        /// n).</exception>
        public static float[] Simple(float[] q, float[] k, float[] v, int n, int d, bool causal,
                                     bool[] padMask = null)
        {
            long nd = CheckSimpleInputs(q, k, v, n, d, padMask);
            float[] output = new float[nd]; // nd <= q.Length: a size some array already has
            Errors.Check(AttnNative.attn_simple(q, k, v, (ulong)n, (ulong)d, causal, padMask,
                                                output));
            return output;
        }

        /// <summary>
        /// As <see cref="Simple(float[], float[], float[], int, int, bool, bool[])"/>, writing
        /// the [n][d] result into the first n*d floats of <paramref name="output"/> (it must not
        /// overlap the inputs: the library's error) without allocating.
        /// </summary>
        /// <exception cref="ArgumentException">an array is too short, or output is one of the
        /// inputs ("attn_simple: out overlaps q ...").</exception>
        public static void Simple(float[] q, float[] k, float[] v, int n, int d, bool causal,
                                  bool[] padMask, float[] output)
        {
            long nd = CheckSimpleInputs(q, k, v, n, d, padMask);
            CheckAtLeast(output, "output", nd);
            Errors.Check(AttnNative.attn_simple(q, k, v, (ulong)n, (ulong)d, causal, padMask,
                                                output));
        }

        /// <summary>The library's version, "MAJOR.MINOR.PATCH".</summary>
        public static string Version
        {
            get { return AttnNative.attn_version_string(); }
        }

        /// <summary>The library's version as MAJOR*10000 + MINOR*100 + PATCH.</summary>
        public static int VersionNumber
        {
            get { return (int)AttnNative.attn_version_number(); }
        }

        /// <summary>A short static description of a status ("ok", "null pointer", ...).</summary>
        public static string StatusString(Status status)
        {
            return AttnNative.attn_status_string(status);
        }

        /// <summary>Name of the kernel in use: "scalar", "sse2", "avx2", "avx512" or "avx512fp16".</summary>
        public static string Isa
        {
            get { return AttnNative.attn_isa(); }
        }

        /// <summary>Cap the kernel (process-wide) at <paramref name="name"/> ("scalar", "sse2",
        /// "avx2", "avx512", "avx512fp16"), or restore the default with null or "".</summary>
        /// <exception cref="ArgumentException">unknown name, with the library's wording; a name
        /// with an embedded NUL or a non-ASCII character is refused the same way before it
        /// reaches C (where "avx2\0junk" would read as "avx2").</exception>
        /// <exception cref="AttentionException">this CPU or build lacks it
        /// (Unsupported).</exception>
        public static void SetIsa(string name)
        {
            // A name C would misread ("avx2\0junk" as "avx2") reaches it in a printable, ASCII
            // form, which is no name either: the refusal and its list of names are the
            // library's own.
            if (name != null)
                foreach (char c in name)
                    if (c == '\0' || c > 127)
                    {
                        name = Printable(name);
                        break;
                    }
            Errors.Check(AttnNative.attn_set_isa(name));
        }

        /// <summary>Kind and closed range of a parameter (attn_param_bounds): what the
        /// <see cref="AttentionDesc.Builder"/> checks every value against.</summary>
        /// <exception cref="ArgumentOutOfRangeException">param is not a Param value.</exception>
        public static ParamBounds Bounds(Param param)
        {
            return Bounds(param, "param");
        }

        internal static ParamBounds Bounds(Param param, string argName)
        {
            int isFloat;
            double min, max;
            if (AttnNative.attn_param_bounds((attn_param)param, out isFloat, out min, out max)
                != Status.Ok)
                throw new ArgumentOutOfRangeException(
                    argName, param,
                    argName + " (" + ((int)param).ToString(CultureInfo.InvariantCulture)
                        + ") is not a Param value");
            return new ParamBounds(param, isFloat != 0, min, max);
        }

        /// <summary>Threads attention calls use (the caller counts as one). Setting 0 restores the
        /// default (ATTN_NUM_THREADS or the hardware thread count).</summary>
        /// <exception cref="ArgumentOutOfRangeException">set to a negative value.</exception>
        /// <exception cref="ArgumentException">set above the library's maximum (its
        /// message).</exception>
        public static int NumThreads
        {
            get { return (int)AttnNative.attn_get_num_threads(); }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value,
                                                          "NumThreads must be >= 0");
                Errors.Check(AttnNative.attn_set_num_threads((ulong)value));
            }
        }

        // ---- storage types: conversions for filling 16-bit and int8 caches ------------------
        // Spans are pinned with `fixed` for the call and passed without a copy (an array
        // converts to a span implicitly; any window of one, or native memory, works too).

        /// <summary>Rounds every float of <paramref name="src"/> to IEEE binary16 (f16) bit
        /// patterns in the first src.Length elements of <paramref name="dst"/>
        /// (attn_convert_f32_to_f16): round to nearest even, overflow gives infinity, NaN stays
        /// NaN. The buffers for <see cref="AttentionArgs.BindF16(Operand, ushort[])"/>.</summary>
        /// <exception cref="ArgumentException">dst is shorter than src ("dst has 3 elements,
        /// needs at least 4"), or the two overlap (the library's message).</exception>
        public static void ConvertF32ToF16(ReadOnlySpan<float> src, Span<ushort> dst)
        {
            Narrow(src, dst, false);
        }

        /// <summary>As <see cref="ConvertF32ToF16(ReadOnlySpan{float}, Span{ushort})"/> into a
        /// new array of src.Length bit patterns.</summary>
        /// <exception cref="ArgumentNullException">src is null.</exception>
        public static ushort[] ConvertF32ToF16(float[] src)
        {
            var dst = new ushort[NotNull(src, "src").Length];
            Narrow(src, dst, false);
            return dst;
        }

        /// <summary>Rounds every float of <paramref name="src"/> to bfloat16 (bf16) bit patterns
        /// (attn_convert_f32_to_bf16), as
        /// <see cref="ConvertF32ToF16(ReadOnlySpan{float}, Span{ushort})"/>. The buffers for
        /// <see cref="AttentionArgs.BindBF16(Operand, ushort[])"/>.</summary>
        /// <exception cref="ArgumentException">dst is shorter than src, or they
        /// overlap.</exception>
        public static void ConvertF32ToBF16(ReadOnlySpan<float> src, Span<ushort> dst)
        {
            Narrow(src, dst, true);
        }

        /// <summary>As <see cref="ConvertF32ToBF16(ReadOnlySpan{float}, Span{ushort})"/> into a
        /// new array.</summary>
        /// <exception cref="ArgumentNullException">src is null.</exception>
        public static ushort[] ConvertF32ToBF16(float[] src)
        {
            var dst = new ushort[NotNull(src, "src").Length];
            Narrow(src, dst, true);
            return dst;
        }

        /// <summary>The exact widening of f16 bit patterns to floats, as the kernels do it
        /// (attn_convert_f16_to_f32), into the first src.Length elements of
        /// <paramref name="dst"/>.</summary>
        /// <exception cref="ArgumentException">dst is shorter than src, or they
        /// overlap.</exception>
        public static void ConvertF16ToF32(ReadOnlySpan<ushort> src, Span<float> dst)
        {
            Widen(src, dst, false);
        }

        /// <summary>As <see cref="ConvertF16ToF32(ReadOnlySpan{ushort}, Span{float})"/> into a
        /// new array.</summary>
        /// <exception cref="ArgumentNullException">src is null.</exception>
        public static float[] ConvertF16ToF32(ushort[] src)
        {
            var dst = new float[NotNull(src, "src").Length];
            Widen(src, dst, false);
            return dst;
        }

        /// <summary>The exact widening of bf16 bit patterns to floats
        /// (attn_convert_bf16_to_f32).</summary>
        /// <exception cref="ArgumentException">dst is shorter than src, or they
        /// overlap.</exception>
        public static void ConvertBF16ToF32(ReadOnlySpan<ushort> src, Span<float> dst)
        {
            Widen(src, dst, true);
        }

        /// <summary>As <see cref="ConvertBF16ToF32(ReadOnlySpan{ushort}, Span{float})"/> into a
        /// new array.</summary>
        /// <exception cref="ArgumentNullException">src is null.</exception>
        public static float[] ConvertBF16ToF32(ushort[] src)
        {
            var dst = new float[NotNull(src, "src").Length];
            Widen(src, dst, true);
            return dst;
        }

        /// <summary>Symmetric int8 quantization (attn_quantize_i8) of <paramref name="rows"/>
        /// contiguous rows of <paramref name="dim"/> floats (a K or V cache's rows, e.g.
        /// [batch][heads_kv][seq_k] rows of head_dim): per row scale = max|x| / 127 and
        /// q = x / scale rounded to nearest even; an all-zero row gets scale 0 and q = 0.
        /// <paramref name="dst"/> receives rows * dim int8 values (the buffer for
        /// <see cref="AttentionArgs.Bind(Operand, sbyte[])"/>), <paramref name="scales"/> rows
        /// floats in the row order of src (the <see cref="Operand.KScale"/> /
        /// <see cref="Operand.VScale"/> operand).</summary>
        /// <exception cref="ArgumentOutOfRangeException">rows or dim is negative.</exception>
        /// <exception cref="ArgumentException">a span is shorter than rows * dim (scales: rows);
        /// or a row holds NaN or an infinity: the library's message names the row ("src row 2
        /// holds a non-finite value ..."; the rows before it are written); or the buffers
        /// overlap.</exception>
        public static unsafe void QuantizeI8(ReadOnlySpan<float> src, long rows, long dim,
                                             Span<sbyte> dst, Span<float> scales)
        {
            if (rows < 0)
                throw new ArgumentOutOfRangeException("rows", rows, "rows must be >= 0");
            if (dim < 0)
                throw new ArgumentOutOfRangeException("dim", dim, "dim must be >= 0");
            // rows, dim < 2^63 and every span shorter than 2^31: test the product without
            // overflow
            if (dim != 0 && rows > src.Length / dim)
                throw new ArgumentException(
                    "src has " + src.Length + " elements, needs at least rows (" + rows
                        + ") x dim (" + dim + ")", "src");
            long n = rows * dim;
            AttentionDesc.CheckLength(dst.Length, "dst", (ulong)n);
            AttentionDesc.CheckLength(scales.Length, "scales", (ulong)rows);
            fixed (float* s = &MemoryMarshal.GetReference(src))
            fixed (sbyte* d = &MemoryMarshal.GetReference(dst))
            fixed (float* sc = &MemoryMarshal.GetReference(scales))
                Errors.Check(AttnNative.attn_quantize_i8((IntPtr)s, (ulong)rows, (ulong)dim,
                                                         (IntPtr)d, (IntPtr)sc));
        }

        /// <summary>As <see cref="QuantizeI8(ReadOnlySpan{float}, long, long, Span{sbyte}, Span{float})"/>
        /// of all of <paramref name="src"/> (src.Length / dim rows) into new arrays: returns the
        /// int8 values, <paramref name="scales"/> receives one scale per row.</summary>
        /// <exception cref="ArgumentNullException">src is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException">dim is not positive.</exception>
        /// <exception cref="ArgumentException">src.Length is not a multiple of dim, or a row
        /// holds NaN or an infinity (the message names the row).</exception>
        public static sbyte[] QuantizeI8(float[] src, long dim, out float[] scales)
        {
            NotNull(src, "src");
            if (dim <= 0)
                throw new ArgumentOutOfRangeException("dim", dim, "dim must be > 0");
            if (src.Length % dim != 0)
                throw new ArgumentException(
                    "src has " + src.Length + " elements, not a whole number of rows of dim ("
                        + dim + ")", "src");
            long rows = src.Length / dim;
            var dst = new sbyte[src.Length];
            var s = new float[rows];
            QuantizeI8(src, rows, dim, dst, s);
            scales = s;
            return dst;
        }

        static unsafe void Narrow(ReadOnlySpan<float> src, Span<ushort> dst, bool bf16)
        {
            AttentionDesc.CheckLength(dst.Length, "dst", (ulong)src.Length);
            fixed (float* s = &MemoryMarshal.GetReference(src))
            fixed (ushort* d = &MemoryMarshal.GetReference(dst))
                Errors.Check(bf16 ? AttnNative.attn_convert_f32_to_bf16((IntPtr)s, (IntPtr)d,
                                                                        (ulong)src.Length)
                                  : AttnNative.attn_convert_f32_to_f16((IntPtr)s, (IntPtr)d,
                                                                       (ulong)src.Length));
        }

        static unsafe void Widen(ReadOnlySpan<ushort> src, Span<float> dst, bool bf16)
        {
            AttentionDesc.CheckLength(dst.Length, "dst", (ulong)src.Length);
            fixed (ushort* s = &MemoryMarshal.GetReference(src))
            fixed (float* d = &MemoryMarshal.GetReference(dst))
                Errors.Check(bf16 ? AttnNative.attn_convert_bf16_to_f32((IntPtr)s, (IntPtr)d,
                                                                        (ulong)src.Length)
                                  : AttnNative.attn_convert_f16_to_f32((IntPtr)s, (IntPtr)d,
                                                                       (ulong)src.Length));
        }

        static T[] NotNull<T>(T[] array, string name)
        {
            if (array == null)
                throw new ArgumentNullException(name, name + " must not be null");
            return array;
        }

        // Sizes first, then every input, before anything is allocated; returns n*d.
        static long CheckSimpleInputs(float[] q, float[] k, float[] v, int n, int d,
                                      bool[] padMask)
        {
            if (n <= 0)
                throw new ArgumentOutOfRangeException("n", n, "n (sequence length) must be > 0");
            if (d <= 0)
                throw new ArgumentOutOfRangeException("d", d, "d (vector size) must be > 0");
            long nd = (long)n * d; // < 2^62: no overflow
            CheckAtLeast(q, "q", nd);
            CheckAtLeast(k, "k", nd);
            CheckAtLeast(v, "v", nd);
            if (padMask != null)
                AttentionDesc.CheckLength(padMask.LongLength, "padMask", (ulong)n);
            return nd;
        }

        static void CheckAtLeast(float[] array, string name, long required)
        {
            if (array == null)
                throw new ArgumentNullException(name, name + " must not be null");
            AttentionDesc.CheckLength(array.LongLength, name, (ulong)required);
        }

        // At most 64 characters (as the library prints a name), NUL and control characters
        // escaped.
        static string Printable(string name)
        {
            var sb = new StringBuilder();
            foreach (char c in name.Length > 64 ? name.Substring(0, 64) : name)
            {
                if (c == '\0')
                    sb.Append("\\0");
                else if (c < 32)
                    sb.Append("\\x").Append(((int)c).ToString("x2", CultureInfo.InvariantCulture));
                else if (c > 127)
                    sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                else
                    sb.Append(c);
            }
            return sb.ToString();
        }
    }
}
