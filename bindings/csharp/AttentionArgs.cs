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
    /// Allowed and QueryValid <c>bool[]</c> or <c>byte[]</c> (nonzero = true), SeqLensK
    /// <c>int[]</c>.
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
    /// is "not given"; an empty array or an empty Memory never is.</para>
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

        // The library's element kind of each operand, and its name in the library's messages.
        enum Elem : byte { F32In, F32Out, U8, I32 }
        static readonly Elem[] Kinds = {
            Elem.F32In,  Elem.F32In, Elem.F32In, Elem.F32Out, Elem.F32Out, Elem.F32Out,
            Elem.U8,     Elem.U8,    Elem.F32In, Elem.F32In,  Elem.F32In,  Elem.U8,
            Elem.I32,    Elem.F32Out };
        internal static readonly string[] Names = {
            "q",    "k",            "v",     "out",         "lse",        "weights", "key_valid",
            "allowed", "bias", "alibi_slopes", "sinks", "query_valid", "seq_lens_k", "key_mass" };
        // Operands each op reads or writes (attn_run ignores the others): as capi/attn.cpp.
        static readonly bool[][] Used = { UsedBy(Op.Forward), UsedBy(Op.Weights), new bool[N] };

        enum Pin : byte { None, Float, Bool, Byte, Int, Handle }
        struct Slot
        {
            public Pin pin;
            public Array array;      // Float/Bool/Byte/Int: pinned with `fixed` during Run
            public int offset, count; // the bound window of `array` (or of the Memory)
            public Func<MemoryHandle> handle; // Handle: a Memory not backed by an array
        }

        readonly AttnArgsHandle native;
        int disposed;
        readonly object sync = new object();
        readonly Slot[] slots = new Slot[N];
        // State of the Run in progress (under sync).
        readonly int[] runOrder = new int[N];
        int runCount;
        IntPtr runDesc, runArgs;
        Op runOp;
        bool nativeBound;
        Exception runError;

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

        /// <summary>Binds a float operand: an input (Q, K, V, Bias, AlibiSlopes, Sinks) or an
        /// output (Out, Lse, Weights, KeyMass); null unbinds it.</summary>
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

        /// <summary>Binds a float input (Q, K, V, Bias, AlibiSlopes, Sinks) to read-only
        /// memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<float> data)
        {
            int w = Check(which, false, "ReadOnlyMemory<float>", Elem.F32In, Elem.F32In);
            ArraySegment<float> seg;
            if (MemoryMarshal.TryGetArray(data, out seg))
                return Store(w, seg.Array, Pin.Float, seg.Offset, seg.Count);
            return StoreHandle(w, data.Pin, data.Length);
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

        /// <summary>Binds SeqLensK: [batch] key counts, each in [0, seq_k] (keys at or past it
        /// are padding, never read); null unbinds it.</summary>
        public AttentionArgs Bind(Operand which, int[] seqLens)
        {
            int w = Check(which, seqLens == null, "int[]", Elem.I32, Elem.I32);
            return Store(w, seqLens, Pin.Int, 0, seqLens == null ? 0 : seqLens.Length);
        }

        /// <summary>Binds SeqLensK to read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<int> seqLens)
        {
            int w = Check(which, false, "ReadOnlyMemory<int>", Elem.I32, Elem.I32);
            ArraySegment<int> seg;
            if (MemoryMarshal.TryGetArray(seqLens, out seg))
                return Store(w, seg.Array, Pin.Int, seg.Offset, seg.Count);
            return StoreHandle(w, seqLens.Pin, seqLens.Length);
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

        // ---- Run ----------------------------------------------------------------------------

        // Called by AttentionDesc.Run with the descriptor's reference held.
        internal void RunOn(IntPtr desc, ulong[] required, Op op)
        {
            lock (sync)
            {
                IntPtr args = Handles.Acquire(native, ref disposed, "AttentionArgs");
                try
                {
                    bool[] used = Used[(int)op];
                    int n = 0;
                    for (int w = 0; w < N; w++)
                    {
                        if (!used[w] || slots[w].pin == Pin.None)
                            continue;
                        // Before any pointer reaches C; also what keeps `fixed` on an empty
                        // array (a NULL pointer, i.e. "unbound") from ever being passed.
                        AttentionDesc.CheckLength(slots[w].count, Names[w], required[w]);
                        runOrder[n++] = w;
                    }
                    runCount = n;
                    runDesc = desc;
                    runArgs = args;
                    runOp = op;
                    runError = null;
                    PinFrom(0);
                }
                finally
                {
                    if (nativeBound)
                    {
                        AttnNative.attn_args_clear(args);
                        nativeBound = false;
                    }
                    native.DangerousRelease();
                }
                Exception e = runError;
                runError = null;
                if (e != null)
                    throw e;
            }
        }

        // Pins operand runOrder[i] for as long as the rest of the call runs (one `fixed` per
        // recursion level), binds it, and recurses; the innermost level runs and unbinds.
        unsafe void PinFrom(int i)
        {
            if (i == runCount)
            {
                Status st = AttnNative.attn_run(runDesc, (attn_op)runOp, runArgs);
                if (st != Status.Ok)
                    runError = Errors.FromLastError(st); // before any other libattn call
                AttnNative.attn_args_clear(runArgs);
                nativeBound = false;
                return;
            }
            int w = runOrder[i];
            switch (slots[w].pin)
            {
            case Pin.Float:
                fixed (float* p = (float[])slots[w].array)
                    BindAndGo(i, w, (IntPtr)(p + slots[w].offset));
                break;
            case Pin.Bool:
                fixed (bool* p = (bool[])slots[w].array)
                    BindAndGo(i, w, (IntPtr)(p + slots[w].offset));
                break;
            case Pin.Byte:
                fixed (byte* p = (byte[])slots[w].array)
                    BindAndGo(i, w, (IntPtr)(p + slots[w].offset));
                break;
            case Pin.Int:
                fixed (int* p = (int[])slots[w].array)
                    BindAndGo(i, w, (IntPtr)(p + slots[w].offset));
                break;
            default:
                using (MemoryHandle h = slots[w].handle())
                    BindAndGo(i, w, (IntPtr)h.Pointer);
                break;
            }
        }

        void BindAndGo(int i, int w, IntPtr data)
        {
            ulong len = (ulong)slots[w].count;
            Status st;
            switch (Kinds[w])
            {
            case Elem.F32Out:
                st = AttnNative.attn_args_set_out_f32(runArgs, (Operand)w, data, len);
                break;
            case Elem.U8:
                st = AttnNative.attn_args_set_u8(runArgs, (Operand)w, data, len);
                break;
            case Elem.I32:
                st = AttnNative.attn_args_set_i32(runArgs, (Operand)w, data, len);
                break;
            default:
                st = AttnNative.attn_args_set_f32(runArgs, (Operand)w, data, len);
                break;
            }
            nativeBound = true;
            if (st != Status.Ok)
            {
                runError = Errors.FromLastError(st);
                return;
            }
            PinFrom(i + 1);
        }

        // ---- helpers ------------------------------------------------------------------------

        static bool[] UsedBy(Op op)
        {
            var u = new bool[N];
            foreach (Operand w in new[] { Operand.Q, Operand.K, Operand.KeyValid, Operand.Allowed,
                                          Operand.Bias, Operand.AlibiSlopes, Operand.Sinks,
                                          Operand.QueryValid, Operand.SeqLensK })
                u[(int)w] = true;
            if (op == Op.Forward)
                u[(int)Operand.V] = u[(int)Operand.Out] = u[(int)Operand.Lse] =
                    u[(int)Operand.KeyMass] = true;
            else
                u[(int)Operand.Weights] = true;
            return u;
        }

        // Validates `which` and that the overload's element type fits it; returns its index.
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

        AttentionArgs Store(int w, Array array, Pin pin, int offset, int count)
        {
            lock (sync)
            {
                ThrowIfDisposed();
                slots[w] = array == null ? new Slot()
                                         : new Slot { pin = pin, array = array, offset = offset,
                                                      count = count };
            }
            return this;
        }

        AttentionArgs StoreHandle(int w, Func<MemoryHandle> pin, int count)
        {
            lock (sync)
            {
                ThrowIfDisposed();
                slots[w] = new Slot { pin = Pin.Handle, handle = pin, count = count };
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
