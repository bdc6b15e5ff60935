// libattn C# binding: the exception for failures reported by the library itself.
using System;

namespace LibAttn
{
    /// <summary>
    /// A libattn call failed for a reason other than its arguments: <see cref="Status"/> is the
    /// library's status code (<see cref="LibAttn.Status.Unsupported"/>,
    /// <see cref="LibAttn.Status.OutOfMemory"/>, <see cref="LibAttn.Status.Internal"/>) and
    /// <see cref="Exception.Message"/> the library's own message for that call (attn_last_error,
    /// read on the calling thread right after the failing call), e.g.
    /// "attn_set_isa: this CPU or build does not support avx512".
    /// <para>Argument errors are <see cref="ArgumentException"/>s, whether the binding sees them
    /// before calling into C (null or short arrays, negative sizes, enum values out of range) or
    /// the library reports them: <see cref="LibAttn.Status.InvalidArgument"/> becomes an
    /// <see cref="ArgumentException"/> and <see cref="LibAttn.Status.NullPointer"/> an
    /// <see cref="ArgumentNullException"/>, each carrying the library's message (docs/errors.md, "One
    /// rule in every language"). Use after Dispose is an
    /// <see cref="ObjectDisposedException"/>.</para>
    /// </summary>
    [Serializable]
    public class AttentionException : Exception
    {
        /// <summary>The library's status code (never <see cref="LibAttn.Status.Ok"/>).</summary>
        public Status Status { get; }

        /// <summary>A failure with the library's status and message.</summary>
        public AttentionException(Status status, string message) : base(message)
        {
            Status = status;
        }

        /// <summary>Type, status, message and stack trace.</summary>
        public override string ToString()
        {
            return GetType().FullName + " (" + Status + "): " + Message + Environment.NewLine
                + StackTrace;
        }
    }

    // Status -> exception, for every failing libattn call.
    internal static class Errors
    {
        /// <summary>Throws the exception for <paramref name="status"/> unless it is Ok.</summary>
        internal static void Check(Status status)
        {
            if (status != Status.Ok)
                throw FromLastError(status);
        }

        /// <summary>The exception for a failed call: InvalidArgument -> ArgumentException,
        /// NullPointer -> ArgumentNullException, anything else -> AttentionException; the message
        /// is the library's. ParamName is the argument the message names first ("attn_run: q has
        /// 3 elements, ..." -> "q"). Must run on the thread that made the call, before any other
        /// libattn call on that thread (the message is thread-local).</summary>
        internal static Exception FromLastError(Status status)
        {
            string message = AttnNative.attn_last_error();
            if (string.IsNullOrEmpty(message))
                message = AttnNative.attn_status_string(status);
            switch (status)
            {
            case Status.InvalidArgument:
                return new ArgumentException(message, NamedArgument(message));
            case Status.NullPointer:
                return new ArgumentNullException(NamedArgument(message), message);
            default:
                return new AttentionException(status, message);
            }
        }

        // The identifier right after "function: " in a library message, or null.
        static string NamedArgument(string message)
        {
            int at = message.IndexOf(": ", StringComparison.Ordinal);
            if (at < 0)
                return null;
            int start = at + 2, end = start;
            while (end < message.Length && message[end] < 128
                   && (char.IsLetterOrDigit(message[end]) || message[end] == '_'))
                end++;
            return end > start ? message.Substring(start, end - start) : null;
        }
    }
}
