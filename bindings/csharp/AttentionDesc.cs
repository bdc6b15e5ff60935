// libattn C# binding: the descriptor (attn_desc) and its builder.
using System;
using System.Buffers;
using System.Collections.Generic;
using System.Threading;

[assembly: System.Runtime.CompilerServices.InternalsVisibleTo("LibAttn.Tests")]

namespace LibAttn
{
    /// <summary>
    /// An immutable attention problem (attn_desc): sizes, <see cref="Param"/> values and
    /// strides, built with <see cref="Builder"/>. capi/attn.h gives the shapes, layouts and
    /// rules of every call. The 0.1 calls <see cref="Forward(float[], float[], float[], bool[], bool[], float[], float[])"/>
    /// and <see cref="Weights(float[], float[], bool[], bool[], float[])"/> take arrays; the
    /// extensible <see cref="Run(Op, AttentionArgs)"/>, <see cref="KvAppend(AttentionArgs, float[], float[])"/>,
    /// <see cref="KvAppendArgs"/> and <see cref="Merge"/> take operands bound in an
    /// <see cref="AttentionArgs"/>.
    /// <para>One descriptor may be used by any number of threads at once; <see cref="Dispose"/>
    /// while calls are in flight frees it after the last of them, and a call that starts after
    /// it throws <see cref="ObjectDisposedException"/>. Arrays are pinned for the call, never
    /// copied; null means "not given" for an optional one.</para>
    /// </summary>
    public sealed class AttentionDesc : IDisposable
    {
        // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
        static AttentionDesc()
        {
            NativeLoader.Preload();
        }

        internal static readonly int OperandCount = Enum.GetValues(typeof(Operand)).Length;
        static readonly int ParamCount = Enum.GetValues(typeof(Param)).Length;

        readonly AttnDescHandle handle;
        int disposed; // set once by Dispose (see Handles.Acquire)
        // attn_desc_required_len of every operand and every parameter's value, read once: a
        // built descriptor never changes.
        internal readonly ulong[] requiredLen = new ulong[OperandCount];
        readonly double[] values = new double[ParamCount];

        /// <summary>Number of sequences in the batch.</summary>
        public long Batch { get; }
        /// <summary>Number of query heads.</summary>
        public long HeadsQ { get; }
        /// <summary>Number of key/value heads.</summary>
        public long HeadsKv { get; }
        /// <summary>Query sequence length (varlen: the longest).</summary>
        public long SeqQ { get; }
        /// <summary>Key sequence length (varlen: the longest).</summary>
        public long SeqK { get; }
        /// <summary>Size of a query and a key vector.</summary>
        public long HeadDim { get; }

        /// <summary><see cref="Param.Causal"/>.</summary>
        public Causal Causal => (Causal)values[(int)Param.Causal];
        /// <summary><see cref="Param.Scale"/>: the float the kernels multiply q.k by.</summary>
        public float Scale => (float)values[(int)Param.Scale];
        /// <summary><see cref="Param.WindowLeft"/>.</summary>
        public long WindowLeft => (long)values[(int)Param.WindowLeft];
        /// <summary><see cref="Param.WindowRight"/>.</summary>
        public long WindowRight => (long)values[(int)Param.WindowRight];
        /// <summary><see cref="Param.Softcap"/>.</summary>
        public float Softcap => (float)values[(int)Param.Softcap];
        /// <summary><see cref="Param.Alibi"/>.</summary>
        public Alibi Alibi => (Alibi)values[(int)Param.Alibi];
        /// <summary><see cref="Param.SoftmaxPlusOne"/>.</summary>
        public bool SoftmaxPlusOne => values[(int)Param.SoftmaxPlusOne] != 0;
        /// <summary><see cref="Param.HeadDimV"/>.</summary>
        public long HeadDimV => (long)values[(int)Param.HeadDimV];
        /// <summary><see cref="Param.WeightsMode"/>.</summary>
        public WeightsMode WeightsMode => (WeightsMode)values[(int)Param.WeightsMode];
        /// <summary><see cref="Param.BiasFirst"/>.</summary>
        public bool BiasFirst => values[(int)Param.BiasFirst] != 0;
        /// <summary><see cref="Param.Varlen"/>.</summary>
        public bool Varlen => values[(int)Param.Varlen] != 0;
        /// <summary><see cref="Param.PageSize"/>.</summary>
        public long PageSize => (long)values[(int)Param.PageSize];
        /// <summary><see cref="Param.MaxPages"/>.</summary>
        public long MaxPages => (long)values[(int)Param.MaxPages];
        /// <summary><see cref="Param.BatchInvariant"/>.</summary>
        public bool BatchInvariant => values[(int)Param.BatchInvariant] != 0;
        /// <summary><see cref="Param.Compute"/>.</summary>
        public Compute Compute => (Compute)values[(int)Param.Compute];
        /// <summary><see cref="Param.Diagonal"/>.</summary>
        public Diagonal Diagonal => (Diagonal)values[(int)Param.Diagonal];
        /// <summary><see cref="Param.AlibiForm"/>.</summary>
        public AlibiForm AlibiForm => (AlibiForm)values[(int)Param.AlibiForm];

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
            for (int i = 0; i < OperandCount; i++)
                requiredLen[i] = AttnNative.attn_desc_required_len(desc, (attn_operand)i);
            for (int i = 0; i < ParamCount; i++)
                Errors.Check(AttnNative.attn_desc_get_float(desc, (attn_param)i, out values[i]));
        }

