// libattn C# binding: the per-call operands of the extensible call (attn_args, since 0.2).
using System;
using System.Buffers;
using System.Runtime.InteropServices;
using System.Threading;

namespace LibAttn
{
    /// <summary>
    /// The operands of one <see cref="AttentionDesc.Run(Op, AttentionArgs)"/> call (attn_args):
    /// <see cref="Operand"/> -> array. Float inputs and outputs take <c>float[]</c> (or a
    /// <see cref="Memory{T}"/> / <see cref="ReadOnlyMemory{T}"/> slice), the masks KeyValid,
    /// Allowed and QueryValid <c>bool[]</c> or <c>byte[]</c> (nonzero = true), the int operands
    /// SeqLensK, CuSeqlensQ, CuSeqlensK and BlockTable <c>int[]</c> (or
    /// <see cref="ReadOnlyMemory{T}"/>).
    /// <para>Storage types: Q, K and V may also be 16-bit, bound as <c>ushort[]</c> bit patterns
    /// with <see cref="BindF16(Operand, ushort[])"/> (IEEE binary16) or
    /// <see cref="BindBF16(Operand, ushort[])"/> (bfloat16), and K and V symmetric int8 with
    /// <see cref="Bind(Operand, sbyte[])"/> plus their per-row float scales
    /// <see cref="Operand.KScale"/> / <see cref="Operand.VScale"/> (bound with
    /// <see cref="Bind(Operand, float[])"/>). Lengths count elements, as for float; the values
    /// are widened to fp32 on load and the result is fp32 attention over the widened values.
    /// <see cref="Attention.ConvertF32ToF16(ReadOnlySpan{float}, Span{ushort})"/>,
    /// <see cref="Attention.ConvertF32ToBF16(ReadOnlySpan{float}, Span{ushort})"/> and
    /// <see cref="Attention.QuantizeI8(ReadOnlySpan{float}, long, long, Span{sbyte}, Span{float})"/>
    /// fill such caches. (Mono has no System.Half: 16-bit values are their bit patterns.)</para>
    /// <para>Gradients (<see cref="Op.Backward"/>): after a forward with Out and Lse bound, bind
    /// <see cref="Operand.DOut"/> (an input) and any of the outputs <see cref="Operand.DQ"/>,
    /// <see cref="Operand.DK"/>, <see cref="Operand.DV"/>, <see cref="Operand.DBias"/> (with
    /// Bias), <see cref="Operand.DSinks"/> (with Sinks), zero-filled, each in the layout of its
    /// forward counterpart, and run <see cref="Op.Backward"/> on the same object; fp32 Q, K, V
    /// only.</para>
    /// <para>The same object carries the operands of
    /// <see cref="AttentionDesc.KvAppend(AttentionArgs, float[], float[])"/> (NewK, NewV and the
    /// int operands) and each side of <see cref="AttentionDesc.Merge"/> (Out, Lse).</para>
    /// <code>
    /// using (var args = new AttentionArgs())
    /// {
    ///     args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v)
    ///         .Bind(Operand.SeqLensK, lens).Bind(Operand.Out, output);
    ///     desc.Run(Op.Forward, args);
    /// }
    /// </code>
    /// <para>Binding only records the array (the object keeps it alive; nothing is pinned or
    /// copied). Run checks every operand the operation reads against
    /// <see cref="AttentionDesc.RequiredLen"/> (a longer array is fine, a shorter or empty one
    /// is an <see cref="ArgumentException"/>), pins the arrays with <c>fixed</c> for that call
    /// only, hands the library their addresses and lengths, and unbinds them again before
    /// returning: zero copies, no pointer outlives the call. null unbinds: an operand not bound
    /// is "not given"; an empty array or an empty Memory never is. In varlen mode the lengths
    /// of Q, Out, Lse, NewK, NewV (and K, V without pages) come from the bound cu_seqlens.</para>
    /// <para>One args object may serve many descriptors and many calls. Calls that share one
    /// args object run one at a time (Run takes its lock); use one per thread to run in
    /// parallel. <see cref="Dispose"/> frees the native object (after an in-flight call); the
    /// finalizer of its SafeHandle does so if it is never disposed.</para>
    /// </summary>
    public sealed class AttentionArgs : IDisposable
    {
        // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
        static AttentionArgs()
        {
            NativeLoader.Preload();
        }

