// libattn C# binding: the per-call operands of the extensible call (attn_args).
using System;
using System.Buffers;
using System.Runtime.InteropServices;
using System.Threading;

namespace LibAttn
{
    /// <summary>
    /// The operands of one <see cref="AttentionDesc.Run(Op, AttentionArgs)"/> (attn_args, "The
    /// extensible call" in capi/attn.h): <see cref="Operand"/> -> array or memory window of the
    /// element type the operand takes (float, f16 / bf16 bit patterns as ushort, int8 as sbyte,
    /// masks as bool or byte, int). Binding records the array (nothing is pinned or copied);
    /// each call pins every bound operand with <c>fixed</c> for that call only, hands the
    /// library its address and length, and unbinds it before returning. The library checks
    /// every type and length and names the operand in its message. null unbinds; an empty array
    /// is bound as empty, never as "not given".
    /// <para>Calls that share one args object run one at a time (use one per thread to run in
    /// parallel). <see cref="Dispose"/> frees the native object after an in-flight call.</para>
    /// </summary>
    public sealed class AttentionArgs : IDisposable
    {
        // Loads the natives before any raw AttnNative method is compiled (NativeLoader.cs).
        static AttentionArgs()
        {
            NativeLoader.Preload();
        }

        static readonly int N = AttentionDesc.OperandCount;

        // The library's operand table (attn_operand_info): each operand's name and the element
        // types it takes as an input and as an output. Read on first use, after the preload.
        static class Model
        {
            internal static readonly string[] Names = new string[N];
            internal static readonly uint[] In = new uint[N], Out = new uint[N];
            // The setters by attn_dtype, as inputs and as outputs.
            internal static readonly Setter[] SetIn = { AttnNative.attn_args_set_f32,
                AttnNative.attn_args_set_f16, AttnNative.attn_args_set_bf16,
                AttnNative.attn_args_set_i8, AttnNative.attn_args_set_u8, AttnNative.attn_args_set_i32,
                (a, w, p, n) => AttnNative.attn_args_set_fp8(a, w, attn_dtype.ATTN_DTYPE_FP8_E4M3, p, n),
                (a, w, p, n) => AttnNative.attn_args_set_fp8(a, w, attn_dtype.ATTN_DTYPE_FP8_E5M2, p, n) };
            internal static readonly Setter[] SetOut = { AttnNative.attn_args_set_out_f32,
                AttnNative.attn_args_set_out_f16, AttnNative.attn_args_set_out_bf16,
                AttnNative.attn_args_set_out_i8, null, null,
                (a, w, p, n) => AttnNative.attn_args_set_out_fp8(a, w, attn_dtype.ATTN_DTYPE_FP8_E4M3, p, n),
                (a, w, p, n) => AttnNative.attn_args_set_out_fp8(a, w, attn_dtype.ATTN_DTYPE_FP8_E5M2, p, n) };
            static Model()
            {
                for (int w = 0; w < N; w++)
                {
                    IntPtr name;
                    int rank, strided;
                    Errors.Check(AttnNative.attn_operand_info((attn_operand)w, out name, out In[w],
                                                              out Out[w], out rank, out strided));
                    Names[w] = Marshal.PtrToStringAnsi(name);
                }
            }
        }

        internal static string[] Names => Model.Names;
        delegate attn_status Setter(IntPtr args, attn_operand which, IntPtr data, ulong len);

        delegate void Pinner(ref CallState c, int i, ref Slot s);
        struct Slot
        {
            public Pinner pin;       // null: not bound
            public attn_dtype type;
            public Array array;      // an array window, pinned with `fixed`
            public int offset, count;
            public Func<MemoryHandle> handle; // other memory, pinned through Memory.Pin
        }

        static long lastId;
        readonly long id = Interlocked.Increment(ref lastId); // lock order of Merge
        readonly AttnArgsHandle native;
        int disposed;
        readonly object sync = new object();
        readonly Slot[] slots = new Slot[N];
        readonly int[] bound = new int[N]; // the bound operands of the call in progress
        int boundCount;

        /// <summary>attn_args_create: an empty binding object.</summary>
        public AttentionArgs()
        {
            IntPtr raw;
            Errors.Check(AttnNative.attn_args_create(out raw));
            native = new AttnArgsHandle(raw);
        }