        /// <summary>A new builder (same as <c>new AttentionDesc.Builder()</c>).</summary>
        public static Builder CreateBuilder() => new Builder();

        /// <summary>True once <see cref="Dispose"/> has been called.</summary>
        public bool IsDisposed => Volatile.Read(ref disposed) != 0;

        // True once the native descriptor has been freed (tests: Dispose under traffic).
        internal bool NativeReleased => handle.IsClosed;

        /// <summary>attn_desc_required_len: the elements the array for
        /// <paramref name="which"/> must hold.</summary>
        public ulong RequiredLen(Operand which)
        {
            using (Use())
                return requiredLen[OperandIndex(which, "which")];
        }

        /// <summary>attn_desc_get_int: a parameter's value as an integer.</summary>
        public long GetInt(Param param)
        {
            long value;
            using (Lease lease = Use())
                Errors.Check(AttnNative.attn_desc_get_int(lease.Ptr, (attn_param)param, out value),
                             "param", true);
            return value;
        }

        /// <summary>attn_desc_get_float: a parameter's value as a double.</summary>
        public double GetDouble(Param param)
        {
            double value;
            using (Lease lease = Use())
                Errors.Check(AttnNative.attn_desc_get_float(lease.Ptr, (attn_param)param, out value),
                             "param", true);
            return value;
        }

        /// <summary>attn_run: runs <paramref name="op"/> on the operands bound in
        /// <paramref name="args"/>.</summary>
        public void Run(Op op, AttentionArgs args) =>
            Call(AttentionArgs.Native.Run, op, args, null, IntPtr.Zero, 0, IntPtr.Zero, 0);

        /// <summary>attn_kv_append: writes the new rows bound in <paramref name="args"/> into
        /// the float caches <paramref name="kCache"/> and <paramref name="vCache"/>.</summary>
        public unsafe void KvAppend(AttentionArgs args, float[] kCache, float[] vCache)
        {
            fixed (float* k = kCache)
            fixed (float* v = vCache)
                Call(AttentionArgs.Native.KvAppend, 0, args, null,
                     AttentionArgs.Address((IntPtr)k, kCache), kCache == null ? 0 : kCache.Length,
                     AttentionArgs.Address((IntPtr)v, vCache), vCache == null ? 0 : vCache.Length);
        }

        /// <summary>attn_kv_append into caches in memory windows (pinned for the call).</summary>
        public unsafe void KvAppend(AttentionArgs args, Memory<float> kCache, Memory<float> vCache)
        {
            using (MemoryHandle k = kCache.Pin())
            using (MemoryHandle v = vCache.Pin())
                Call(AttentionArgs.Native.KvAppend, 0, args, null,
                     AttentionArgs.Address((IntPtr)k.Pointer, k), kCache.Length,
                     AttentionArgs.Address((IntPtr)v.Pointer, v), vCache.Length);
        }

        /// <summary>attn_kv_append_args: writes the new rows into the caches bound as K and V
        /// (and their scales) of <paramref name="args"/>, of any storage type.</summary>
        public void KvAppendArgs(AttentionArgs args) =>
            Call(AttentionArgs.Native.KvAppendArgs, 0, args, null, IntPtr.Zero, 0, IntPtr.Zero, 0);