        const int N = AttentionDesc.OperandCount;
        const int Q = (int)Operand.Q, K = (int)Operand.K, V = (int)Operand.V,
                  Out = (int)Operand.Out, Lse = (int)Operand.Lse,
                  CuQ = (int)Operand.CuSeqlensQ, CuK = (int)Operand.CuSeqlensK,
                  NewK = (int)Operand.NewK, NewV = (int)Operand.NewV,
                  KScale = (int)Operand.KScale, VScale = (int)Operand.VScale;

        // The library's element kind of each operand, and its name in the library's messages.
        enum Elem : byte { F32In, F32Out, U8, I32 }
        static readonly Elem[] Kinds = {
            Elem.F32In,  Elem.F32In, Elem.F32In, Elem.F32Out, Elem.F32Out, Elem.F32Out,
            Elem.U8,     Elem.U8,    Elem.F32In, Elem.F32In,  Elem.F32In,  Elem.U8,
            Elem.I32,    Elem.F32Out, Elem.I32,   Elem.I32,    Elem.I32,     Elem.F32In,
            Elem.F32In,
            Elem.F32In,  Elem.F32Out, Elem.F32Out, Elem.F32Out, Elem.F32Out, Elem.F32Out, // DOut..
            Elem.F32In,  Elem.F32In }; // KScale, VScale
        internal static readonly string[] Names = {
            "q",    "k",            "v",     "out",         "lse",        "weights", "key_valid",
            "allowed", "bias", "alibi_slopes", "sinks", "query_valid", "seq_lens_k", "key_mass",
            "cu_seqlens_q", "cu_seqlens_k", "block_table", "new_k", "new_v",
            "dout", "dq", "dk", "dv", "dbias", "dsinks", "k_scale", "v_scale" };
        // Operands each call reads or writes (the library ignores the others): as capi/attn.cpp.
        // By Op, then KvAppend (cu_seqlens_k only for a varlen pack without pages), and the two
        // sides of Merge.
        const int UseKv = 3, UseKvPacked = 4, UseAcc = 5, UsePart = 6;
        static readonly bool[][] Used = {
            UsedBy(Op.Forward), UsedBy(Op.Weights), UsedBy(Op.Backward),
            UsedSet(Operand.NewK, Operand.NewV, Operand.SeqLensK, Operand.CuSeqlensQ,
                    Operand.BlockTable),
            UsedSet(Operand.NewK, Operand.NewV, Operand.SeqLensK, Operand.CuSeqlensQ,
                    Operand.BlockTable, Operand.CuSeqlensK),
            UsedSet(Operand.Out, Operand.Lse, Operand.CuSeqlensQ),
            UsedSet(Operand.Out, Operand.Lse) };

        enum Pin : byte { None, Float, Bool, Byte, Int, UShort, SByte, Handle }
        // How Q, K or V is stored (the setter that binds it); F32 for every other operand.
        enum Storage : byte { F32, F16, BF16, I8 }
        static readonly string[] StoreSetter = { "Bind", "BindF16", "BindBF16", "Bind(sbyte[])" };
        struct Slot
        {
            public Pin pin;
            public Storage store;
            public Array array;      // Float/Bool/Byte/Int: pinned with `fixed` during Run
            public int offset, count; // the bound window of `array` (or of the Memory)
            public Func<MemoryHandle> handle; // Handle: a Memory not backed by an array
            public object memory;     // Handle of an int operand: its ReadOnlyMemory<int> (boxed),
                                      // to read cu_seqlens values
        }

        static long lastId;
        readonly long id = Interlocked.Increment(ref lastId); // lock order of Merge
        readonly AttnArgsHandle native;
        int disposed;
        readonly object sync = new object();
        readonly Slot[] slots = new Slot[N];
        // State of the call in progress (under sync): the operands to pin, in order, and the
        // lengths this call needs.
        readonly int[] runOrder = new int[N];
        int runCount;
        readonly ulong[] need = new ulong[N];

        /// <summary>An empty binding object (attn_args_create).</summary>
        /// <exception cref="AttentionException">out of memory.</exception>
        public AttentionArgs()
        {
            IntPtr raw;
            Errors.Check(AttnNative.attn_args_create(out raw));
            native = new AttnArgsHandle(raw);
        }

        /// <summary>True once <see cref="Dispose"/> has been called.</summary>
        public bool IsDisposed
        {
            get { return Volatile.Read(ref disposed) != 0; }
        }

