// libattn C# binding: the simple API and library-wide settings.
using System;

namespace LibAttn
{
    /// <summary>
    /// Exact masked scaled-dot-product attention (fp32, CPU). The one-sequence, one-head
    /// <see cref="Simple(float[], float[], float[], int, int, bool, bool[])"/> call, the
    /// library's version, kernel (ISA) and thread settings. For batches, heads, GQA, strides,
    /// masks, log-sum-exp and weights use <see cref="AttentionDesc"/>.
    /// All members may be called from any number of threads at once.
    /// </summary>
    public static class Attention
    {
        /// <summary>
        /// The original attention(Q, K, V, causal, pad_mask) for one sequence and one head, scale
        /// 1/sqrt(d).
        /// </summary>
        /// <param name="q">[n][d] queries, row-major: exactly n*d floats.</param>
        /// <param name="k">[n][d] keys: exactly n*d floats.</param>
        /// <param name="v">[n][d] values: exactly n*d floats.</param>
        /// <param name="n">Sequence length, &gt; 0.</param>
        /// <param name="d">Vector size, &gt; 0.</param>
        /// <param name="causal">true: query i sees keys j &lt;= i; false: no causal rule.</param>
        /// <param name="padMask">[n], true = real token, false = padding (never attended); null =
        /// no padding.</param>
        /// <returns>[n][d] outputs, row-major (n*d floats).</returns>
        /// <exception cref="ArgumentNullException">q, k or v is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException">n or d is not positive.</exception>
        /// <exception cref="ArgumentException">an array's length is not n*d (padMask: n).</exception>
        /// <exception cref="AttentionException">the library refused (status and its message).</exception>
        public static float[] Simple(float[] q, float[] k, float[] v, int n, int d, bool causal,
                                     bool[] padMask = null)
        {
            CheckSimpleSizes(n, d);
            float[] output = new float[(long)n * d];
            Simple(q, k, v, n, d, causal, padMask, output);
            return output;
        }

        /// <summary>
        /// As <see cref="Simple(float[], float[], float[], int, int, bool, bool[])"/>, writing
        /// the [n][d] result into <paramref name="output"/> (exactly n*d floats; it must be a
        /// different array from the inputs) without allocating.
        /// </summary>
        public static void Simple(float[] q, float[] k, float[] v, int n, int d, bool causal,
                                  bool[] padMask, float[] output)
        {
            CheckSimpleSizes(n, d);
            long nd = (long)n * d;
            CheckExact(q, "q", nd, "n*d");
            CheckExact(k, "k", nd, "n*d");
            CheckExact(v, "v", nd, "n*d");
            if (padMask != null && padMask.LongLength != n)
                throw new ArgumentException(
                    "padMask has " + padMask.LongLength + " elements but must have exactly n = " + n,
                    "padMask");
            CheckExact(output, "output", nd, "n*d");
            Status status = AttnNative.attn_simple(q, k, v, (ulong)n, (ulong)d, causal, padMask,
                                                   output);
            if (status != Status.Ok)
                throw AttentionException.FromLastError(status);
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

        /// <summary>Name of the kernel in use: "scalar", "sse2", "avx2" or "avx512".</summary>
        public static string Isa
        {
            get { return AttnNative.attn_isa(); }
        }

        /// <summary>Cap the kernel (process-wide) at <paramref name="name"/>, or restore the default
        /// with null or "".</summary>
        /// <exception cref="AttentionException">unknown name (InvalidArgument), or this CPU or
        /// build lacks it (Unsupported).</exception>
        public static void SetIsa(string name)
        {
            Status status = AttnNative.attn_set_isa(name);
            if (status != Status.Ok)
                throw AttentionException.FromLastError(status);
        }

        /// <summary>Threads attention calls use (the caller counts as one). Setting 0 restores the
        /// default (ATTN_NUM_THREADS or the hardware thread count).</summary>
        /// <exception cref="ArgumentOutOfRangeException">set to a negative value.</exception>
        /// <exception cref="AttentionException">set above the library's maximum.</exception>
        public static int NumThreads
        {
            get { return (int)AttnNative.attn_get_num_threads(); }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value,
                                                          "NumThreads must be >= 0");
                Status status = AttnNative.attn_set_num_threads((ulong)value);
                if (status != Status.Ok)
                    throw AttentionException.FromLastError(status);
            }
        }

        static void CheckSimpleSizes(int n, int d)
        {
            if (n <= 0)
                throw new ArgumentOutOfRangeException("n", n, "n (sequence length) must be > 0");
            if (d <= 0)
                throw new ArgumentOutOfRangeException("d", d, "d (vector size) must be > 0");
        }

        static void CheckExact(float[] array, string name, long expected, string what)
        {
            if (array == null)
                throw new ArgumentNullException(name, name + " must not be null");
            if (array.LongLength != expected)
                throw new ArgumentException(name + " has " + array.LongLength
                                                + " elements but must have exactly " + what + " = "
                                                + expected,
                                            name);
        }
    }
}
