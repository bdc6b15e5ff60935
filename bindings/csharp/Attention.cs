// libattn C# binding: the simple API, library-wide settings and the storage conversions.
using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Globalization;
using System.Runtime.InteropServices;
using System.Text;

namespace LibAttn
{
    /// <summary>
    /// The one-sequence, one-head <see cref="Simple(float[], float[], float[], int, int, bool, bool[])"/>
    /// call, the library's version, ISA and thread settings, and the conversions that fill 16-bit
    /// and int8 caches. Batches, heads and everything else: <see cref="AttentionDesc"/>. Every
    /// member may be called from any number of threads at once.
    /// </summary>
    public static class Attention
    {
        // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
        static Attention()
        {
            NativeLoader.Preload();
        }

        /// <summary>attn_simple: attention over one [n][d] sequence and head, scale 1/sqrt(d),
        /// into a new [n][d] array; padMask [n] (true = real token) may be null.</summary>
        public static float[] Simple(float[] q, float[] k, float[] v, int n, int d, bool causal,
                                     bool[] padMask = null)
        {
            float[] output = new float[CheckSimple(q, k, v, n, d, padMask)];
            Errors.Check(AttnNative.attn_simple(q, k, v, (ulong)n, (ulong)d, causal, padMask,
                                                output));
            return output;
        }

        /// <summary>attn_simple into the first n*d floats of <paramref name="output"/>.</summary>
        public static void Simple(float[] q, float[] k, float[] v, int n, int d, bool causal,
                                  bool[] padMask, float[] output)
        {
            Errors.Length(Errors.NotNull(output, "output").LongLength, "output",
                          (ulong)CheckSimple(q, k, v, n, d, padMask));
            Errors.Check(AttnNative.attn_simple(q, k, v, (ulong)n, (ulong)d, causal, padMask,
                                                output));
        }

        // attn_simple is given no lengths: they are checked here, before anything is allocated.
        static long CheckSimple(float[] q, float[] k, float[] v, int n, int d, bool[] padMask)
        {
            Errors.InRange(n, "n", n > 0, "must be > 0");
            Errors.InRange(d, "d", d > 0, "must be > 0");
            long nd = (long)n * d;
            Errors.Length(Errors.NotNull(q, "q").LongLength, "q", (ulong)nd);
            Errors.Length(Errors.NotNull(k, "k").LongLength, "k", (ulong)nd);
            Errors.Length(Errors.NotNull(v, "v").LongLength, "v", (ulong)nd);
            if (padMask != null)
                Errors.Length(padMask.LongLength, "padMask", (ulong)n);
            return nd;
        }

        /// <summary>attn_version_string: "MAJOR.MINOR.PATCH".</summary>
        public static string Version => AttnNative.attn_version_string();

        /// <summary>attn_version_number: MAJOR*10000 + MINOR*100 + PATCH.</summary>
        public static int VersionNumber => (int)AttnNative.attn_version_number();

        /// <summary>attn_status_string: a short description of a status.</summary>
        public static string StatusString(Status status) =>
            AttnNative.attn_status_string((attn_status)status);

        /// <summary>attn_isa: the name of the kernel in use.</summary>
        public static string Isa => AttnNative.attn_isa();

        /// <summary>attn_compute_unit: the unit compute mode <paramref name="mode"/> runs its
        /// products on with the kernel in use, e.g. "int16 vpmaddwd (avx2)"; a mode that runs as
        /// <see cref="LibAttn.Compute.Exact"/> on this CPU names Exact's unit. A value that is not
        /// an attn_compute (the library's NULL) throws ArgumentOutOfRangeException.</summary>
        public static string ComputeUnit(Compute mode)
        {
            string unit = AttnNative.attn_compute_unit((int)mode);
            if (unit == null)
                throw new ArgumentOutOfRangeException("mode", mode,
                    "mode (" + (int)mode + ") is not an attn_compute");
            return unit;
        }

        /// <summary>attn_set_isa: caps the kernel at <paramref name="name"/>; null or "" restores
        /// the default.</summary>
        public static void SetIsa(string name)
        {
            // C would read "avx2\0junk" as "avx2": such a name reaches it escaped, so the refusal
            // (and its list of names) is the library's.
            if (name != null && (name.IndexOf('\0') >= 0 || Encoding.UTF8.GetByteCount(name) != name.Length))
                name = Printable(name);
            Errors.Check(AttnNative.attn_set_isa(name));
        }