        internal bool NativeReleased
        {
            get { return native.IsClosed; }
        }

        /// <summary>Binds a float operand: an input (Q, K, V, Bias, AlibiSlopes, Sinks, NewK,
        /// NewV, DOut, KScale, VScale) or an output (Out, Lse, Weights, KeyMass, DQ, DK, DV,
        /// DBias, DSinks); null unbinds it.</summary>
        /// <exception cref="ArgumentOutOfRangeException">which is not an Operand value.</exception>
        /// <exception cref="ArgumentException">which is not a float operand.</exception>
        public AttentionArgs Bind(Operand which, float[] data)
        {
            int w = Check(which, data == null, "float[]", Elem.F32In, Elem.F32Out);
            return Store(w, data, Pin.Float, 0, data == null ? 0 : data.Length);
        }

        /// <summary>Binds a float operand (input or output) to a window of memory: an array
        /// slice is pinned with <c>fixed</c>, other memory through
        /// <see cref="Memory{T}.Pin"/>, for each call.</summary>
        public AttentionArgs Bind(Operand which, Memory<float> data)
        {
            int w = Check(which, false, "Memory<float>", Elem.F32In, Elem.F32Out);
            ArraySegment<float> seg;
            if (MemoryMarshal.TryGetArray<float>(data, out seg))
                return Store(w, seg.Array, Pin.Float, seg.Offset, seg.Count);
            return StoreHandle(w, data.Pin, data.Length);
        }

        /// <summary>Binds a float input (Q, K, V, Bias, AlibiSlopes, Sinks, NewK, NewV, DOut,
        /// KScale, VScale) to read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<float> data)
        {
            int w = Check(which, false, "ReadOnlyMemory<float>", Elem.F32In, Elem.F32In);
            ArraySegment<float> seg;
            if (MemoryMarshal.TryGetArray(data, out seg))
                return Store(w, seg.Array, Pin.Float, seg.Offset, seg.Count);
            return StoreHandle(w, data.Pin, data.Length);
        }

        /// <summary>Binds Q, K or V stored as IEEE binary16 (f16) bit patterns
        /// (attn_args_set_f16); null unbinds it. The length counts elements, as for float; the
        /// array is pinned for each call, never copied.
        /// <see cref="Attention.ConvertF32ToF16(ReadOnlySpan{float}, Span{ushort})"/> fills
        /// it.</summary>
        /// <exception cref="ArgumentOutOfRangeException">which is not an Operand value.</exception>
        /// <exception cref="ArgumentException">which is not Q, K or V.</exception>
        public AttentionArgs BindF16(Operand which, ushort[] data)
        {
            int w = CheckStored(which, data == null, Storage.F16);
            return Store(w, data, Pin.UShort, 0, data == null ? 0 : data.Length, Storage.F16);
        }

        /// <summary>Binds Q, K or V stored as f16 bit patterns to read-only memory.</summary>
        public AttentionArgs BindF16(Operand which, ReadOnlyMemory<ushort> data)
        {
            return BindStored(CheckStored(which, false, Storage.F16), data, Storage.F16);
        }

        /// <summary>Binds Q, K or V stored as bfloat16 (bf16) bit patterns
        /// (attn_args_set_bf16); null unbinds it. As
        /// <see cref="BindF16(Operand, ushort[])"/>;
        /// <see cref="Attention.ConvertF32ToBF16(ReadOnlySpan{float}, Span{ushort})"/> fills
        /// it.</summary>
        /// <exception cref="ArgumentOutOfRangeException">which is not an Operand value.</exception>
        /// <exception cref="ArgumentException">which is not Q, K or V.</exception>
        public AttentionArgs BindBF16(Operand which, ushort[] data)
        {
            int w = CheckStored(which, data == null, Storage.BF16);
            return Store(w, data, Pin.UShort, 0, data == null ? 0 : data.Length, Storage.BF16);
        }

        /// <summary>Binds Q, K or V stored as bf16 bit patterns to read-only memory.</summary>
        public AttentionArgs BindBF16(Operand which, ReadOnlyMemory<ushort> data)
        {
            return BindStored(CheckStored(which, false, Storage.BF16), data, Storage.BF16);
        }

