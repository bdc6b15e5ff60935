// libattn C# binding: ownership of a native attn_desc.
using System;
using System.Runtime.InteropServices;

namespace LibAttn
{
    /// <summary>
    /// Owns one native attn_desc. A SafeHandle is reference counted: every call on an
    /// <see cref="AttentionDesc"/> takes a reference (DangerousAddRef) for its duration, so
    /// Dispose on one thread while other threads are inside attn_forward only marks the handle
    /// closed; attn_desc_destroy runs when the last in-flight call releases its reference.
    /// The critical finalizer frees a descriptor that was never disposed.
    /// </summary>
    internal sealed class AttnDescHandle : SafeHandle
    {
        internal AttnDescHandle(IntPtr desc) : base(IntPtr.Zero, true)
        {
            SetHandle(desc);
        }

        public override bool IsInvalid
        {
            get { return handle == IntPtr.Zero; }
        }

        protected override bool ReleaseHandle()
        {
            AttnNative.attn_desc_destroy(handle);
            return true;
        }
    }
}
