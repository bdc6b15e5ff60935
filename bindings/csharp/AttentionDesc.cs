// libattn C# binding: the descriptor API (batches, heads, GQA, causal modes, strides, masks).
using System;
using System.Threading;

[assembly: System.Runtime.CompilerServices.InternalsVisibleTo("LibAttn.Tests")]

namespace LibAttn
{
    /// <summary>
    /// An immutable attention problem: sizes, causal rule, scale and strides, built with
    /// <see cref="Builder"/>. Element (b, h, s, d) of Q/K/V/OUT sits at
    /// b*batchStride + h*headStride + s*rowStride + d (default: contiguous
    /// [batch][heads][seq][head_dim]).
    /// <para>Thread safety: one descriptor may be used by any number of threads at once.
    /// <see cref="Dispose"/> may be called while other threads are inside
    /// <see cref="Forward(float[], float[], float[], bool[], bool[], float[], float[])"/>: those
    /// calls finish normally and the native descriptor is freed after the last of them; every
    /// call that starts after Dispose throws <see cref="ObjectDisposedException"/>.</para>
    /// <para>Arrays are pinned for the duration of the call and passed to the library without a
    /// copy. Every array is checked against <see cref="RequiredLen"/> before the call: a shorter
    /// array is an <see cref="ArgumentException"/>, never an overrun; a longer one is allowed
    /// (elements past the required length are neither read nor written).</para>
    /// </summary>
    public sealed class AttentionDesc : IDisposable
    {
        const int OperandCount = 8;

        readonly AttnDescHandle handle;
        // Set once by Dispose. SafeHandle alone is not enough: while any call holds a reference,
        // SafeHandle.Dispose only marks it disposed and DangerousAddRef keeps succeeding, so
        // under continuous traffic from other threads the handle would never be released.
        int disposed;
        // attn_desc_required_len for every operand, read once when built: the descriptor can no
        // longer change (the builder applies all configuration before handing it out).
        readonly ulong[] requiredLen;

        public long Batch { get; }
        public long HeadsQ { get; }
        public long HeadsKv { get; }
        public long SeqQ { get; }
        public long SeqK { get; }
        public long HeadDim { get; }
        public Causal Causal { get; }