        /// <summary>Binds K or V stored as symmetric int8 (attn_args_set_i8); null unbinds it.
        /// Element x of a row is <c>(float)data[x] * scale</c> with the row's scale from
        /// <see cref="Operand.KScale"/> / <see cref="Operand.VScale"/> (float
        /// [batch][heads_kv][seq_k], bind it with <see cref="Bind(Operand, float[])"/>: Run
        /// requires it with an int8 K / V and refuses it otherwise).
        /// <see cref="Attention.QuantizeI8(ReadOnlySpan{float}, long, long, Span{sbyte}, Span{float})"/>
        /// fills both.</summary>
        /// <exception cref="ArgumentOutOfRangeException">which is not an Operand value.</exception>
        /// <exception cref="ArgumentException">which is not K or V.</exception>
        public AttentionArgs Bind(Operand which, sbyte[] data)
        {
            int w = CheckStored(which, data == null, Storage.I8);
            return Store(w, data, Pin.SByte, 0, data == null ? 0 : data.Length, Storage.I8);
        }

        /// <summary>Binds K or V stored as int8 to read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<sbyte> data)
        {
            int w = CheckStored(which, false, Storage.I8);
            ArraySegment<sbyte> seg;
            if (MemoryMarshal.TryGetArray(data, out seg))
                return Store(w, seg.Array, Pin.SByte, seg.Offset, seg.Count, Storage.I8);
            return StoreHandle(w, data.Pin, data.Length, null, Storage.I8);
        }

        AttentionArgs BindStored(int w, ReadOnlyMemory<ushort> data, Storage store)
        {
            ArraySegment<ushort> seg;
            if (MemoryMarshal.TryGetArray(data, out seg))
                return Store(w, seg.Array, Pin.UShort, seg.Offset, seg.Count, store);
            return StoreHandle(w, data.Pin, data.Length, null, store);
        }

        /// <summary>Binds a mask (KeyValid, Allowed, QueryValid): true = real / allowed; null
        /// unbinds it.</summary>
        public AttentionArgs Bind(Operand which, bool[] mask)
        {
            int w = Check(which, mask == null, "bool[]", Elem.U8, Elem.U8);
            return Store(w, mask, Pin.Bool, 0, mask == null ? 0 : mask.Length);
        }

        /// <summary>Binds a mask (KeyValid, Allowed, QueryValid) of bytes: nonzero = true; null
        /// unbinds it.</summary>
        public AttentionArgs Bind(Operand which, byte[] mask)
        {
            int w = Check(which, mask == null, "byte[]", Elem.U8, Elem.U8);
            return Store(w, mask, Pin.Byte, 0, mask == null ? 0 : mask.Length);
        }

        /// <summary>Binds a mask to read-only memory of bools.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<bool> mask)
        {
            int w = Check(which, false, "ReadOnlyMemory<bool>", Elem.U8, Elem.U8);
            ArraySegment<bool> seg;
            if (MemoryMarshal.TryGetArray(mask, out seg))
                return Store(w, seg.Array, Pin.Bool, seg.Offset, seg.Count);
            return StoreHandle(w, mask.Pin, mask.Length);
        }

        /// <summary>Binds a mask to read-only memory of bytes (nonzero = true).</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<byte> mask)
        {
            int w = Check(which, false, "ReadOnlyMemory<byte>", Elem.U8, Elem.U8);
            ArraySegment<byte> seg;
            if (MemoryMarshal.TryGetArray(mask, out seg))
                return Store(w, seg.Array, Pin.Byte, seg.Offset, seg.Count);
            return StoreHandle(w, mask.Pin, mask.Length);
        }

        /// <summary>Binds an int operand; null unbinds it. SeqLensK: [batch] key counts, each in
        /// [0, seq_k] (keys at or past it are padding, never read; with a paged cache the keys in
        /// each sequence's cache). CuSeqlensQ / CuSeqlensK: [batch + 1] prefix sums of the
        /// sequence lengths, cu[0] = 0 (varlen). BlockTable: [batch][max_pages] page ids, -1 for
        /// an unused slot (paged).</summary>
        public AttentionArgs Bind(Operand which, int[] seqLens)
        {
            int w = Check(which, seqLens == null, "int[]", Elem.I32, Elem.I32);
            return Store(w, seqLens, Pin.Int, 0, seqLens == null ? 0 : seqLens.Length);
        }