        /// <summary>True once <see cref="Dispose"/> has been called.</summary>
        public bool IsDisposed => Volatile.Read(ref disposed) != 0;

        internal bool NativeReleased => native.IsClosed;

        /// <summary>Binds a float operand (attn_args_set_f32 or _out_f32); null unbinds.</summary>
        public AttentionArgs Bind(Operand which, float[] data) => Put(which, data, attn_dtype.ATTN_DTYPE_F32);
        /// <summary>Binds a float operand to a memory window.</summary>
        public AttentionArgs Bind(Operand which, Memory<float> data) => Put(which, (ReadOnlyMemory<float>)data, attn_dtype.ATTN_DTYPE_F32, false);
        /// <summary>Binds a float input to read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<float> data) => Put(which, data, attn_dtype.ATTN_DTYPE_F32);
        /// <summary>Binds f16 bit patterns (attn_args_set_f16); null unbinds.</summary>
        public AttentionArgs BindF16(Operand which, ushort[] data) => Put(which, data, attn_dtype.ATTN_DTYPE_F16);
        /// <summary>Binds f16 bit patterns in read-only memory.</summary>
        public AttentionArgs BindF16(Operand which, ReadOnlyMemory<ushort> data) => Put(which, data, attn_dtype.ATTN_DTYPE_F16);
        /// <summary>Binds bf16 bit patterns (attn_args_set_bf16); null unbinds.</summary>
        public AttentionArgs BindBF16(Operand which, ushort[] data) => Put(which, data, attn_dtype.ATTN_DTYPE_BF16);
        /// <summary>Binds bf16 bit patterns in read-only memory.</summary>
        public AttentionArgs BindBF16(Operand which, ReadOnlyMemory<ushort> data) => Put(which, data, attn_dtype.ATTN_DTYPE_BF16);
        /// <summary>Binds int8 values (attn_args_set_i8); null unbinds.</summary>
        public AttentionArgs Bind(Operand which, sbyte[] data) => Put(which, data, attn_dtype.ATTN_DTYPE_I8);
        /// <summary>Binds int8 values in read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<sbyte> data) => Put(which, data, attn_dtype.ATTN_DTYPE_I8);
        /// <summary>Binds K or V (or NewK / NewV for KvAppendArgs) to fp8 codes of
        /// <paramref name="format"/> (<see cref="Dtype.Fp8E4m3"/> or <see cref="Dtype.Fp8E5m2"/>;
        /// attn_args_set_fp8, or _out_fp8 for a cache KvAppendArgs writes), one byte per value; the
        /// optional scale is KScale / VScale (one per tensor with strides (0, 0, 0), per KV head
        /// with (0, 1, 0), per row by default; none bound = 1). null unbinds.</summary>
        public AttentionArgs BindFp8(Operand which, Dtype format, byte[] data) =>
            data == null ? Unbind(which) : BindFp8(which, format, new ReadOnlyMemory<byte>(data), false);
        /// <summary>Binds fp8 codes in a memory window (writable: a cache KvAppendArgs fills).</summary>
        public AttentionArgs BindFp8(Operand which, Dtype format, Memory<byte> data) =>
            BindFp8(which, format, (ReadOnlyMemory<byte>)data, false);
        /// <summary>Binds fp8 codes in read-only memory.</summary>
        public AttentionArgs BindFp8(Operand which, Dtype format, ReadOnlyMemory<byte> data) =>
            BindFp8(which, format, data, true);

        // The library judges the operand and the format first (attn_args_set_fp8 with no data).
        AttentionArgs BindFp8(Operand which, Dtype format, ReadOnlyMemory<byte> data, bool readOnly)
        {
            int w = AttentionDesc.OperandIndex(which, "which");
            lock (sync)
            {
                ThrowIfDisposed();
                using (Lease l = Use())
                    Errors.Check(AttnNative.attn_args_set_fp8(l.Ptr, (attn_operand)w, (attn_dtype)format,
                                                              IntPtr.Zero, 0));
            }
            return Put(which, data, (attn_dtype)format, readOnly);
        }
        /// <summary>Binds a mask (attn_args_set_u8; true = real / allowed); null unbinds.</summary>
        public AttentionArgs Bind(Operand which, bool[] mask) => Put(which, mask, attn_dtype.ATTN_DTYPE_U8);
        /// <summary>Binds a mask of bytes (nonzero = true); null unbinds.</summary>
        public AttentionArgs Bind(Operand which, byte[] mask) => Put(which, mask, attn_dtype.ATTN_DTYPE_U8);
        /// <summary>Binds a mask in read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<bool> mask) => Put(which, mask, attn_dtype.ATTN_DTYPE_U8);
        /// <summary>Binds a mask of bytes in read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<byte> mask) => Put(which, mask, attn_dtype.ATTN_DTYPE_U8);
        /// <summary>Binds an int operand (attn_args_set_i32); null unbinds.</summary>
        public AttentionArgs Bind(Operand which, int[] seqLens) => Put(which, seqLens, attn_dtype.ATTN_DTYPE_I32);
        /// <summary>Binds an int operand in read-only memory.</summary>
        public AttentionArgs Bind(Operand which, ReadOnlyMemory<int> seqLens) => Put(which, seqLens, attn_dtype.ATTN_DTYPE_I32);

