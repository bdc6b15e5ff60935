// libattn C# binding: ownership of a native attn_args, and the reference counting that the
// descriptor and the args object share.
using System;
using System.Runtime.InteropServices;
using System.Threading;

namespace LibAttn
{
    /// <summary>
    /// Owns one native attn_args (see <see cref="AttnDescHandle"/> for the reference counting:
    /// Dispose under an in-flight <see cref="AttentionDesc.Run(Op, AttentionArgs)"/> frees it
    /// after the call). The critical finalizer frees an args object that was never disposed.
    /// </summary>
    internal sealed class AttnArgsHandle : SafeHandle
    {
        internal AttnArgsHandle(IntPtr args) : base(IntPtr.Zero, true)
        {
            SetHandle(args);
        }

        public override bool IsInvalid
        {
            get { return handle == IntPtr.Zero; }
        }

        // Native objects freed so far (tests: the finalizer frees what was never disposed).
        internal static long Released;

        protected override bool ReleaseHandle()
        {
            AttnNative.attn_args_destroy(handle);
            Interlocked.Increment(ref Released);
            return true;
        }
    }

    // One reference on a handle for the duration of a call: `using (Lease l = ...)`.
    internal struct Lease : IDisposable
    {
        readonly SafeHandle handle;
        internal readonly IntPtr Ptr;

        internal Lease(SafeHandle handle, ref int disposed, string owner)
        {
            Ptr = Handles.Acquire(handle, ref disposed, owner);
            this.handle = handle;
        }

        public void Dispose() => handle?.DangerousRelease(); // default(Lease): nothing held
    }

    internal static class Handles
    {
        // Takes a reference on `handle` for the duration of one call (the caller releases it in
        // finally). A call that starts after Dispose (disposed != 0) throws; a call that took its
        // reference before Dispose finishes normally and the last release frees the native object.
        // SafeHandle alone is not enough: while any call holds a reference, SafeHandle.Dispose
        // only marks it disposed and DangerousAddRef keeps succeeding, so under continuous traffic
        // from other threads the handle would never be released.
        internal static IntPtr Acquire(SafeHandle handle, ref int disposed, string owner)
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
                throw new ObjectDisposedException(owner, "the " + owner + " has been disposed");
            return handle.DangerousGetHandle();
        }
    }
}
