// libattn C# binding: the descriptor API (batches, heads, GQA, causal modes, strides, masks, and
// the 0.2 parameters: window, softcap, ALiBi, "+1" softmax, head_dim_v, weights mode, bias order,
// and the serving layouts: varlen packs, paged K/V caches, KvAppend, Merge, batch invariance;
// the forward's arithmetic, Compute).
using System;
using System.Buffers;
using System.Collections.Generic;
using System.Globalization;
using System.Threading;

[assembly: System.Runtime.CompilerServices.InternalsVisibleTo("LibAttn.Tests")]

namespace LibAttn
{
    /// <summary>
    /// An immutable attention problem: sizes, static parameters (<see cref="Param"/>) and
    /// strides, built with <see cref="Builder"/>. Element (b, h, s, d) of Q/K/V/OUT sits at
    /// b*batchStride + h*headStride + s*rowStride + d (default: contiguous
    /// [batch][heads][seq][head_dim]).
    /// <para>Two ways to call it: the 0.1 methods
    /// <see cref="Forward(float[], float[], float[], bool[], bool[], float[], float[])"/> and
    /// <see cref="Weights(float[], float[], bool[], bool[], float[])"/>, and the extensible
    /// <see cref="Run(Op, AttentionArgs)"/> that takes every operand (bias, ALiBi slopes, sinks,
    /// query padding, per-batch key lengths, key mass) bound in an
    /// <see cref="AttentionArgs"/>.</para>
    /// <para>Serving layouts (<see cref="Builder.Varlen"/>, <see cref="Builder.PageSize"/>):
    /// packed variable-length batches placed by <see cref="Operand.CuSeqlensQ"/> /
    /// <see cref="Operand.CuSeqlensK"/>, paged K/V caches addressed through
    /// <see cref="Operand.BlockTable"/>, <see cref="KvAppend(AttentionArgs, float[], float[])"/>
    /// to write new key/value rows into their cache positions and
    /// <see cref="Merge(AttentionArgs, AttentionArgs)"/> to combine results computed over
    /// disjoint key sets.</para>
    /// <para>Thread safety: one descriptor may be used by any number of threads at once.
    /// <see cref="Dispose"/> may be called while other threads are inside a call: those calls
    /// finish normally and the native descriptor is freed after the last of them; every call that
    /// starts after Dispose throws <see cref="ObjectDisposedException"/>.</para>
    /// <para>Arrays are pinned for the duration of the call and passed to the library without a
    /// copy. Every array is checked against <see cref="RequiredLen"/> before the call: a shorter
    /// array (an empty one included) is an <see cref="ArgumentException"/>, never an overrun; a
    /// longer one is allowed (elements past the required length are neither read nor written).
    /// null means "not given" for an optional array and is an
    /// <see cref="ArgumentNullException"/> for a required one.</para>
    /// </summary>
    public sealed class AttentionDesc : IDisposable
    {
        // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
        static AttentionDesc()
        {
            NativeLoader.Preload();
        }

        internal const int OperandCount = 29; // Operand.Q .. Operand.NewVScale
        // The largest float[] .NET allocates (Array.MaxLength).
        internal const long MaxArrayLength = 0x7FFFFFC7;

        readonly AttnDescHandle handle;
        int disposed; // set once by Dispose (see Handles.Acquire)
        // attn_desc_required_len for every operand, read once when built: the descriptor can no
        // longer change (the builder applies all configuration before handing it out). In varlen
        // mode Q/Out/Lse (and K/V without pages) are upper bounds for batch * seq tokens;
        // AttentionArgs derives each call's lengths from its cu_seqlens (PackNeed).
        internal readonly ulong[] requiredLen;
        // Row (token) stride of Q, K, V, Out, KScale, VScale (PackOperands), as the library lays
        // them out in varlen mode: the builder's, else the token-major default heads * dim (dim 1
        // for the int8 scales).
        static readonly int[] PackOperands = { (int)Operand.Q, (int)Operand.K, (int)Operand.V,
                                               (int)Operand.Out, (int)Operand.KScale,
                                               (int)Operand.VScale };
        readonly long[] packRow = new long[OperandCount];

        /// <summary>Number of sequences in the batch.</summary>
        public long Batch { get; }
        /// <summary>Number of query heads.</summary>
        public long HeadsQ { get; }
        /// <summary>Number of key/value heads (divides <see cref="HeadsQ"/>: GQA, MQA).</summary>
        public long HeadsKv { get; }
        /// <summary>Query sequence length.</summary>
        public long SeqQ { get; }
        /// <summary>Key/value sequence length.</summary>
        public long SeqK { get; }
        /// <summary>Size of each query and key vector (V rows: <see cref="HeadDimV"/>).</summary>
        public long HeadDim { get; }