        /// <summary>Forgets one operand (it is "not given" again).</summary>
        public AttentionArgs Unbind(Operand which) => Store(AttentionDesc.OperandIndex(which, "which"), new Slot());

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
                return slots[w].pin != null;
        }

        /// <summary>Frees the native object (after a call still in flight). Idempotent; the
        /// bound arrays stay the caller's.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref disposed, 1) == 0)
                native.Dispose();
        }

        AttentionArgs Put<T>(Operand which, T[] data, attn_dtype type) where T : struct =>
            data == null ? Unbind(which) : Put(which, new ReadOnlyMemory<T>(data), type, false);

        // Refuses at once a type the library's table (attn_operand_info) says the operand never
        // takes (read-only memory: as an input); the library checks the rest when it is bound.
        AttentionArgs Put<T>(Operand which, ReadOnlyMemory<T> data, attn_dtype type,
                             bool readOnly = true) where T : struct
        {
            int w = AttentionDesc.OperandIndex(which, "which");
            if (((Model.In[w] | (readOnly ? 0 : Model.Out[w])) & (1u << (int)type)) == 0)
                throw new ArgumentException("Operand." + which + " (" + Model.Names[w]
                                            + ") cannot be bound with " + (readOnly ? "read-only " : "")
                                            + typeof(T).Name + " data as " + (Dtype)type, "data");
            ArraySegment<T> seg;
            if (MemoryMarshal.TryGetArray(data, out seg))
                return Store(w, new Slot { pin = Pins<T>.Array, type = type, array = seg.Array,
                                           offset = seg.Offset, count = seg.Count });
            return Store(w, new Slot { pin = PinHandle, type = type, handle = data.Pin,
                                       count = data.Length });
        }

        AttentionArgs Store(int w, Slot s)
        {
            lock (sync)
            {
                ThrowIfDisposed();
                slots[w] = s;
            }
            return this;
        }

        void ThrowIfDisposed()
        {
            if (IsDisposed)
                throw new ObjectDisposedException("AttentionArgs", "the AttentionArgs has been disposed");
        }

        // ---- the call: pin every bound operand, bind, run, unbind ----------------------------

        internal enum Native : byte { Run, KvAppend, KvAppendArgs, Merge }

        // One native call: the args objects whose operands it binds (b: Merge's part, null when
        // it is acc itself) and what the innermost level hands the library.
        struct CallState
        {
            public Native what;
            public IntPtr desc, ha, hb, kCache, vCache;
            public Op op;
            public AttentionArgs a, b;
            public ulong kLen, vLen;
            public Exception error; // the library's failure, thrown once nothing is pinned
        }

        // Called by AttentionDesc with its reference held. Merge locks both objects in the
        // order of their ids (two merges of one pair in opposite roles cannot deadlock).
        internal static void Call(Native what, IntPtr desc, Op op, AttentionArgs a, AttentionArgs b,
                                  IntPtr kCache, ulong kLen, IntPtr vCache, ulong vLen)
        {
            if (ReferenceEquals(a, b))
                b = null; // one object as both sides: the library reports the overlap
            AttentionArgs first = b == null || a.id <= b.id ? a : b;
            AttentionArgs second = b == null ? a : ReferenceEquals(first, a) ? b : a;
            lock (first.sync)
            lock (second.sync)
            {
                var c = new CallState { what = what, desc = desc, op = op, a = a, b = b,
                                        kCache = kCache, kLen = kLen, vCache = vCache, vLen = vLen };
                using (Lease la = a.Use())
                using (Lease lb = b == null ? default(Lease) : b.Use())
                {
                    c.ha = la.Ptr;
                    c.hb = lb.Ptr;
                    a.List();
                    b?.List();
                    PinFrom(ref c, 0);
                }
                if (c.error != null)
                    throw c.error;
            }
        }

        Lease Use() => new Lease(native, ref disposed, "AttentionArgs");

        void List()
        {
            boundCount = 0;
            for (int w = 0; w < N; w++)
                if (slots[w].pin != null)
                    bound[boundCount++] = w;
        }

        // Pins operand i of the call (a's, then b's) for as long as the rest of the call runs
        // (one `fixed` per level), binds it and recurses; the innermost level calls the library.
        static void PinFrom(ref CallState c, int i)
        {
            int na = c.a.boundCount;
            if (i == na + (c.b == null ? 0 : c.b.boundCount))
            {
                Invoke(ref c);
                return;
            }
            AttentionArgs o = i < na ? c.a : c.b;
            int w = o.bound[i < na ? i : i - na];
            o.slots[w].pin(ref c, i, ref o.slots[w]);
        }

        static class Pins<T> where T : struct
        {
            internal static readonly Pinner Array = PinArray;
            static unsafe void PinArray(ref CallState c, int i, ref Slot s)
            {
                var span = MemoryMarshal.AsBytes(new Span<T>((T[])s.array, s.offset, s.count));
                fixed (byte* p = &MemoryMarshal.GetReference(span))
                    BindAndGo(ref c, i, ref s, (IntPtr)p);
            }
        }

        static readonly Pinner PinHandle = PinMemory;
        static unsafe void PinMemory(ref CallState c, int i, ref Slot s)
        {
            using (MemoryHandle h = s.handle())
                BindAndGo(ref c, i, ref s, (IntPtr)h.Pointer);
        }

        // The address of an empty array or memory: `fixed` gives NULL for one, which the
        // library reads as "not given". Never read (its length is 0), never freed.
        static readonly IntPtr EmptyAnchor = Marshal.AllocHGlobal(8);

        internal static IntPtr Address(IntPtr p, object owner) =>
            p == IntPtr.Zero && owner != null ? EmptyAnchor : p;

        static void BindAndGo(ref CallState c, int i, ref Slot s, IntPtr data)
        {
            bool inA = i < c.a.boundCount;
            AttentionArgs o = inA ? c.a : c.b;
            int w = o.bound[inA ? i : i - c.a.boundCount];
            uint bit = 1u << (int)s.type;
            // An output where the operand is one with this type and is never an input with it,
            // or the call writes it (the caches of attn_kv_append_args); else an input.
            bool output = (Model.Out[w] & bit) != 0
                          && ((Model.In[w] & bit) == 0 || c.what == Native.KvAppendArgs);
            Setter set = (output ? Model.SetOut : Model.SetIn)[(int)s.type];
            attn_status st = set(inA ? c.ha : c.hb, (attn_operand)w,
                                 s.count == 0 ? EmptyAnchor : data, (ulong)s.count);
            if (st != attn_status.ATTN_OK)
            {
                c.error = Errors.FromLastError(st); // before any other libattn call
                Unbind(ref c);
                return;
            }
            PinFrom(ref c, i + 1);
        }

        static void Invoke(ref CallState c)
        {
            attn_status st;
            switch (c.what)
            {
            case Native.Run:
                st = AttnNative.attn_run(c.desc, (attn_op)c.op, c.ha);
                break;
            case Native.KvAppend:
                st = AttnNative.attn_kv_append(c.desc, c.ha, c.kCache, c.kLen, c.vCache, c.vLen);
                break;
            case Native.KvAppendArgs:
                st = AttnNative.attn_kv_append_args(c.desc, c.ha);
                break;
            default:
                st = AttnNative.attn_merge(c.desc, c.ha, c.b == null ? c.ha : c.hb);
                break;
            }
            if (st != attn_status.ATTN_OK)
                c.error = Errors.FromLastError(st); // before any other libattn call
            Unbind(ref c);
        }

        // Forgets every pointer of the call in the native objects (while still pinned).
        static void Unbind(ref CallState c)
        {
            AttnNative.attn_args_clear(c.ha);
            if (c.b != null)
                AttnNative.attn_args_clear(c.hb);
        }
    }
}