        /// <summary>attn_merge: acc &lt;- merge(acc, part) of results over disjoint key
        /// sets.</summary>
        public void Merge(AttentionArgs acc, AttentionArgs part) =>
            Call(AttentionArgs.Native.Merge, 0, acc, part, IntPtr.Zero, 0, IntPtr.Zero, 0);

        void Call(AttentionArgs.Native what, Op op, AttentionArgs a, AttentionArgs b, IntPtr k,
                  long kLen, IntPtr v, long vLen)
        {
            using (Lease lease = Use())
            {
                bool merge = what == AttentionArgs.Native.Merge;
                if (a == null || (merge && b == null)) // C# null: no native object to hand over
                {
                    string name = a != null ? "part" : merge ? "acc" : "args";
                    throw new ArgumentNullException(name, name + " must not be null");
                }
                AttentionArgs.Call(what, lease.Ptr, op, a, b, k, (ulong)kLen, v, (ulong)vLen);
            }
        }

        /// <summary>attn_forward into caller-owned arrays (keyValid, allowed and lse may be
        /// null).</summary>
        public void Forward(float[] q, float[] k, float[] v, bool[] keyValid, bool[] allowed,
                            float[] output, float[] lse = null)
        {
            using (Lease lease = Use())
            {
                Inputs(q, k, v, keyValid, allowed, true);
                Need(lse, "lse", Operand.Lse, false);
                Need(output, "output", Operand.Out);
                Errors.Check(AttnNative.attn_forward(lease.Ptr, q, k, v, keyValid, allowed, output, lse));
            }
        }

        /// <summary>attn_forward into a new array of RequiredLen(Operand.Out) floats.</summary>
        public float[] Forward(float[] q, float[] k, float[] v, bool[] keyValid = null,
                               bool[] allowed = null)
        {
            using (Lease lease = Use())
            {
                Inputs(q, k, v, keyValid, allowed, true);
                float[] output = NewArray(Operand.Out, "output");
                Errors.Check(AttnNative.attn_forward(lease.Ptr, q, k, v, keyValid, allowed, output, null));
                return output;
            }
        }

        /// <summary>attn_weights into a caller-owned array.</summary>
        public void Weights(float[] q, float[] k, bool[] keyValid, bool[] allowed, float[] weights)
        {
            using (Lease lease = Use())
            {
                Inputs(q, k, null, keyValid, allowed, false);
                Need(weights, "weights", Operand.Weights);
                Errors.Check(AttnNative.attn_weights(lease.Ptr, q, k, keyValid, allowed, weights));
            }
        }

        /// <summary>attn_weights into a new array of RequiredLen(Operand.Weights) floats.</summary>
        public float[] Weights(float[] q, float[] k, bool[] keyValid = null, bool[] allowed = null)
        {
            using (Lease lease = Use())
            {
                Inputs(q, k, null, keyValid, allowed, false);
                float[] weights = NewArray(Operand.Weights, "weights");
                Errors.Check(AttnNative.attn_weights(lease.Ptr, q, k, keyValid, allowed, weights));
                return weights;
            }
        }

        // The 0.1 calls are given no lengths: their arrays are checked here, inputs first (before
        // an output is allocated).
        void Inputs(float[] q, float[] k, float[] v, bool[] keyValid, bool[] allowed, bool hasV)
        {
            Need(q, "q", Operand.Q);
            Need(k, "k", Operand.K);
            if (hasV)
                Need(v, "v", Operand.V);
            Need(keyValid, "keyValid", Operand.KeyValid, false);
            Need(allowed, "allowed", Operand.Allowed, false);
        }

        float[] NewArray(Operand which, string name)
        {
            ulong n = requiredLen[(int)which];
            if (n > 0x7FFFFFC7) // Array.MaxLength
                throw new ArgumentException(name + " would need " + n
                                            + " elements, more than a C# array holds", name);
            return new float[n];
        }

        // Generic over T[], not Array: Mono reads an Array's LongLength through runtime calls
        // (GetLength per rank), a T[]'s with one instruction; this runs per array per call.
        void Need<T>(T[] a, string name, Operand which, bool required = true)
        {
            if (a == null && required)
                throw new ArgumentNullException(name, name + " must not be null");
            if (a != null)
                Errors.Length(a.LongLength, name, requiredLen[(int)which]);
        }