        /// <summary>Binds an int operand (SeqLensK, CuSeqlensQ, CuSeqlensK, BlockTable) to
        /// read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<int> seqLens)
        {
            int w = Check(which, false, "ReadOnlyMemory<int>", Elem.I32, Elem.I32);
            ArraySegment<int> seg;
            if (MemoryMarshal.TryGetArray(seqLens, out seg))
                return Store(w, seg.Array, Pin.Int, seg.Offset, seg.Count);
            return StoreHandle(w, seqLens.Pin, seqLens.Length, seqLens);
        }

        /// <summary>Forgets one operand (it is "not given" again).</summary>
        public AttentionArgs Unbind(Operand which)
        {
            int w = AttentionDesc.OperandIndex(which, "which");
            return Store(w, null, Pin.None, 0, 0);
        }

        /// <summary>Forgets every operand.</summary>
        public AttentionArgs Clear()
        {
            lock (sync)
            {
                ThrowIfDisposed();
                Array.Clear(slots, 0, N);
            }
            return this;
        }

        /// <summary>True when <paramref name="which"/> is bound.</summary>
        public bool IsBound(Operand which)
        {
            int w = AttentionDesc.OperandIndex(which, "which");
            lock (sync)
                return slots[w].pin != Pin.None;
        }

        /// <summary>Frees the native object (after a call still in flight). Idempotent. The
        /// bound arrays are the caller's and stay untouched.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref disposed, 1) == 0)
                native.Dispose();
        }

        // ---- Run, KvAppend, Merge -----------------------------------------------------------

        enum Native : byte { Run, KvAppend, Merge }

        // One native call: what it is, the args objects whose operands it pins (b: Merge's part,
        // null when it is acc itself), and what the innermost level hands the library.
        struct Call
        {
            public Native what;
            public IntPtr desc;
            public Op op;
            public AttentionArgs a, b;
            public IntPtr ha, hb;
            public IntPtr kCache, vCache;
            public ulong kLen, vLen;
            public bool bound;       // some operand is bound in a native args object
            public Exception error;  // the library's failure, thrown after the pins are gone
        }

        // Called by AttentionDesc.Run with the descriptor's reference held.
        internal void RunOn(AttentionDesc d, IntPtr desc, Op op)
        {
            lock (sync)
            {
                var c = new Call { what = Native.Run, desc = desc, op = op, a = this };
                c.ha = Handles.Acquire(native, ref disposed, "AttentionArgs");
                try
                {
                    Needs(d);
                    Plan(Used[(int)op], need, "", null);
                    PinFrom(ref c, 0);
                }
                finally
                {
                    if (c.bound)
                        Unbind(ref c);
                    native.DangerousRelease();
                }
                if (c.error != null)
                    throw c.error;
            }
        }

        // Called by AttentionDesc.KvAppend with the descriptor's reference held and the caches
        // pinned.
        internal void KvAppendOn(AttentionDesc d, IntPtr desc, IntPtr kCache, long kLen,
                                 IntPtr vCache, long vLen)
        {
            lock (sync)
            {
                var c = new Call { what = Native.KvAppend, desc = desc, a = this, kCache = kCache,
                                   kLen = (ulong)kLen, vCache = vCache, vLen = (ulong)vLen };
                c.ha = Handles.Acquire(native, ref disposed, "AttentionArgs");
                try
                {
                    Needs(d);
                    Plan(Used[d.Varlen && d.PageSize == 0 ? UseKvPacked : UseKv], need, "", null);
                    // The caches stand where K and V stand in a run (one page each at least).
                    AttentionDesc.CheckLength(kLen, "kCache", Math.Max(need[K], 1UL));
                    AttentionDesc.CheckLength(vLen, "vCache", Math.Max(need[V], 1UL));
                    PinFrom(ref c, 0);
                }
                finally
                {
                    if (c.bound)
                        Unbind(ref c);
                    native.DangerousRelease();
                }
                if (c.error != null)
                    throw c.error;
            }
        }