        AttentionDesc(AttnDescHandle handle, Builder b)
        {
            this.handle = handle;
            Batch = b.batch;
            HeadsQ = b.headsQ;
            HeadsKv = b.headsKv;
            SeqQ = b.seqQ;
            SeqK = b.seqK;
            HeadDim = b.headDim;
            Causal = b.causal ?? Causal.None;
            requiredLen = new ulong[OperandCount];
            IntPtr desc = handle.DangerousGetHandle();
            for (int i = 0; i < OperandCount; i++)
            {
                requiredLen[i] = AttnNative.attn_desc_required_len(desc, (Operand)i);
                if (requiredLen[i] == 0)
                    throw AttentionException.FromLastError(Status.Internal);
            }
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

        /// <summary>Number of elements (floats, or bools for the masks) the array for
        /// <paramref name="which"/> must hold, from the sizes and strides
        /// (attn_desc_required_len).</summary>
        /// <exception cref="AttentionException">which is not an Operand value.</exception>
        /// <exception cref="ObjectDisposedException">the descriptor was disposed.</exception>
        public ulong RequiredLen(Operand which)
        {
            IntPtr desc = Acquire();
            try
            {
                if ((uint)which < OperandCount)
                    return requiredLen[(int)which];
                ulong n = AttnNative.attn_desc_required_len(desc, which);
                if (n == 0)
                    throw AttentionException.FromLastError(Status.InvalidArgument);
                return n;
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
        /// <param name="v">[batch][heads_kv][seq_k][head_dim] (V strides).</param>
        /// <param name="keyValid">[batch][seq_k], true = real token, false = padding (never read);
        /// null = all real.</param>
        /// <param name="allowed">[seq_q][seq_k], true = query i may see key j, for every batch
        /// and head; null = all allowed.</param>
        /// <param name="output">[batch][heads_q][seq_q][head_dim] (OUT strides), written; only
        /// the elements the strides address. Must not be one of the inputs.</param>
        /// <param name="lse">[batch][heads_q][seq_q] log-sum-exp of the scaled visible scores
        /// (-infinity for a row with no visible key), written; null = not wanted.</param>
        /// <exception cref="ArgumentNullException">q, k, v or output is null.</exception>
        /// <exception cref="ArgumentException">an array is shorter than RequiredLen.</exception>
        /// <exception cref="AttentionException">the library refused (e.g. output overlaps an
        /// input).</exception>
        /// <exception cref="ObjectDisposedException">the descriptor was disposed.</exception>
        public void Forward(float[] q, float[] k, float[] v, bool[] keyValid, bool[] allowed,
                            float[] output, float[] lse = null)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckRequired(q, "q", Operand.Q);
                CheckRequired(k, "k", Operand.K);
                CheckRequired(v, "v", Operand.V);
                CheckOptional(keyValid, "keyValid", Operand.KeyValid);
                CheckOptional(allowed, "allowed", Operand.Allowed);
                CheckRequired(output, "output", Operand.Out);
                CheckOptional(lse, "lse", Operand.Lse);
                Status status = AttnNative.attn_forward(desc, q, k, v, keyValid, allowed, output,
                                                        lse);
                if (status != Status.Ok)
                    throw AttentionException.FromLastError(status);
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>
        /// Attention forward pass returning a new output array of RequiredLen(Operand.Out)
        /// floats (elements the OUT strides do not address are 0). See
        /// <see cref="Forward(float[], float[], float[], bool[], bool[], float[], float[])"/>.
        /// </summary>
        public float[] Forward(float[] q, float[] k, float[] v, bool[] keyValid = null,
                               bool[] allowed = null)
        {
            float[] output = new float[RequiredLen(Operand.Out)];
            Forward(q, k, v, keyValid, allowed, output, null);
            return output;
        }

        /// <summary>
        /// The attention weights (attn_weights) into a caller-owned array:
        /// weights[b][h][i][j] = softmax over visible keys j of scale * q_i . k_j; hidden keys get
        /// exactly 0.
        /// </summary>
        /// <param name="q">As in Forward.</param>
        /// <param name="k">As in Forward.</param>
        /// <param name="keyValid">As in Forward; null = all real.</param>
        /// <param name="allowed">As in Forward; null = all allowed.</param>
        /// <param name="weights">[batch][heads_q][seq_q][seq_k] contiguous, written.</param>
        /// <exception cref="ArgumentNullException">q, k or weights is null.</exception>
        /// <exception cref="ArgumentException">an array is shorter than RequiredLen.</exception>
        /// <exception cref="AttentionException">the library refused.</exception>
        /// <exception cref="ObjectDisposedException">the descriptor was disposed.</exception>
        public void Weights(float[] q, float[] k, bool[] keyValid, bool[] allowed, float[] weights)
        {
            IntPtr desc = Acquire();
            try
            {
                CheckRequired(q, "q", Operand.Q);
                CheckRequired(k, "k", Operand.K);
                CheckOptional(keyValid, "keyValid", Operand.KeyValid);
                CheckOptional(allowed, "allowed", Operand.Allowed);
                CheckRequired(weights, "weights", Operand.Weights);
                Status status = AttnNative.attn_weights(desc, q, k, keyValid, allowed, weights);
                if (status != Status.Ok)
                    throw AttentionException.FromLastError(status);
            }
            finally
            {
                handle.DangerousRelease();
            }
        }

        /// <summary>The attention weights in a new array of RequiredLen(Operand.Weights) floats.
        /// See <see cref="Weights(float[], float[], bool[], bool[], float[])"/>.</summary>
        public float[] Weights(float[] q, float[] k, bool[] keyValid = null, bool[] allowed = null)
        {
            float[] weights = new float[RequiredLen(Operand.Weights)];
            Weights(q, k, keyValid, allowed, weights);
            return weights;
        }

        /// <summary>Frees the native descriptor (after any call still in flight on another
        /// thread). Idempotent.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref disposed, 1) == 0)
                handle.Dispose();
        }

        // Takes a reference on the handle for the duration of one call (the caller releases it
        // in finally). A call that starts after Dispose throws; a call that took its reference
        // before Dispose finishes normally and the last release frees the native descriptor.
        IntPtr Acquire()
        {
            bool added = false;
            if (Volatile.Read(ref disposed) == 0)
            {
                try
                {
                    handle.DangerousAddRef(ref added);
                }
                catch (ObjectDisposedException)
                {
                    added = false;
                }
                if (added && Volatile.Read(ref disposed) != 0)
                {
                    handle.DangerousRelease(); // Dispose came in between: do not start
                    added = false;
                }
            }
            if (!added)
                throw new ObjectDisposedException("AttentionDesc",
                                                  "the AttentionDesc has been disposed");
            return handle.DangerousGetHandle();
        }

        void CheckRequired(float[] array, string name, Operand which)
        {
            if (array == null)
                throw new ArgumentNullException(name, name + " must not be null");
            CheckLength(array.LongLength, name, which);
        }

        void CheckOptional(Array array, string name, Operand which)
        {
            if (array != null)
                CheckLength(array.LongLength, name, which);
        }

        void CheckLength(long length, string name, Operand which)
        {
            ulong required = requiredLen[(int)which];
            if ((ulong)length < required)
                throw new ArgumentException(name + " has " + length
                                                + " elements but the descriptor requires at least "
                                                + required + " (Operand." + which + ")",
                                            name);
        }

        /// <summary>
        /// Builds an <see cref="AttentionDesc"/>. Defaults: batch 1, 1 query and 1 key/value
        /// head, <see cref="LibAttn.Causal.None"/>, scale 1/sqrt(headDim), contiguous
        /// [batch][heads][seq][head_dim] strides. SeqLen and HeadDim must be set. Sizes and
        /// strides are range-checked by the library in <see cref="Build"/> (AttentionException
        /// with its message); negative values are rejected at once
        /// (ArgumentOutOfRangeException). A builder may build any number of descriptors.
        /// </summary>
        public sealed class Builder
        {
            internal long batch = 1, headsQ = 1, headsKv = 1, seqQ, seqK, headDim;
            internal Causal? causal;
            float? scale;
            readonly long[][] strides = new long[4][];
            // Strides for operands outside Q/K/V/OUT, kept to let the library reject them.
            readonly System.Collections.Generic.List<Tuple<Operand, long, long, long>> otherStrides =
                new System.Collections.Generic.List<Tuple<Operand, long, long, long>>();

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

            /// <summary>Vector size per head.</summary>
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
            public Builder Causal(Causal causal)
            {
                this.causal = causal;
                return this;
            }

            /// <summary>Score scale applied to q.k (any finite value; default
            /// 1/sqrt(headDim)).</summary>
            public Builder Scale(float scale)
            {
                this.scale = scale;
                return this;
            }

            /// <summary>Element strides of Q, K, V or Out: element (b, h, s, d) is at
            /// b*batchStride + h*headStride + s*rowStride + d. 0 broadcasts (inputs only).</summary>
            public Builder Strides(Operand which, long batchStride, long headStride, long rowStride)
            {
                NonNegative(batchStride, "batchStride");
                NonNegative(headStride, "headStride");
                NonNegative(rowStride, "rowStride");
                if ((uint)which < 4)
                    strides[(int)which] = new long[] { batchStride, headStride, rowStride };
                else
                    otherStrides.Add(Tuple.Create(which, batchStride, headStride, rowStride));
                return this;
            }

            /// <summary>Creates the descriptor. Dispose it (using) when done.</summary>
            /// <exception cref="AttentionException">the library rejected a size, the causal
            /// rule, the scale or strides (its message names the argument).</exception>
            public AttentionDesc Build()
            {
                IntPtr raw;
                Status status = AttnNative.attn_desc_create(out raw, (ulong)batch, (ulong)headsQ,
                                                            (ulong)headsKv, (ulong)seqQ,
                                                            (ulong)seqK, (ulong)headDim);
                if (status != Status.Ok)
                    throw AttentionException.FromLastError(status);
                var owner = new AttnDescHandle(raw);
                try
                {
                    if (causal.HasValue)
                        Check(AttnNative.attn_desc_set_causal(raw, causal.Value));
                    if (scale.HasValue)
                        Check(AttnNative.attn_desc_set_scale(raw, scale.Value));
                    for (int i = 0; i < 4; i++)
                        if (strides[i] != null)
                            Check(AttnNative.attn_desc_set_strides(
                                raw, (Operand)i, (ulong)strides[i][0], (ulong)strides[i][1],
                                (ulong)strides[i][2]));
                    foreach (var s in otherStrides)
                        Check(AttnNative.attn_desc_set_strides(raw, s.Item1, (ulong)s.Item2,
                                                               (ulong)s.Item3, (ulong)s.Item4));
                    return new AttentionDesc(owner, this);
                }
                catch
                {
                    owner.Dispose();
                    throw;
                }
            }

            static void Check(Status status)
            {
                if (status != Status.Ok)
                    throw AttentionException.FromLastError(status);
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