        // The parameters, read back from the library when built (attn_desc_get_int/_float).
        /// <summary>The causal rule (<see cref="Param.Causal"/>).</summary>
        public Causal Causal { get; }
        /// <summary>The score scale: exactly the float the kernels multiply q.k by (default
        /// 1/sqrt(headDim) as the library rounds it).</summary>
        public float Scale { get; }
        /// <summary>Sliding window, keys before the diagonal (-1 = unbounded).</summary>
        public long WindowLeft { get; }
        /// <summary>Sliding window, keys after the diagonal (-1 = unbounded).</summary>
        public long WindowRight { get; }
        /// <summary>Logit softcap (0 = off).</summary>
        public float Softcap { get; }
        /// <summary>Where the ALiBi slopes come from (None = no ALiBi).</summary>
        public Alibi Alibi { get; }
        /// <summary>True for the "+1" quiet softmax.</summary>
        public bool SoftmaxPlusOne { get; }
        /// <summary>Size of a V and an OUT row (default HeadDim).</summary>
        public long HeadDimV { get; }
        /// <summary>What <see cref="Op.Weights"/> writes.</summary>
        public WeightsMode WeightsMode { get; }
        /// <summary>True when the bias is added before the softcap (ONNX's order).</summary>
        public bool BiasFirst { get; }
        /// <summary>True for a packed variable-length batch (<see cref="Param.Varlen"/>): SeqQ
        /// and SeqK are then the maximum lengths.</summary>
        public bool Varlen { get; }
        /// <summary>Tokens per page of a paged K/V cache; 0 = contiguous K/V.</summary>
        public long PageSize { get; }
        /// <summary>The <see cref="Param.MaxPages"/> value (0 = the default
        /// ceil(SeqK / PageSize)); the block table holds
        /// <c>RequiredLen(Operand.BlockTable)</c> = Batch x max_pages entries.</summary>
        public long MaxPages { get; }
        /// <summary>True when the results are batch invariant
        /// (<see cref="Param.BatchInvariant"/>).</summary>
        public bool BatchInvariant { get; }
        /// <summary>The arithmetic of <see cref="Op.Forward"/>
        /// (<see cref="Param.Compute"/>).</summary>
        public Compute Compute { get; }
        /// <summary>The diagonal the sliding window and ALiBi measure from
        /// (<see cref="Param.Diagonal"/>).</summary>
        public Diagonal Diagonal { get; }
        /// <summary>The ALiBi term's form (<see cref="Param.AlibiForm"/>).</summary>
        public AlibiForm AlibiForm { get; }

        AttentionDesc(AttnDescHandle handle, Builder b)
        {
            this.handle = handle;
            Batch = b.batch;
            HeadsQ = b.headsQ;
            HeadsKv = b.headsKv;
            SeqQ = b.seqQ;
            SeqK = b.seqK;
            HeadDim = b.headDim;
            IntPtr desc = handle.DangerousGetHandle();
            requiredLen = new ulong[OperandCount];
            for (int i = 0; i < OperandCount; i++)
            {
                requiredLen[i] = AttnNative.attn_desc_required_len(desc, (Operand)i);
                // 0 only for the block table of a descriptor without pages
                if (requiredLen[i] == 0 && i != (int)Operand.BlockTable)
                    throw Errors.FromLastError(Status.Internal);
            }
            Causal = (Causal)ReadInt(desc, Param.Causal);
            Scale = (float)ReadDouble(desc, Param.Scale);
            WindowLeft = ReadInt(desc, Param.WindowLeft);
            WindowRight = ReadInt(desc, Param.WindowRight);
            Softcap = (float)ReadDouble(desc, Param.Softcap);
            Alibi = (Alibi)ReadInt(desc, Param.Alibi);
            SoftmaxPlusOne = ReadInt(desc, Param.SoftmaxPlusOne) != 0;
            HeadDimV = ReadInt(desc, Param.HeadDimV);
            WeightsMode = (WeightsMode)ReadInt(desc, Param.WeightsMode);
            BiasFirst = ReadInt(desc, Param.BiasFirst) != 0;
            Varlen = ReadInt(desc, Param.Varlen) != 0;
            PageSize = ReadInt(desc, Param.PageSize);
            MaxPages = ReadInt(desc, Param.MaxPages);
            BatchInvariant = ReadInt(desc, Param.BatchInvariant) != 0;
            Compute = (Compute)ReadInt(desc, Param.Compute);
            Diagonal = (Diagonal)ReadInt(desc, Param.Diagonal);
            AlibiForm = (AlibiForm)ReadInt(desc, Param.AlibiForm);
            foreach (int w in PackOperands)
            {
                bool isQ = w == (int)Operand.Q || w == (int)Operand.Out;
                long dim = w == (int)Operand.V || w == (int)Operand.Out ? HeadDimV
                           : w == (int)Operand.KScale || w == (int)Operand.VScale ? 1 : HeadDim;
                packRow[w] = b.strides[w] != null ? b.strides[w][2]
                                                  : (isQ ? HeadsQ : HeadsKv) * dim;
            }
        }

        // Elements Q, K, V, Out, KScale or VScale (w) spans in a varlen pack of `tokens` tokens:
        // the required length for Batch * seq tokens less the rows not used.
        internal ulong PackNeed(int w, long tokens)
        {
            if (tokens == 0)
                return 0;
            bool isQ = w == (int)Operand.Q || w == (int)Operand.Out;
            long all = Batch * (isQ ? SeqQ : SeqK);
            return requiredLen[w] - (ulong)(all - tokens) * (ulong)packRow[w];
        }

        /// <summary>A new builder (same as <c>new AttentionDesc.Builder()</c>).</summary>
        public static Builder CreateBuilder()
        {
            return new Builder();
        }

        /// <summary>True once <see cref="Dispose"/> has been called.</summary>
        public bool IsDisposed
        {
            get { return Volatile.Read(ref disposed) != 0; }
        }

        // True once the native descriptor has been freed (tests: Dispose under traffic).
        internal bool NativeReleased
        {
            get { return handle.IsClosed; }
        }