        // Called by AttentionDesc.Merge with the descriptor's reference held. Both objects are
        // locked, always in the order of their ids (two merges of the same pair in opposite
        // roles cannot deadlock).
        internal static void MergeOn(AttentionDesc d, IntPtr desc, AttentionArgs acc,
                                     AttentionArgs part)
        {
            bool same = ReferenceEquals(acc, part);
            AttentionArgs first = acc.id <= part.id ? acc : part;
            AttentionArgs second = ReferenceEquals(first, acc) ? part : acc;
            lock (first.sync)
            lock (second.sync)
            {
                var c = new Call { what = Native.Merge, desc = desc, a = acc,
                                   b = same ? null : part };
                c.ha = Handles.Acquire(acc.native, ref acc.disposed, "AttentionArgs");
                bool partHeld = false;
                try
                {
                    if (!same)
                    {
                        c.hb = Handles.Acquire(part.native, ref part.disposed, "AttentionArgs");
                        partHeld = true;
                    }
                    // acc's cu_seqlens_q sizes both sides, as in the library. One object as both
                    // sides is passed as it is: the library reports the overlap.
                    acc.Needs(d);
                    acc.Plan(Used[UseAcc], acc.need, "acc's ", "acc");
                    if (!same)
                        part.Plan(Used[UsePart], acc.need, "part's ", "part");
                    PinFrom(ref c, 0);
                }
                finally
                {
                    if (c.bound)
                        Unbind(ref c);
                    if (partHeld)
                        part.native.DangerousRelease();
                    acc.native.DangerousRelease();
                }
                if (c.error != null)
                    throw c.error;
            }
        }

        // The lengths this call needs (need[]): the descriptor's, except in varlen mode, where
        // the bound cu_seqlens give the pack's token counts. Bad or missing cu_seqlens leave
        // those lengths unchecked here (0): the library judges cu_seqlens first and names the
        // problem.
        void Needs(AttentionDesc d)
        {
            Array.Copy(d.requiredLen, need, N);
            if (d.Varlen)
                PackNeeds(d);
            // Each gradient spans what its forward counterpart does (varlen: this call's pack).
            need[(int)Operand.DOut] = need[Out];
            need[(int)Operand.DQ] = need[Q];
            need[(int)Operand.DK] = need[K];
            need[(int)Operand.DV] = need[V];
        }

        static readonly int[] PackedKv = { K, V, KScale, VScale };

        void PackNeeds(AttentionDesc d)
        {
            long totalQ;
            if (Total(CuQ, d.Batch, d.SeqQ, out totalQ))
            {
                need[Q] = d.PackNeed(Q, totalQ);
                need[Out] = d.PackNeed(Out, totalQ);
                need[Lse] = (ulong)(d.HeadsQ * totalQ);
                need[NewK] = (ulong)(totalQ * d.HeadsKv * d.HeadDim);
                need[NewV] = (ulong)(totalQ * d.HeadsKv * d.HeadDimV);
            }
            else
            {
                need[Q] = need[Out] = need[Lse] = need[NewK] = need[NewV] = 0;
            }
            if (d.PageSize != 0)
                return; // paged K/V: one page each, as the descriptor says
            long totalK;
            bool known = Total(CuK, d.Batch, d.SeqK, out totalK);
            foreach (int w in PackedKv) // (a static array: Run allocates nothing)
                need[w] = known ? d.PackNeed(w, totalK) : 0;
        }

        // cu_seqlens operand w read as the library reads it: false unless bound with batch + 1
        // entries, cu[0] = 0, non-decreasing and every length at most maxLen.
        bool Total(int w, long batch, long maxLen, out long total)
        {
            total = 0;
            if (slots[w].pin == Pin.None || slots[w].count < batch + 1)
                return false;
            long prev = IntAt(w, 0);
            if (prev != 0)
                return false;
            for (int b = 1; b <= batch; b++)
            {
                long x = IntAt(w, b);
                if (x < prev || x - prev > maxLen)
                    return false;
                prev = x;
            }
            total = prev;
            return true;
        }

        int IntAt(int w, int i)
        {
            if (slots[w].pin == Pin.Int)
                return ((int[])slots[w].array)[slots[w].offset + i];
            return ((ReadOnlyMemory<int>)slots[w].memory).Span[i];
        }

        // Checks every bound operand the call reads against need[] (the int operands first:
        // their values size the others) and lists them in runOrder. Before any pointer reaches
        // C. An empty array is refused where need is above 0 and bound as empty (not NULL, see
        // BindAndGo) where it is 0: a varlen pack of 0 tokens is valid.
        void Plan(bool[] used, ulong[] needs, string prefix, string argName)
        {
            int n = 0;
            for (int pass = 0; pass < 2; pass++)
                for (int w = 0; w < N; w++)
                {
                    if (!used[w] || slots[w].pin == Pin.None
                        || (Kinds[w] == Elem.I32) != (pass == 0))
                        continue;
                    AttentionDesc.CheckLength(slots[w].count, prefix + Names[w], needs[w],
                                              argName ?? Names[w]);
                    runOrder[n++] = w;
                }
            runCount = n;
        }