        static string Printable(string name)
        {
            var sb = new StringBuilder();
            foreach (char c in name.Length > 64 ? name.Substring(0, 64) : name)
                sb.Append(c == '\0' ? "\\0" : c < 32 ? "\\x" + ((int)c).ToString("x2", CultureInfo.InvariantCulture)
                          : c > 127 ? "\\u" + ((int)c).ToString("x4", CultureInfo.InvariantCulture)
                          : c.ToString());
            return sb.ToString();
        }

        /// <summary>attn_param_bounds: kind and closed range of a parameter.</summary>
        public static ParamBounds Bounds(Param param)
        {
            int isFloat;
            double min, max;
            Errors.Check(AttnNative.attn_param_bounds((attn_param)param, out isFloat, out min,
                                                      out max), "param", true);
            return new ParamBounds(param, isFloat != 0, min, max);
        }

        // ---- the library's own tables (capi/attn.h "Introspection"), read through its queries.

        /// <summary>attn_isa_info: every ISA the library knows, in its order (weakest first), each
        /// with whether this CPU and build run it (then <see cref="SetIsa"/> accepts its
        /// name).</summary>
        public static IReadOnlyList<IsaInfo> Isas => IsaTable.All;

        // Read once: the CPU and the build do not change while the process runs.
        static class IsaTable
        {
            internal static readonly ReadOnlyCollection<IsaInfo> All = Read();

            static ReadOnlyCollection<IsaInfo> Read()
            {
                var r = new List<IsaInfo>();
                for (int i = 0; ; i++) // until the library says the index is past the last
                {
                    IntPtr name;
                    int supported;
                    attn_status st = AttnNative.attn_isa_info(i, out name, out supported);
                    if (st == attn_status.ATTN_ERR_INVALID_ARGUMENT && i > 0)
                        return r.AsReadOnly();
                    Errors.Check(st);
                    r.Add(new IsaInfo { Name = Marshal.PtrToStringAnsi(name),
                                        Supported = supported != 0 });
                }
            }
        }

        /// <summary>attn_param_info: name, kind, closed range and default of a parameter; an
        /// unknown <paramref name="param"/> throws the library's
        /// <see cref="ArgumentOutOfRangeException"/>.</summary>
        public static ParamInfo Info(Param param)
        {
            IntPtr name;
            int isFloat;
            double min, max, dflt;
            Errors.Check(AttnNative.attn_param_info((attn_param)param, out name, out isFloat,
                                                    out min, out max, out dflt), "param", true);
            return new ParamInfo { Param = param, Name = Marshal.PtrToStringAnsi(name),
                                   IsFloat = isFloat != 0, Min = min, Max = max, Default = dflt };
        }

        /// <summary>attn_operand_info and attn_operand_dims: name, element types as an input
        /// and as an output, rank, strides and dimension names of an operand; an unknown
        /// <paramref name="which"/> throws the library's
        /// <see cref="ArgumentOutOfRangeException"/>.</summary>
        public static OperandInfo Info(Operand which)
        {
            IntPtr name, dims;
            uint inTypes, outTypes;
            int rank, strided;
            Errors.Check(AttnNative.attn_operand_info((attn_operand)which, out name, out inTypes,
                                                      out outTypes, out rank, out strided),
                         "which", true);
            Errors.Check(AttnNative.attn_operand_dims((attn_operand)which, out dims), "which",
                         true);
            return new OperandInfo { Operand = which, Name = Marshal.PtrToStringAnsi(name),
                                     InputTypes = Types(inTypes), OutputTypes = Types(outTypes),
                                     Rank = rank, Strided = strided != 0,
                                     Dims = Array.AsReadOnly(
                                         Marshal.PtrToStringAnsi(dims).Split(' ')) };
        }

        // A bit set (1u << attn_dtype) as a set of Dtype.
        static ISet<Dtype> Types(uint bits)
        {
            var r = new HashSet<Dtype>();
            foreach (Dtype t in Enum.GetValues(typeof(Dtype)))
                if ((bits & (1u << (int)t)) != 0)
                    r.Add(t);
            return r;
        }

        /// <summary>attn_get_num_threads / attn_set_num_threads (0 restores the
        /// default).</summary>
        public static int NumThreads
        {
            get { return (int)AttnNative.attn_get_num_threads(); }
            set
            {
                Errors.Check(AttnNative.attn_set_num_threads(
                    (ulong)Errors.InRange(value, "value", value >= 0, "must be >= 0")));
            }
        }

