// libattn C# binding: the exception for failures reported by the library itself.
using System;

namespace LibAttn
{
    /// <summary>
    /// A libattn call failed: <see cref="Status"/> is the library's status code and
    /// <see cref="Exception.Message"/> the library's own message for that call (attn_last_error,
    /// read on the calling thread right after the failing call), e.g.
    /// "heads_q (6) is not a multiple of heads_kv (4)".
    /// Argument problems the binding can see before calling into C (null or short arrays,
    /// negative sizes) are reported as <see cref="ArgumentNullException"/> /
    /// <see cref="ArgumentException"/> instead, and use after Dispose as
    /// <see cref="ObjectDisposedException"/>.
    /// </summary>
    [Serializable]
    public class AttentionException : Exception
    {
        /// <summary>The library's status code (never <see cref="LibAttn.Status.Ok"/>).</summary>
        public Status Status { get; }

        public AttentionException(Status status, string message) : base(message)
        {
            Status = status;
        }

        /// <summary>Builds the exception for a failed call. Must run on the thread that made the
        /// call, before any other libattn call on that thread (the message is thread-local).</summary>
        internal static AttentionException FromLastError(Status status)
        {
            string message = AttnNative.attn_last_error();
            if (string.IsNullOrEmpty(message))
                message = AttnNative.attn_status_string(status);
            return new AttentionException(status, message);
        }

        public override string ToString()
        {
            return GetType().FullName + " (" + Status + "): " + Message + Environment.NewLine
                + StackTrace;
        }
    }
}