        // Pins operand i of the call (acc's, then part's) for as long as the rest of the call
        // runs (one `fixed` per recursion level), binds it, and recurses; the innermost level
        // calls the library and unbinds.
        static unsafe void PinFrom(ref Call c, int i)
        {
            int na = c.a.runCount, nb = c.b == null ? 0 : c.b.runCount;
            if (i == na + nb)
            {
                Invoke(ref c);
                return;
            }
            AttentionArgs o = i < na ? c.a : c.b;
            int w = o.runOrder[i < na ? i : i - na];
            Slot s = o.slots[w];
            switch (s.pin)
            {
            case Pin.Float:
                fixed (float* p = (float[])s.array)
                    BindAndGo(ref c, i, w, (IntPtr)(p + s.offset), s.count);
                break;
            case Pin.Bool:
                fixed (bool* p = (bool[])s.array)
                    BindAndGo(ref c, i, w, (IntPtr)(p + s.offset), s.count);
                break;
            case Pin.Byte:
                fixed (byte* p = (byte[])s.array)
                    BindAndGo(ref c, i, w, (IntPtr)(p + s.offset), s.count);
                break;
            case Pin.Int:
                fixed (int* p = (int[])s.array)
                    BindAndGo(ref c, i, w, (IntPtr)(p + s.offset), s.count);
                break;
            case Pin.UShort:
                fixed (ushort* p = (ushort[])s.array)
                    BindAndGo(ref c, i, w, (IntPtr)(p + s.offset), s.count);
                break;
            case Pin.SByte:
                fixed (sbyte* p = (sbyte[])s.array)
                    BindAndGo(ref c, i, w, (IntPtr)(p + s.offset), s.count);
                break;
            default:
                using (MemoryHandle h = s.handle())
                    BindAndGo(ref c, i, w, (IntPtr)h.Pointer, s.count);
                break;
            }
        }

        // The address bound for an empty array or memory: `fixed` gives NULL for one, which the
        // library reads as "not bound". Never read (its length is 0), never freed.
        static readonly IntPtr EmptyAnchor = Marshal.AllocHGlobal(8);

        static void BindAndGo(ref Call c, int i, int w, IntPtr data, int count)
        {
            if (count == 0)
                data = EmptyAnchor;
            AttentionArgs o = i < c.a.runCount ? c.a : c.b;
            IntPtr args = i < c.a.runCount ? c.ha : c.hb;
            ulong len = (ulong)count;
            Status st;
            switch (o.slots[w].store)
            {
            case Storage.F16:
                st = AttnNative.attn_args_set_f16(args, (Operand)w, data, len);
                break;
            case Storage.BF16:
                st = AttnNative.attn_args_set_bf16(args, (Operand)w, data, len);
                break;
            case Storage.I8:
                st = AttnNative.attn_args_set_i8(args, (Operand)w, data, len);
                break;
            default:
                st = BindF32(args, w, data, len);
                break;
            }
            c.bound = true;
            if (st != Status.Ok)
            {
                c.error = Errors.FromLastError(st); // before any other libattn call
                Unbind(ref c);
                return;
            }
            PinFrom(ref c, i + 1);
        }

        static Status BindF32(IntPtr args, int w, IntPtr data, ulong len)
        {
            Status st;
            switch (Kinds[w])
            {
            case Elem.F32Out:
                st = AttnNative.attn_args_set_out_f32(args, (Operand)w, data, len);
                break;
            case Elem.U8:
                st = AttnNative.attn_args_set_u8(args, (Operand)w, data, len);
                break;
            case Elem.I32:
                st = AttnNative.attn_args_set_i32(args, (Operand)w, data, len);
                break;
            default:
                st = AttnNative.attn_args_set_f32(args, (Operand)w, data, len);
                break;
            }
            return st;
        }