        // ---- storage types: spans pinned for the call, no copy. The C calls are given one
        // length (src's), so dst's (and scales') are checked here.

        /// <summary>attn_convert_f32_to_f16 of src into the first src.Length elements of
        /// dst.</summary>
        public static void ConvertF32ToF16(ReadOnlySpan<float> src, Span<ushort> dst) =>
            Convert(src, dst, 0);

        /// <summary>attn_convert_f32_to_f16 into a new array.</summary>
        public static ushort[] ConvertF32ToF16(float[] src) => Converted<float, ushort>(src, 0);

        /// <summary>attn_convert_f32_to_bf16 of src into dst.</summary>
        public static void ConvertF32ToBF16(ReadOnlySpan<float> src, Span<ushort> dst) =>
            Convert(src, dst, 1);

        /// <summary>attn_convert_f32_to_bf16 into a new array.</summary>
        public static ushort[] ConvertF32ToBF16(float[] src) => Converted<float, ushort>(src, 1);

        /// <summary>attn_convert_f16_to_f32 of src into dst.</summary>
        public static void ConvertF16ToF32(ReadOnlySpan<ushort> src, Span<float> dst) =>
            Convert(src, dst, 2);

        /// <summary>attn_convert_f16_to_f32 into a new array.</summary>
        public static float[] ConvertF16ToF32(ushort[] src) => Converted<ushort, float>(src, 2);

        /// <summary>attn_convert_bf16_to_f32 of src into dst.</summary>
        public static void ConvertBF16ToF32(ReadOnlySpan<ushort> src, Span<float> dst) =>
            Convert(src, dst, 3);

        /// <summary>attn_convert_bf16_to_f32 into a new array.</summary>
        public static float[] ConvertBF16ToF32(ushort[] src) => Converted<ushort, float>(src, 3);

        static TD[] Converted<TS, TD>(TS[] src, int how) where TS : struct where TD : struct
        {
            var dst = new TD[Errors.NotNull(src, "src").Length];
            Convert<TS, TD>(src, dst, how);
            return dst;
        }

        static unsafe void Convert<TS, TD>(ReadOnlySpan<TS> src, Span<TD> dst, int how)
            where TS : struct where TD : struct
        {
            Errors.Length(dst.Length, "dst", (ulong)src.Length);
            fixed (byte* s = &MemoryMarshal.GetReference(MemoryMarshal.AsBytes(src)))
            fixed (byte* d = &MemoryMarshal.GetReference(MemoryMarshal.AsBytes(dst)))
            {
                IntPtr ps = (IntPtr)s, pd = (IntPtr)d;
                ulong n = (ulong)src.Length;
                Errors.Check(how == 0 ? AttnNative.attn_convert_f32_to_f16(ps, pd, n)
                             : how == 1 ? AttnNative.attn_convert_f32_to_bf16(ps, pd, n)
                             : how == 2 ? AttnNative.attn_convert_f16_to_f32(ps, pd, n)
                                        : AttnNative.attn_convert_bf16_to_f32(ps, pd, n));
            }
        }

        /// <summary>attn_quantize_i8 of <paramref name="rows"/> rows of <paramref name="dim"/>
        /// floats into rows * dim int8 values and rows scales.</summary>
        public static unsafe void QuantizeI8(ReadOnlySpan<float> src, long rows, long dim,
                                             Span<sbyte> dst, Span<float> scales)
        {
            Errors.InRange(rows, "rows", rows >= 0, "must be >= 0");
            Errors.InRange(dim, "dim", dim >= 0, "must be >= 0");
            if (dim != 0 && rows > src.Length / dim) // the product, without overflow
                throw new ArgumentException("src has " + src.Length + " elements, needs at least rows ("
                                            + rows + ") x dim (" + dim + ")", "src");
            Errors.Length(dst.Length, "dst", (ulong)(rows * dim));
            Errors.Length(scales.Length, "scales", (ulong)rows);
            fixed (float* s = &MemoryMarshal.GetReference(src))
            fixed (sbyte* d = &MemoryMarshal.GetReference(dst))
            fixed (float* sc = &MemoryMarshal.GetReference(scales))
                Errors.Check(AttnNative.attn_quantize_i8((IntPtr)s, (ulong)rows, (ulong)dim,
                                                         (IntPtr)d, (IntPtr)sc));
        }