        /// <summary>Frees the native descriptor (after any call still in flight).
        /// Idempotent.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref disposed, 1) == 0)
                handle.Dispose();
        }

        Lease Use() => new Lease(handle, ref disposed, "AttentionDesc");

        // A C# enum value outside the header's operands (C would be given an int).
        internal static int OperandIndex(Operand which, string argName) =>
            (int)Errors.InRange(which, argName, (uint)which < (uint)OperandCount,
                                "(" + (int)which + ") is not an Operand value");

        /// <summary>
        /// Builds an <see cref="AttentionDesc"/> (defaults: batch 1, one query and one key/value
        /// head, every <see cref="Param"/> at its default; SeqLen and HeadDim must be set). Each
        /// parameter is checked by the library when it is set (an
        /// <see cref="ArgumentOutOfRangeException"/> with its message); sizes and strides in
        /// <see cref="Build"/> (an <see cref="ArgumentException"/>). Not meant to be shared
        /// between threads.
        /// </summary>
        public sealed class Builder
        {
            // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
            static Builder()
            {
                NativeLoader.Preload();
            }

            internal long batch = 1, headsQ = 1, headsKv = 1, seqQ, seqK, headDim;
            // Parameters by id, applied in id order: a long (attn_desc_set_int) or a double.
            readonly SortedDictionary<int, object> parameters = new SortedDictionary<int, object>();
            readonly long[][] strides = new long[OperandCount][];
            AttnDescHandle probe; // a descriptor that checks each value as it is set

            /// <summary>Number of sequences (default 1).</summary>
            public Builder Batch(long batch)
            {
                this.batch = Size(batch, "batch");
                return this;
            }

            /// <summary>Query heads and key/value heads (default 1, 1).</summary>
            public Builder Heads(long headsQ, long headsKv)
            {
                this.headsQ = Size(headsQ, "headsQ");
                this.headsKv = Size(headsKv, "headsKv");
                return this;
            }

            /// <summary>As many key/value heads as query heads.</summary>
            public Builder Heads(long heads) => Heads(heads, heads);

            /// <summary>Query and key sequence lengths.</summary>
            public Builder SeqLen(long seqQ, long seqK)
            {
                this.seqQ = Size(seqQ, "seqQ");
                this.seqK = Size(seqK, "seqK");
                return this;
            }

            /// <summary>The same query and key sequence length.</summary>
            public Builder SeqLen(long seq) => SeqLen(seq, seq);

            /// <summary>Size of a query and a key vector (and of V rows unless HeadDimV).</summary>
            public Builder HeadDim(long headDim)
            {
                this.headDim = Size(headDim, "headDim");
                return this;
            }

            /// <summary>All six sizes, in attn_desc_create's order.</summary>
            public Builder Dims(long batch, long headsQ, long headsKv, long seqQ, long seqK,
                                long headDim) =>
                Batch(batch).Heads(headsQ, headsKv).SeqLen(seqQ, seqK).HeadDim(headDim);

            /// <summary><see cref="Param.Causal"/>.</summary>
            public Builder Causal(Causal causal) => Set(LibAttn.Param.Causal, (long)causal, "causal");

            /// <summary><see cref="Param.Scale"/>.</summary>
            public Builder Scale(float scale) => Set(LibAttn.Param.Scale, (double)scale, "scale");

            /// <summary><see cref="Param.WindowLeft"/> and <see cref="Param.WindowRight"/> (both
            /// or neither).</summary>
            public Builder Window(long left, long right)
            {
                Check(LibAttn.Param.WindowRight, right, "right");
                return Set(LibAttn.Param.WindowLeft, left, "left").Set(LibAttn.Param.WindowRight, right, "right");
            }

            /// <summary><see cref="Param.Softcap"/>.</summary>
            public Builder Softcap(float cap) => Set(LibAttn.Param.Softcap, (double)cap, "cap");

            /// <summary><see cref="Param.Alibi"/>.</summary>
            public Builder Alibi(Alibi mode) => Set(LibAttn.Param.Alibi, (long)mode, "mode");

            /// <summary><see cref="Param.SoftmaxPlusOne"/>.</summary>
            public Builder SoftmaxPlusOne(bool on = true) => Set(LibAttn.Param.SoftmaxPlusOne, on ? 1L : 0L, "on");

            /// <summary><see cref="Param.HeadDimV"/>.</summary>
            public Builder HeadDimV(long headDimV) => Set(LibAttn.Param.HeadDimV, headDimV, "headDimV");

            /// <summary><see cref="Param.WeightsMode"/>.</summary>
            public Builder WeightsMode(WeightsMode mode) => Set(LibAttn.Param.WeightsMode, (long)mode, "mode");

            /// <summary><see cref="Param.BiasFirst"/>.</summary>
            public Builder BiasFirst(bool on = true) => Set(LibAttn.Param.BiasFirst, on ? 1L : 0L, "on");

            /// <summary><see cref="Param.Varlen"/>.</summary>
            public Builder Varlen(bool on = true) => Set(LibAttn.Param.Varlen, on ? 1L : 0L, "on");

            /// <summary><see cref="Param.PageSize"/>.</summary>
            public Builder PageSize(long pageSize) => Set(LibAttn.Param.PageSize, pageSize, "pageSize");

            /// <summary><see cref="Param.MaxPages"/>.</summary>
            public Builder MaxPages(long maxPages) => Set(LibAttn.Param.MaxPages, maxPages, "maxPages");

            /// <summary><see cref="Param.BatchInvariant"/>.</summary>
            public Builder BatchInvariant(bool on = true) => Set(LibAttn.Param.BatchInvariant, on ? 1L : 0L, "on");

            /// <summary><see cref="Param.Compute"/>.</summary>
            public Builder Compute(Compute mode) => Set(LibAttn.Param.Compute, (long)mode, "mode");

            /// <summary><see cref="Param.Diagonal"/>.</summary>
            public Builder Diagonal(Diagonal d) => Set(LibAttn.Param.Diagonal, (long)d, "d");

            /// <summary><see cref="Param.AlibiForm"/>.</summary>
            public Builder AlibiForm(AlibiForm form) => Set(LibAttn.Param.AlibiForm, (long)form, "form");

            /// <summary>attn_desc_set_int of any parameter.</summary>
            public Builder Set(Param param, long value) => Set(param, value, "value");

            /// <summary>attn_desc_set_float of any parameter.</summary>
            public Builder Set(Param param, double value) => Set(param, value, "value");

            Builder Set(Param param, object value, string argName)
            {
                Check(param, value, argName);
                parameters[(int)param] = value;
                return this;
            }

            void Check(Param param, object value, string argName)
            {
                if (probe == null)
                {
                    IntPtr raw;
                    Errors.Check(AttnNative.attn_desc_create(out raw, 1, 1, 1, 1, 1, 1));
                    probe = new AttnDescHandle(raw);
                }
                Errors.Check(Apply(probe.DangerousGetHandle(), (int)param, value),
                             (uint)param < (uint)ParamCount ? argName : "param", true);
            }

            static attn_status Apply(IntPtr desc, int param, object value) =>
                value is long ? AttnNative.attn_desc_set_int(desc, (attn_param)param, (long)value)
                              : AttnNative.attn_desc_set_float(desc, (attn_param)param, (double)value);

            /// <summary>attn_desc_set_strides of Q, K, V, Out, Bias, the int8 scales or the ALiBi
            /// slopes, in elements.</summary>
            public Builder Strides(Operand which, long batchStride, long headStride, long rowStride)
            {
                strides[OperandIndex(which, "which")] = new[] {
                    Size(batchStride, "batchStride"), Size(headStride, "headStride"),
                    Size(rowStride, "rowStride") };
                return this;
            }

            /// <summary>Creates the descriptor (attn_desc_create, then the parameters in
            /// <see cref="Param"/> order, then the strides). Dispose it when done.</summary>
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
                        Errors.Check(Apply(raw, p.Key, p.Value));
                    for (int i = 0; i < OperandCount; i++)
                        if (strides[i] != null)
                            Errors.Check(AttnNative.attn_desc_set_strides(
                                raw, (attn_operand)i, (ulong)strides[i][0], (ulong)strides[i][1],
                                (ulong)strides[i][2]));
                    return new AttentionDesc(owner, this);
                }
                catch
                {
                    owner.Dispose();
                    throw;
                }
            }

            // Sizes and strides are size_t in C: a negative one is refused here.
            static long Size(long value, string name) =>
                Errors.InRange(value, name, value >= 0, "must be >= 0");
        }
    }
}