        /// <summary>Number of elements (floats, mask bytes/bools or ints) the array for
        /// <paramref name="which"/> must hold, from the sizes, head_dim_v and strides
        /// (attn_desc_required_len).</summary>
        /// <exception cref="ArgumentOutOfRangeException">which is not an Operand value.</exception>
        /// <exception cref="ObjectDisposedException">the descriptor was disposed.</exception>
        public ulong RequiredLen(Operand which)
        {
            Acquire();
            try
            {
                return requiredLen[OperandIndex(which, "which")];
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>Any parameter's current value as an integer (float parameters rounded toward
        /// zero), read from the library (attn_desc_get_int).</summary>
        /// <exception cref="ArgumentOutOfRangeException">param is not a Param value.</exception>
        public long GetInt(Param param)
        {
            IntPtr desc = Acquire();
            try
            {
                Attention.Bounds(param); // names an unknown value before the C call
                return ReadInt(desc, param);
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>Any parameter's current value as a double (exact for every parameter), read
        /// from the library (attn_desc_get_float).</summary>
        /// <exception cref="ArgumentOutOfRangeException">param is not a Param value.</exception>
        public double GetDouble(Param param)
        {
            IntPtr desc = Acquire();
            try
            {
                Attention.Bounds(param);
                return ReadDouble(desc, param);
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        static long ReadInt(IntPtr desc, Param param)
        {
            long value;
            Errors.Check(AttnNative.attn_desc_get_int(desc, (attn_param)param, out value));
            return value;
        }

        static double ReadDouble(IntPtr desc, Param param)
        {
            double value;
            Errors.Check(AttnNative.attn_desc_get_float(desc, (attn_param)param, out value));
            return value;
        }

        /// <summary>
        /// The extensible call (attn_run): runs <paramref name="op"/> with this descriptor's
        /// parameters on the operands bound in <paramref name="args"/>. The arrays are pinned for
        /// this call only and passed without a copy.
        /// </summary>
        /// <param name="op"><see cref="Op.Forward"/> (reads Q, K, V; writes Out, optional Lse
        /// and KeyMass), <see cref="Op.Weights"/> (reads Q, K; writes Weights) or
        /// <see cref="Op.Backward"/> (reads fp32 Q, K, V, the forward's Out and Lse and DOut;
        /// writes any of DQ, DK, DV, DBias, DSinks). Operands the operation does not read are
        /// ignored.</param>
        /// <param name="args">The bound operands.</param>
        /// <exception cref="ArgumentNullException">args is null, or a required operand is not
        /// bound (the library's message names it: "attn_run: v is NULL").</exception>
        /// <exception cref="ArgumentException">op is not an Op value; a bound array is shorter
        /// than RequiredLen ("q has 10 elements, needs at least 12"); or the library refused the
        /// combination (an output overlapping another operand, seq_lens_k out of range, ALiBi
        /// slopes without Alibi.Operand, sinks with SoftmaxPlusOne), with its message.</exception>
        /// <exception cref="AttentionException">Unsupported (e.g. Op.Backward with a 16-bit or
        /// int8 Q, K or V, or with a paged cache), OutOfMemory.</exception>
        /// <exception cref="ObjectDisposedException">the descriptor or args was
        /// disposed.</exception>
        /// <remarks>Serving layouts: with <see cref="Varlen"/> the lengths of Q, Out and Lse (and
        /// of K and V without pages) are those of the pack that the bound
        /// <see cref="Operand.CuSeqlensQ"/> / <see cref="Operand.CuSeqlensK"/> describe, checked
        /// before the call like every other length; with <see cref="PageSize"/> K and V are
        /// pools of whole pages, <see cref="Operand.BlockTable"/> and
        /// <see cref="Operand.SeqLensK"/> are required, and a bad page id, a -1 among the used
        /// slots or a length above seq_k is an <see cref="ArgumentException"/> with the
        /// library's message naming the sequence and the slot
        /// ("attn_run: block_table[1][2] (99) is not a page of the K/V buffers, which hold 4
        /// pages").</remarks>
        public void Run(Op op, AttentionArgs args)
        {
            IntPtr desc = Acquire();
            try
            {
                if (args == null)
                    throw new ArgumentNullException("args", "args must not be null");
                if ((uint)op > (uint)Op.Backward)
                    throw new ArgumentOutOfRangeException(
                        "op", op, "op (" + ((int)op).ToString(CultureInfo.InvariantCulture)
                                      + ") is not an Op value (0 Forward, 1 Weights, 2 Backward)");
                args.RunOn(this, desc, op);
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>
        /// Writes new key and value rows into their cache positions (attn_kv_append, vLLM's
        /// reshape_and_cache): token t of the n_b new tokens of sequence b goes to key position
        /// seq_lens_k[b] - n_b + t, so <see cref="Operand.SeqLensK"/> already counts the new
        /// tokens and the same args then serve <see cref="Run"/>. Only the destination rows are
        /// written; nothing is copied on the way (the caches and the bound operands are pinned
        /// for the call).
        /// </summary>
        /// <param name="args">Binds <see cref="Operand.NewK"/> / <see cref="Operand.NewV"/>
        /// (contiguous token-major rows [tokens][heads_kv][head_dim(_v)]; tokens =
        /// cu_seqlens_q[batch] in varlen mode, else batch * seq_q), <see cref="Operand.SeqLensK"/>
        /// (required), <see cref="Operand.CuSeqlensQ"/> (varlen), <see cref="Operand.BlockTable"/>
        /// (paged), <see cref="Operand.CuSeqlensK"/> (varlen without pages). Other operands
        /// are ignored.</param>
        /// <param name="kCache">The K buffer: the page pool with a paged cache, else K in the
        /// descriptor's K layout.</param>
        /// <param name="vCache">The V buffer, as kCache.</param>
        /// <exception cref="ArgumentNullException">args, kCache or vCache is null, or a required
        /// operand is not bound (the library's message).</exception>
        /// <exception cref="ArgumentException">an array is shorter than required
        /// ("kCache has 3 elements, needs at least 96"); or the library refused:
        /// seq_lens_k[b] below the new tokens or above seq_k, a bad page id
        /// ("attn_kv_append: block_table[2][0] (1000) is not a page ..."), caches overlapping
        /// each other or the new rows.</exception>
        /// <exception cref="ObjectDisposedException">the descriptor or args was
        /// disposed.</exception>
        public void KvAppend(AttentionArgs args, float[] kCache, float[] vCache)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckKvAppend(args, kCache == null, vCache == null);
                unsafe
                {
                    fixed (float* k = kCache)
                    fixed (float* v = vCache)
                        args.KvAppendOn(this, desc, (IntPtr)k, kCache.LongLength, (IntPtr)v,
                                        vCache.LongLength);
                }
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>As <see cref="KvAppend(AttentionArgs, float[], float[])"/>, with the caches
        /// in memory windows (an array slice, or native memory through
        /// <see cref="Memory{T}.Pin"/>), pinned for the call only.</summary>
        public void KvAppend(AttentionArgs args, Memory<float> kCache, Memory<float> vCache)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckKvAppend(args, false, false);
                unsafe
                {
                    using (MemoryHandle k = kCache.Pin())
                    using (MemoryHandle v = vCache.Pin())
                        args.KvAppendOn(this, desc, (IntPtr)k.Pointer, kCache.Length,
                                        (IntPtr)v.Pointer, vCache.Length);
                }
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>
        /// Writes the new rows bound in <paramref name="args"/> into caches of any storage type
        /// (attn_kv_append_args): the caches are args' <see cref="Operand.K"/> and
        /// <see cref="Operand.V"/> (float, or bound with <c>BindF16</c> / <c>BindBF16</c> /
        /// <c>Bind(sbyte[])</c>; an int8 cache's <see cref="Operand.KScale"/> /
        /// <see cref="Operand.VScale"/> are written too), written in place at the destination
        /// rows only; bind them with arrays or writable memory. The new rows
        /// <see cref="Operand.NewK"/> / <see cref="Operand.NewV"/> are floats, converted to the
        /// cache's type with round to nearest even or quantized as
        /// <c>Attention.QuantizeI8</c> does (the
        /// int8 row and its scale), or of the cache's own type (int8 rows with
        /// <see cref="Operand.NewKScale"/> / <see cref="Operand.NewVScale"/>). Positions and
        /// every check are <see cref="KvAppend(AttentionArgs, float[], float[])"/>'s; the same
        /// args then serve <see cref="Run"/> over the cache. Nothing is copied: every operand is
        /// pinned for the call.
        /// </summary>
        /// <exception cref="ArgumentNullException">args is null, or a required operand is not
        /// bound (the library's message).</exception>
        /// <exception cref="ArgumentException">a buffer shorter than required, or the library
        /// refused: new rows neither float nor the cache's type ("new_k is bf16 but k is f16"),
        /// a non-finite float row for an int8 cache ("new_k row 3 (token 1, KV head 1) holds a
        /// non-finite value"; nothing is written), the checks of KvAppend.</exception>
        /// <exception cref="ObjectDisposedException">the descriptor or args was
        /// disposed.</exception>
        public void KvAppendArgs(AttentionArgs args)
        {
            IntPtr desc = Acquire();
            try
            {
                if (args == null)
                    throw new ArgumentNullException("args", "args must not be null");
                args.KvAppendArgsOn(this, desc);
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        static void CheckKvAppend(AttentionArgs args, bool kNull, bool vNull)
        {
            if (args == null)
                throw new ArgumentNullException("args", "args must not be null");
            if (kNull)
                throw new ArgumentNullException("kCache", "kCache must not be null");
            if (vNull)
                throw new ArgumentNullException("vCache", "vCache must not be null");
        }

        /// <summary>
        /// Exact merge of partial results computed over disjoint key sets (attn_merge: split-KV,
        /// ring attention, prefix caching): acc &lt;- merge(acc, part), row by row,
        /// lse = log(exp(lse_acc) + exp(lse_part)),
        /// out = exp(lse_acc - lse) out_acc + exp(lse_part - lse) out_part. A part row with lse
        /// -infinity contributes nothing; both -infinity give out 0, lse -infinity. Folding parts
        /// in a fixed order gives bit-identical results.
        /// </summary>
        /// <param name="acc">Binds <see cref="Operand.Out"/> and <see cref="Operand.Lse"/> (in
        /// this descriptor's Out and Lse layouts), updated in place, and in varlen mode
        /// <see cref="Operand.CuSeqlensQ"/>.</param>
        /// <param name="part">Binds <see cref="Operand.Out"/> and <see cref="Operand.Lse"/>,
        /// only read. Other operands of both are ignored.</param>
        /// <exception cref="ArgumentNullException">acc or part is null, or an operand is not
        /// bound ("attn_merge: part's lse is NULL").</exception>
        /// <exception cref="ArgumentException">a buffer is shorter than required
        /// ("part's lse has 3 elements, needs at least 56", ParamName "part"), acc and part
        /// buffers overlap, or bad cu_seqlens_q (the library's message).</exception>
        /// <exception cref="ObjectDisposedException">the descriptor, acc or part was
        /// disposed.</exception>
        public void Merge(AttentionArgs acc, AttentionArgs part)
        {
            IntPtr desc = Acquire();
            try
            {
                if (acc == null)
                    throw new ArgumentNullException("acc", "acc must not be null");
                if (part == null)
                    throw new ArgumentNullException("part", "part must not be null");
                AttentionArgs.MergeOn(this, desc, acc, part);
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>
        /// Attention forward pass into caller-owned arrays (attn_forward), no copies.
        /// </summary>
        /// <param name="q">[batch][heads_q][seq_q][head_dim] (Q strides).</param>
        /// <param name="k">[batch][heads_kv][seq_k][head_dim] (K strides).</param>
        /// <param name="v">[batch][heads_kv][seq_k][head_dim_v] (V strides).</param>
        /// <param name="keyValid">[batch][seq_k], true = real token, false = padding (never read);
        /// null = all real.</param>
        /// <param name="allowed">[seq_q][seq_k], true = query i may see key j, for every batch
        /// and head; null = all allowed.</param>
        /// <param name="output">[batch][heads_q][seq_q][head_dim_v] (OUT strides), written; only
        /// the elements the strides address. Must not be one of the inputs.</param>
        /// <param name="lse">[batch][heads_q][seq_q] log-sum-exp of the scaled visible scores
        /// (-infinity for a row with no visible key), written; null = not wanted.</param>
        /// <exception cref="ArgumentNullException">q, k, v or output is null.</exception>
        /// <exception cref="ArgumentException">an array is shorter than RequiredLen, or the
        /// library refused (e.g. output overlaps an input: its message).</exception>
        /// <exception cref="ObjectDisposedException">the descriptor was disposed.</exception>
        public void Forward(float[] q, float[] k, float[] v, bool[] keyValid, bool[] allowed,
                            float[] output, float[] lse = null)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckForwardInputs(q, k, v, keyValid, allowed);
                CheckRequired(output, "output", Operand.Out);
                CheckOptional(lse, "lse", Operand.Lse);
                Errors.Check(AttnNative.attn_forward(desc, q, k, v, keyValid, allowed, output,
                                                     lse));
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>
        /// Attention forward pass returning a new output array of RequiredLen(Operand.Out)
        /// floats (elements the OUT strides do not address are 0). The inputs are checked before
        /// anything is allocated. See
        /// <see cref="Forward(float[], float[], float[], bool[], bool[], float[], float[])"/>.
        /// </summary>
        public float[] Forward(float[] q, float[] k, float[] v, bool[] keyValid = null,
                               bool[] allowed = null)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckForwardInputs(q, k, v, keyValid, allowed);
                float[] output = NewArray(Operand.Out, "output");
                Errors.Check(AttnNative.attn_forward(desc, q, k, v, keyValid, allowed, output,
                                                     null));
                return output;
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>
        /// The attention weights (attn_weights) into a caller-owned array:
        /// weights[b][h][i][j] = softmax over visible keys j of scale * q_i . k_j; hidden keys get
        /// exactly 0. (Other weights modes, bias, ALiBi, ...: <see cref="Run"/> with
        /// <see cref="Op.Weights"/>; this 0.1 call uses the descriptor's parameters too.)
        /// </summary>
        /// <param name="q">As in Forward.</param>
        /// <param name="k">As in Forward.</param>
        /// <param name="keyValid">As in Forward; null = all real.</param>
        /// <param name="allowed">As in Forward; null = all allowed.</param>
        /// <param name="weights">[batch][heads_q][seq_q][seq_k] contiguous, written.</param>
        /// <exception cref="ArgumentNullException">q, k or weights is null.</exception>
        /// <exception cref="ArgumentException">an array is shorter than RequiredLen, or the
        /// library refused.</exception>
        /// <exception cref="ObjectDisposedException">the descriptor was disposed.</exception>
        public void Weights(float[] q, float[] k, bool[] keyValid, bool[] allowed, float[] weights)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckWeightsInputs(q, k, keyValid, allowed);
                CheckRequired(weights, "weights", Operand.Weights);
                Errors.Check(AttnNative.attn_weights(desc, q, k, keyValid, allowed, weights));
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>The attention weights in a new array of RequiredLen(Operand.Weights) floats
        /// (the inputs are checked before anything is allocated). See
        /// <see cref="Weights(float[], float[], bool[], bool[], float[])"/>.</summary>
        public float[] Weights(float[] q, float[] k, bool[] keyValid = null, bool[] allowed = null)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckWeightsInputs(q, k, keyValid, allowed);
                float[] weights = NewArray(Operand.Weights, "weights");
                Errors.Check(AttnNative.attn_weights(desc, q, k, keyValid, allowed, weights));
                return weights;
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>Frees the native descriptor (after any call still in flight on another
        /// thread). Idempotent.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref disposed, 1) == 0)
                handle.Dispose();
        }

        IntPtr Acquire()
        {
            return Handles.Acquire(handle, ref disposed, "AttentionDesc");
        }

        void CheckForwardInputs(float[] q, float[] k, float[] v, bool[] keyValid, bool[] allowed)
        {
            CheckRequired(q, "q", Operand.Q);
            CheckRequired(k, "k", Operand.K);
            CheckRequired(v, "v", Operand.V);
            CheckOptional(keyValid, "keyValid", Operand.KeyValid);
            CheckOptional(allowed, "allowed", Operand.Allowed);
        }

        void CheckWeightsInputs(float[] q, float[] k, bool[] keyValid, bool[] allowed)
        {
            CheckRequired(q, "q", Operand.Q);
            CheckRequired(k, "k", Operand.K);
            CheckOptional(keyValid, "keyValid", Operand.KeyValid);
            CheckOptional(allowed, "allowed", Operand.Allowed);
        }

        float[] NewArray(Operand which, string name)
        {
            ulong n = requiredLen[(int)which];
            if (n > (ulong)MaxArrayLength)
                throw new ArgumentException(
                    name + " would need " + n + " elements, more than a C# array holds ("
                        + MaxArrayLength + ")",
                    name);
            return new float[n];
        }

        void CheckRequired(float[] array, string name, Operand which)
        {
            if (array == null)
                throw new ArgumentNullException(name, name + " must not be null");
            CheckLength(array.LongLength, name, requiredLen[(int)which]);
        }

        void CheckOptional(Array array, string name, Operand which)
        {
            if (array != null)
                CheckLength(array.LongLength, name, requiredLen[(int)which]);
        }

        // The wording every language uses (docs/errors.md, "One rule in every language").
        internal static void CheckLength(long length, string name, ulong required)
        {
            CheckLength(length, name, required, name);
        }

        internal static void CheckLength(long length, string name, ulong required, string argName)
        {
            if ((ulong)length < required)
                throw new ArgumentException(
                    name + " has " + length + " elements, needs at least " + required, argName);
        }

        internal static int OperandIndex(Operand which, string argName)
        {
            if ((uint)which >= OperandCount)
                throw new ArgumentOutOfRangeException(
                    argName, which,
                    argName + " (" + ((int)which).ToString(CultureInfo.InvariantCulture)
                        + ") is not an Operand value (0 Q .. 28 NewVScale)");
            return (int)which;
        }

        /// <summary>
        /// Builds an <see cref="AttentionDesc"/>. Defaults: batch 1, 1 query and 1 key/value
        /// head, <see cref="LibAttn.Causal.None"/>, scale 1/sqrt(headDim), no window, softcap or
        /// ALiBi, headDimV = headDim, contiguous [batch][heads][seq][head_dim] strides. SeqLen and
        /// HeadDim must be set.
        /// <para>Every parameter is checked when it is set, against the library's own bounds
        /// (attn_param_bounds): a value out of range, NaN or an enum value cast from an
        /// undefined integer throws <see cref="ArgumentOutOfRangeException"/> naming the value;
        /// negative sizes and strides too. Sizes, strides and their products are checked by the
        /// library in <see cref="Build"/> (<see cref="ArgumentException"/> with its message).
        /// Parameters reach the library in <see cref="Param"/> order, strides after them. A
        /// builder may build any number of descriptors; it is not meant to be shared between
        /// threads.</para>
        /// </summary>
        public sealed class Builder
        {
            // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
            static Builder()
            {
                NativeLoader.Preload();
            }

            internal long batch = 1, headsQ = 1, headsKv = 1, seqQ, seqK, headDim;
            // Parameters by id, applied in id order: an integer (attn_desc_set_int) or a double
            // (attn_desc_set_float) each.
            readonly SortedDictionary<int, KeyValuePair<long, double?>> parameters =
                new SortedDictionary<int, KeyValuePair<long, double?>>();
            internal readonly long[][] strides = new long[OperandCount][];

            /// <summary>Number of sequences (default 1).</summary>
            public Builder Batch(long batch)
            {
                this.batch = NonNegative(batch, "batch");
                return this;
            }

            /// <summary>Query heads and key/value heads; headsQ must be a multiple of headsKv
            /// (MHA, GQA, MQA). Default 1, 1.</summary>
            public Builder Heads(long headsQ, long headsKv)
            {
                this.headsQ = NonNegative(headsQ, "headsQ");
                this.headsKv = NonNegative(headsKv, "headsKv");
                return this;
            }

            /// <summary>Same number of query and key/value heads.</summary>
            public Builder Heads(long heads)
            {
                return Heads(heads, heads);
            }

            /// <summary>Query and key sequence lengths.</summary>
            public Builder SeqLen(long seqQ, long seqK)
            {
                this.seqQ = NonNegative(seqQ, "seqQ");
                this.seqK = NonNegative(seqK, "seqK");
                return this;
            }

            /// <summary>Same query and key sequence length.</summary>
            public Builder SeqLen(long seq)
            {
                return SeqLen(seq, seq);
            }

            /// <summary>Vector size per head (of Q and K; of V and OUT too unless
            /// <see cref="HeadDimV"/> is set).</summary>
            public Builder HeadDim(long headDim)
            {
                this.headDim = NonNegative(headDim, "headDim");
                return this;
            }

            /// <summary>All six sizes at once, in attn_desc_create's order.</summary>
            public Builder Dims(long batch, long headsQ, long headsKv, long seqQ, long seqK,
                                long headDim)
            {
                return Batch(batch).Heads(headsQ, headsKv).SeqLen(seqQ, seqK).HeadDim(headDim);
            }

            /// <summary>The causal rule (default None).</summary>
            /// <exception cref="ArgumentOutOfRangeException">not a Causal value.</exception>
            public Builder Causal(Causal causal)
            {
                return SetEnum(LibAttn.Param.Causal, (int)causal, "causal", typeof(Causal));
            }

            /// <summary>Score scale applied to q.k (any finite value, 0 included; default
            /// 1/sqrt(headDim)).</summary>
            /// <exception cref="ArgumentOutOfRangeException">NaN or infinite.</exception>
            public Builder Scale(float scale)
            {
                return SetChecked(LibAttn.Param.Scale, scale, "scale");
            }

            /// <summary>Sliding window around the causal diagonal: key j is visible to query i
            /// only if diag(i) - left &lt;= j &lt;= diag(i) + right; -1 = unbounded on that side
            /// (the default). FlashAttention's window_size, ONNX's
            /// left/right_window_size.</summary>
            /// <exception cref="ArgumentOutOfRangeException">a bound below -1 or above
            /// 2^31-1.</exception>
            public Builder Window(long left, long right)
            {
                CheckValue(LibAttn.Param.WindowLeft, left, "left");
                CheckValue(LibAttn.Param.WindowRight, right, "right");
                Store(LibAttn.Param.WindowLeft, left);
                return Store(LibAttn.Param.WindowRight, right);
            }

            /// <summary>Logit softcap c: s = c * tanh(s / c) (Gemma 2); 0 = off
            /// (default).</summary>
            /// <exception cref="ArgumentOutOfRangeException">negative, NaN or infinite.</exception>
            public Builder Softcap(float cap)
            {
                return SetChecked(LibAttn.Param.Softcap, cap, "cap");
            }

            /// <summary>ALiBi: <see cref="LibAttn.Alibi.Standard"/> (the slopes of Press et al.
            /// for headsQ heads) or <see cref="LibAttn.Alibi.Operand"/> (bind
            /// <see cref="Operand.AlibiSlopes"/>, [heads_q] floats). Default None.</summary>
            /// <exception cref="ArgumentOutOfRangeException">not an Alibi value.</exception>
            public Builder Alibi(Alibi mode)
            {
                return SetEnum(LibAttn.Param.Alibi, (int)mode, "mode", typeof(Alibi));
            }

            /// <summary>"+1" quiet softmax: a sink logit of 0 for every head (cannot be combined
            /// with the <see cref="Operand.Sinks"/> operand).</summary>
            public Builder SoftmaxPlusOne(bool on = true)
            {
                return Store(LibAttn.Param.SoftmaxPlusOne, on ? 1 : 0);
            }

            /// <summary>Size of a V row and of an OUT row when it differs from headDim (DeepSeek
            /// MLA: 192 / 128).</summary>
            /// <exception cref="ArgumentOutOfRangeException">below 1 or above 2^31-1.</exception>
            public Builder HeadDimV(long headDimV)
            {
                CheckValue(LibAttn.Param.HeadDimV, headDimV, "headDimV");
                return Store(LibAttn.Param.HeadDimV, headDimV);
            }

            /// <summary>What <see cref="Op.Weights"/> writes (default Softmax).</summary>
            /// <exception cref="ArgumentOutOfRangeException">not a WeightsMode value.</exception>
            public Builder WeightsMode(WeightsMode mode)
            {
                return SetEnum(LibAttn.Param.WeightsMode, (int)mode, "mode", typeof(WeightsMode));
            }

            /// <summary>Add the bias before the softcap (ONNX's order: softcap(q.k*scale + mask))
            /// instead of after it (the default).</summary>
            public Builder BiasFirst(bool on = true)
            {
                return Store(LibAttn.Param.BiasFirst, on ? 1 : 0);
            }

            /// <summary>Packed variable-length batch (FlashAttention's varlen layout): Q and Out
            /// token-major [total_q][heads_q][head_dim(_v)], K and V [total_k][heads_kv][...]
            /// (other head and row strides through <see cref="Strides"/>), Lse
            /// [heads_q][total_q]; sequence b is rows cu[b] .. cu[b + 1] - 1 of
            /// <see cref="Operand.CuSeqlensQ"/> / <see cref="Operand.CuSeqlensK"/> (a length 0
            /// produces nothing). SeqLen(seqQ, seqK) become the maximum lengths. Masks and
            /// variants apply per sequence, positions counted from its start. Not with Bias,
            /// QueryValid, KeyMass or Op.Weights (the library answers Unsupported).</summary>
            public Builder Varlen(bool on = true)
            {
                return Store(LibAttn.Param.Varlen, on ? 1 : 0);
            }

            /// <summary>A paged K/V cache of <paramref name="pageSize"/> tokens per page (0 =
            /// contiguous K/V, the default): K and V are pools of pages, token t of page p of KV
            /// head h at p * batchStride + h * headStride + t * rowStride. Default strides are
            /// token-major pages [num_pages][page_size][heads_kv][head_dim]; head-major pages
            /// [num_pages][heads_kv][page_size][head_dim] are
            /// <c>Strides(Operand.K, headsKv * pageSize * D, pageSize * D, D)</c> (and V).
            /// Bind <see cref="Operand.BlockTable"/> ([batch][max_pages] page ids, -1 = unused)
            /// and <see cref="Operand.SeqLensK"/> (the keys in each sequence's cache). Q is dense
            /// or, with <see cref="Varlen"/>, a pack.</summary>
            /// <exception cref="ArgumentOutOfRangeException">negative or above
            /// 2^31-1.</exception>
            public Builder PageSize(long pageSize)
            {
                CheckValue(LibAttn.Param.PageSize, pageSize, "pageSize");
                return Store(LibAttn.Param.PageSize, pageSize);
            }

            /// <summary>Columns of the block table (default 0 = ceil(seqK / pageSize)).</summary>
            /// <exception cref="ArgumentOutOfRangeException">negative or above
            /// 2^31-1.</exception>
            public Builder MaxPages(long maxPages)
            {
                CheckValue(LibAttn.Param.MaxPages, maxPages, "maxPages");
                return Store(LibAttn.Param.MaxPages, maxPages);
            }

            /// <summary>Batch invariance: a query's output bits then depend only on its own
            /// sequence, never on its batch-mates, the batch size, the layout (padded, varlen,
            /// paged), the prefill chunk it is in or the thread count. Costs speed on decode-like
            /// calls.</summary>
            public Builder BatchInvariant(bool on = true)
            {
                return Store(LibAttn.Param.BatchInvariant, on ? 1 : 0);
            }

            /// <summary>The arithmetic of <see cref="Op.Forward"/> (default
            /// <see cref="LibAttn.Compute.Exact"/>): <see cref="LibAttn.Compute.Fp16"/> is the
            /// fast path on CPUs with AVX512-FP16, outputs within about 1e-2 max|v| of Exact;
            /// calls it does not apply to (see <see cref="LibAttn.Compute.Fp16"/>) and other CPUs
            /// run exactly as Exact.</summary>
            /// <exception cref="ArgumentOutOfRangeException">not a Compute value.</exception>
            public Builder Compute(Compute mode)
            {
                return SetEnum(LibAttn.Param.Compute, (int)mode, "mode", typeof(Compute));
            }

            /// <summary>The diagonal diag(i) the sliding window and ALiBi measure from (default
            /// <see cref="LibAttn.Diagonal.Causal"/>, the causal rule's);
            /// <see cref="LibAttn.Diagonal.BottomRight"/> is FlashAttention's window_size /
            /// alibi_slopes alignment, causal or not. The causal rule keeps its own.</summary>
            /// <exception cref="ArgumentOutOfRangeException">not a Diagonal value.</exception>
            public Builder Diagonal(Diagonal d)
            {
                return SetEnum(LibAttn.Param.Diagonal, (int)d, "d", typeof(Diagonal));
            }

            /// <summary>The ALiBi term: <see cref="LibAttn.AlibiForm.Linear"/>
            /// -slope (diag(i) - j) (default) or <see cref="LibAttn.AlibiForm.Symmetric"/>
            /// -slope |diag(i) - j| (FlashAttention's non-causal ALiBi).</summary>
            /// <exception cref="ArgumentOutOfRangeException">not an AlibiForm value.</exception>
            public Builder AlibiForm(AlibiForm form)
            {
                return SetEnum(LibAttn.Param.AlibiForm, (int)form, "form", typeof(AlibiForm));
            }

            /// <summary>Any parameter from an integer (attn_desc_set_int; a float parameter takes
            /// the integer's value).</summary>
            /// <exception cref="ArgumentOutOfRangeException">param is not a Param value, or value
            /// is outside its bounds.</exception>
            public Builder Set(Param param, long value)
            {
                CheckValue(param, value, "value");
                return Store(param, value);
            }

            /// <summary>Any parameter from a double (attn_desc_set_float; an integer parameter
            /// accepts integral values).</summary>
            /// <exception cref="ArgumentOutOfRangeException">param is not a Param value, or value
            /// is NaN, outside its bounds or not integral for an integer parameter.</exception>
            public Builder Set(Param param, double value)
            {
                return SetChecked(param, value, "value");
            }

            /// <summary>Element strides of Q, K, V, Out or Bias: element (b, h, s, d) is at
            /// b*batchStride + h*headStride + s*rowStride + d (Bias: (b, h, i, j) at
            /// b*batchStride + h*headStride + i*rowStride + j). 0 broadcasts (inputs only).
            /// In varlen mode batchStride of Q and Out (and of K and V without pages) is not
            /// used; with a paged cache batchStride of K and V is the page stride and rowStride
            /// the token stride inside a page.
            /// The int8 scales <see cref="Operand.KScale"/> / <see cref="Operand.VScale"/>
            /// ([batch][heads_kv][seq_k], K's shape with head_dim 1) take strides too (default:
            /// K's default layout with head_dim 1). The gradients DQ, DK, DV, DOut and DBias
            /// follow the strides of Q, K, V, Out and Bias. <see cref="Operand.AlibiSlopes"/> is
            /// [batch][heads_q] with no row dimension: the slope of (b, h) at
            /// b*batchStride + h*headStride, rowStride 0; default (0, 1, 0), one [heads_q] row for
            /// every batch entry; (heads_q, 1, 0) = per-batch slopes (b is the sequence of a
            /// varlen or paged call).
            /// Another operand is refused by the library in <see cref="Build"/>.</summary>
            /// <exception cref="ArgumentOutOfRangeException">a negative stride, or which is not
            /// an Operand value.</exception>
            public Builder Strides(Operand which, long batchStride, long headStride, long rowStride)
            {
                int w = OperandIndex(which, "which");
                NonNegative(batchStride, "batchStride");
                NonNegative(headStride, "headStride");
                NonNegative(rowStride, "rowStride");
                strides[w] = new long[] { batchStride, headStride, rowStride };
                return this;
            }

            /// <summary>Creates the descriptor. Dispose it (using) when done.</summary>
            /// <exception cref="ArgumentException">the library rejected a size, a parameter or
            /// strides (its message names the argument).</exception>
            public AttentionDesc Build()
            {
                IntPtr raw;
                Errors.Check(AttnNative.attn_desc_create(out raw, (ulong)batch, (ulong)headsQ,
                                                         (ulong)headsKv, (ulong)seqQ, (ulong)seqK,
                                                         (ulong)headDim));
                var owner = new AttnDescHandle(raw);
                try
                {
                    foreach (var p in parameters)
                        Errors.Check(p.Value.Value.HasValue
                                         ? AttnNative.attn_desc_set_float(raw, (attn_param)p.Key,
                                                                          p.Value.Value.Value)
                                         : AttnNative.attn_desc_set_int(raw, (attn_param)p.Key,
                                                                        p.Value.Key));
                    for (int i = 0; i < OperandCount; i++)
                        if (strides[i] != null)
                            Errors.Check(AttnNative.attn_desc_set_strides(
                                raw, (Operand)i, (ulong)strides[i][0], (ulong)strides[i][1],
                                (ulong)strides[i][2]));
                    return new AttentionDesc(owner, this);
                }
                catch
                {
                    owner.Dispose();
                    throw;
                }
            }

            Builder Store(Param param, long value)
            {
                parameters[(int)param] = new KeyValuePair<long, double?>(value, null);
                return this;
            }

            Builder SetChecked(Param param, double value, string argName)
            {
                ParamBounds b = Attention.Bounds(param, "param");
                if (double.IsNaN(value))
                    throw new ArgumentOutOfRangeException(
                        argName, value, ParamName(param) + " must not be NaN");
                CheckRange(b, value, value.ToString("R", CultureInfo.InvariantCulture), argName);
                parameters[(int)param] = new KeyValuePair<long, double?>(0, value);
                return this;
            }

            Builder SetEnum(Param param, int value, string argName, Type enumType)
            {
                ParamBounds b = Attention.Bounds(param, "param");
                if (!b.Accepts(value))
                {
                    var names = new List<string>();
                    foreach (object e in Enum.GetValues(enumType))
                        names.Add(((int)e).ToString(CultureInfo.InvariantCulture) + " " + e);
                    throw new ArgumentOutOfRangeException(
                        argName, value,
                        ParamName(param) + " (" + value.ToString(CultureInfo.InvariantCulture)
                            + ") is not " + Article(enumType.Name) + " value ("
                            + string.Join(", ", names) + ")");
                }
                return Store(param, value);
            }

            static void CheckValue(Param param, long value, string argName)
            {
                CheckRange(Attention.Bounds(param, "param"), value,
                           value.ToString(CultureInfo.InvariantCulture), argName);
            }

            // Messages name the parameter as the library and every other language do
            // ("window_left (-2) is outside [-1, 2147483647]"); ParamName is the C# argument.
            static void CheckRange(ParamBounds b, double value, string shown, string argName)
            {
                if (!(value >= b.Min && value <= b.Max))
                    throw new ArgumentOutOfRangeException(
                        argName, shown,
                        string.Format(CultureInfo.InvariantCulture,
                                      "{0} ({1}) is outside [{2:R}, {3:R}]", ParamName(b.Param),
                                      shown, b.Min, b.Max));
                if (!b.IsFloat && value != Math.Floor(value))
                    throw new ArgumentOutOfRangeException(
                        argName, shown, ParamName(b.Param) + " (" + shown + ") must be an integer");
            }

            static readonly string[] ParamNames = {
                "causal", "scale", "window_left", "window_right", "softcap", "alibi",
                "softmax_plus_one", "head_dim_v", "weights_mode", "bias_first", "varlen",
                "page_size", "max_pages", "batch_invariant", "compute", "diagonal", "alibi_form" };

            internal static string ParamName(Param param)
            {
                return (uint)param < ParamNames.Length
                           ? ParamNames[(int)param]
                           : "param " + ((int)param).ToString(CultureInfo.InvariantCulture);
            }

            static string Article(string word)
            {
                return ("AEIOU".IndexOf(word[0]) >= 0 ? "an " : "a ") + word;
            }

            static long NonNegative(long value, string name)
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException(name, value, name + " must be >= 0");
                return value;
            }
        }
    }
}