        /// <summary>attn_quantize_fp8 of <paramref name="rows"/> rows of <paramref name="dim"/>
        /// floats into rows * dim codes of <paramref name="format"/> (<see cref="Dtype.Fp8E4m3"/> or
        /// <see cref="Dtype.Fp8E5m2"/>) with one scale: x / scale rounded to nearest even,
        /// saturating.</summary>
        public static void QuantizeFp8(ReadOnlySpan<float> src, long rows, long dim, Dtype format,
                                       float scale, Span<byte> dst) =>
            Fp8(MemoryMarshal.AsBytes(src), src.Length, rows, dim, format, scale,
                MemoryMarshal.AsBytes(dst), dst.Length, false);

        /// <summary>attn_quantize_fp8 of all of src (one row) into a new array.</summary>
        public static byte[] QuantizeFp8(float[] src, Dtype format, float scale)
        {
            var dst = new byte[Errors.NotNull(src, "src").Length];
            QuantizeFp8(src, 1, src.Length, format, scale, dst);
            return dst;
        }

        /// <summary>attn_dequantize_fp8: the exact values of rows * dim codes of
        /// <paramref name="format"/> times scale, as the kernels read them.</summary>
        public static void DequantizeFp8(ReadOnlySpan<byte> src, long rows, long dim, Dtype format,
                                         float scale, Span<float> dst) =>
            Fp8(src, src.Length, rows, dim, format, scale, MemoryMarshal.AsBytes(dst), dst.Length, true);

        /// <summary>attn_dequantize_fp8 of all of src (one row) into a new array.</summary>
        public static float[] DequantizeFp8(byte[] src, Dtype format, float scale)
        {
            var dst = new float[Errors.NotNull(src, "src").Length];
            DequantizeFp8(src, 1, src.Length, format, scale, dst);
            return dst;
        }

        // Checks rows, dim and both lengths (in elements; the C calls take none), then
        // attn_quantize_fp8 or (widen) attn_dequantize_fp8. An empty span's `fixed` gives NULL,
        // which the library reads as a missing argument: an empty one passes a dummy address.
        static unsafe void Fp8(ReadOnlySpan<byte> src, int srcLen, long rows, long dim, Dtype format,
                               float scale, Span<byte> dst, int dstLen, bool widen)
        {
            Errors.InRange(rows, "rows", rows >= 0, "must be >= 0");
            Errors.InRange(dim, "dim", dim >= 0, "must be >= 0");
            if (dim != 0 && rows > srcLen / dim) // the product, without overflow
                throw new ArgumentException("src has " + srcLen + " elements, needs at least rows ("
                                            + rows + ") x dim (" + dim + ")", "src");
            Errors.Length(dstLen, "dst", (ulong)(rows * dim));
            fixed (byte* s = &MemoryMarshal.GetReference(src))
            fixed (byte* d = &MemoryMarshal.GetReference(dst))
            {
                IntPtr ps = s == null ? EmptyFp8 : (IntPtr)s, pd = d == null ? EmptyFp8 : (IntPtr)d;
                Errors.Check(widen ? AttnNative.attn_dequantize_fp8(ps, (ulong)rows, (ulong)dim, (attn_dtype)format, scale, pd)
                                   : AttnNative.attn_quantize_fp8(ps, (ulong)rows, (ulong)dim, (attn_dtype)format, scale, pd));
            }
        }

        static readonly IntPtr EmptyFp8 = Marshal.AllocHGlobal(8);

        /// <summary>attn_quantize_i8 of all of src (src.Length / dim rows) into new arrays; the
        /// scales go to <paramref name="scales"/>.</summary>
        public static sbyte[] QuantizeI8(float[] src, long dim, out float[] scales)
        {
            Errors.InRange(dim, "dim", dim > 0, "must be > 0");
            if (Errors.NotNull(src, "src").Length % dim != 0)
                throw new ArgumentException("src has " + src.Length
                                            + " elements, not a whole number of rows of dim (" + dim + ")", "src");
            var dst = new sbyte[src.Length];
            scales = new float[src.Length / dim];
            QuantizeI8(src, src.Length / dim, dim, dst, scales);
            return dst;
        }
    }