        static void Invoke(ref Call c)
        {
            Status st;
            switch (c.what)
            {
            case Native.Run:
                st = AttnNative.attn_run(c.desc, (attn_op)c.op, c.ha);
                break;
            case Native.KvAppend:
                st = AttnNative.attn_kv_append(c.desc, c.ha, c.kCache, c.kLen, c.vCache, c.vLen);
                break;
            default:
                st = AttnNative.attn_merge(c.desc, c.ha, c.b == null ? c.ha : c.hb);
                break;
            }
            if (st != Status.Ok)
                c.error = Errors.FromLastError(st); // before any other libattn call
            Unbind(ref c);
        }

        // Forgets every pointer of the call in the native objects (while still pinned).
        static void Unbind(ref Call c)
        {
            AttnNative.attn_args_clear(c.ha);
            if (c.b != null)
                AttnNative.attn_args_clear(c.hb);
            c.bound = false;
        }

        // ---- helpers ------------------------------------------------------------------------

        static bool[] UsedBy(Op op)
        {
            bool[] u = UsedSet(Operand.Q, Operand.K, Operand.KeyValid, Operand.Allowed,
                               Operand.Bias, Operand.AlibiSlopes, Operand.Sinks,
                               Operand.QueryValid, Operand.SeqLensK, Operand.CuSeqlensQ,
                               Operand.CuSeqlensK, Operand.BlockTable, Operand.KScale);
            if (op == Op.Weights)
            {
                u[(int)Operand.Weights] = true;
                return u;
            }
            u[(int)Operand.V] = u[(int)Operand.Out] = u[(int)Operand.Lse] =
                u[(int)Operand.VScale] = true;
            if (op == Op.Forward)
                u[(int)Operand.KeyMass] = true;
            else
                foreach (Operand g in new[] { Operand.DOut, Operand.DQ, Operand.DK, Operand.DV,
                                              Operand.DBias, Operand.DSinks })
                    u[(int)g] = true;
            return u;
        }

        static bool[] UsedSet(params Operand[] operands)
        {
            var u = new bool[N];
            foreach (Operand w in operands)
                u[(int)w] = true;
            return u;
        }

        // Validates `which` and that the overload's element type fits it; returns its index.
        // Validates `which` for a 16-bit (Q, K, V) or int8 (K, V) setter; returns its index.
        static int CheckStored(Operand which, bool isNull, Storage store)
        {
            int w = AttentionDesc.OperandIndex(which, "which");
            bool ok = w == K || w == V || (w == Q && store != Storage.I8);
            if (!ok && !isNull)
                throw new ArgumentException(
                    "Operand." + which + " (" + Names[w] + ") cannot be bound with "
                        + StoreSetter[(int)store]
                        + (store == Storage.I8 ? " (int8 storage is for K and V)"
                                             : " (16-bit storage is for Q, K and V)"),
                    "which");
            return w;
        }

        static int Check(Operand which, bool isNull, string given, Elem a, Elem b)
        {
            int w = AttentionDesc.OperandIndex(which, "which");
            Elem want = Kinds[w];
            if (isNull || want == a || want == b)
                return w;
            string takes = want == Elem.U8 ? "a mask (bool[], byte[] or their ReadOnlyMemory)"
                           : want == Elem.I32 ? "int[] or ReadOnlyMemory<int>"
                           : want == Elem.F32Out
                               ? "an output float[] or Memory<float>"
                               : "float[], Memory<float> or ReadOnlyMemory<float>";
            throw new ArgumentException(
                "Operand." + which + " (" + Names[w] + ") takes " + takes + ", not " + given,
                "data");
        }

        AttentionArgs Store(int w, Array array, Pin pin, int offset, int count,
                            Storage store = Storage.F32)
        {
            lock (sync)
            {
                ThrowIfDisposed();
                slots[w] = array == null ? new Slot()
                                         : new Slot { pin = pin, store = store, array = array,
                                                      offset = offset, count = count };
            }
            return this;
        }

        AttentionArgs StoreHandle(int w, Func<MemoryHandle> pin, int count, object memory = null,
                                  Storage store = Storage.F32)
        {
            lock (sync)
            {
                ThrowIfDisposed();
                slots[w] = new Slot { pin = Pin.Handle, store = store, handle = pin,
                                      count = count, memory = memory };
            }
            return this;
        }

        void ThrowIfDisposed()
        {
            if (Volatile.Read(ref disposed) != 0)
                throw new ObjectDisposedException("AttentionArgs",
                                                  "the AttentionArgs has been disposed");
        }
    }
}