    /// <summary>Kind and closed range of a <see cref="Param"/> (attn_param_bounds).</summary>
    public struct ParamBounds
    {
        /// <summary>The parameter these bounds describe.</summary>
        public Param Param { get; }
        /// <summary>True for a float parameter, false for an integer one.</summary>
        public bool IsFloat { get; }
        /// <summary>The smallest accepted value.</summary>
        public double Min { get; }
        /// <summary>The largest accepted value.</summary>
        public double Max { get; }

        internal ParamBounds(Param param, bool isFloat, double min, double max)
        {
            Param = param;
            IsFloat = isFloat;
            Min = min;
            Max = max;
        }

        /// <summary>True when <paramref name="value"/> is in [Min, Max] (and integral for an
        /// integer parameter).</summary>
        public bool Accepts(double value) =>
            value >= Min && value <= Max && (IsFloat || value == Math.Floor(value));

        /// <summary>"Param int|float [Min, Max]".</summary>
        public override string ToString() =>
            string.Format(CultureInfo.InvariantCulture, "{0} {1} [{2:R}, {3:R}]", Param,
                          IsFloat ? "float" : "int", Min, Max);
    }

    /// <summary>One ISA the library knows (attn_isa_info).</summary>
    public struct IsaInfo
    {
        /// <summary>Its name, as <see cref="Attention.SetIsa"/> and ATTN_ISA take it.</summary>
        public string Name { get; internal set; }
        /// <summary>True when this CPU and build run it.</summary>
        public bool Supported { get; internal set; }

        /// <summary>"Name" or "Name (unsupported)".</summary>
        public override string ToString() => Supported ? Name : Name + " (unsupported)";
    }

    /// <summary>A <see cref="Param"/> as the library's parameter table gives it
    /// (attn_param_info).</summary>
    public struct ParamInfo
    {
        /// <summary>The parameter described.</summary>
        public Param Param { get; internal set; }
        /// <summary>Its name in the library's messages ("causal", "window_left").</summary>
        public string Name { get; internal set; }
        /// <summary>True for a float parameter, false for an integer one.</summary>
        public bool IsFloat { get; internal set; }
        /// <summary>The smallest accepted value.</summary>
        public double Min { get; internal set; }
        /// <summary>The largest accepted value.</summary>
        public double Max { get; internal set; }
        /// <summary>Its value in a new descriptor; NaN where it follows the shape (Scale:
        /// 1/sqrt(head_dim); HeadDimV: head_dim).</summary>
        public double Default { get; internal set; }

        /// <summary>"name int|float [Min, Max] default D".</summary>
        public override string ToString() =>
            string.Format(CultureInfo.InvariantCulture, "{0} {1} [{2:R}, {3:R}] default {4:R}",
                          Name, IsFloat ? "float" : "int", Min, Max, Default);
    }

    /// <summary>An <see cref="Operand"/> as the library's operand table gives it
    /// (attn_operand_info).</summary>
    public struct OperandInfo
    {
        /// <summary>The operand described.</summary>
        public Operand Operand { get; internal set; }
        /// <summary>Its name in the library's messages ("q", "k_scale").</summary>
        public string Name { get; internal set; }
        /// <summary>The element types it may be bound with as an input (empty: never an
        /// input).</summary>
        public ISet<Dtype> InputTypes { get; internal set; }
        /// <summary>The element types it may be bound with as an output (empty: never an
        /// output; for K and V the caches
        /// <see cref="AttentionDesc.KvAppend(AttentionArgs, float[], float[])"/> writes).</summary>
        public ISet<Dtype> OutputTypes { get; internal set; }
        /// <summary>Dimensions of its dense shape (Q 4, Lse 3, KeyValid 2, Sinks 1).</summary>
        public int Rank { get; internal set; }
        /// <summary>True when <see cref="AttentionDesc.Builder.Strides"/> accepts it.</summary>
        public bool Strided { get; internal set; }
        /// <summary>The names of the dimensions of its dense shape, outermost first, as attn.h
        /// writes them (attn_operand_dims; Q: batch, heads_q, seq_q, head_dim); <see cref="Rank"/>
        /// of them.</summary>
        public IReadOnlyList<string> Dims { get; internal set; }

        /// <summary>"name rank R in {..} out {..}".</summary>
        public override string ToString() =>
            Name + " rank " + Rank + " in {" + string.Join(", ", InputTypes) + "} out {"
            + string.Join(", ", OutputTypes) + "}" + (Strided ? " strided" : "");
    }
}
