// libattn C# binding: the exception for failures reported by the library, and the translation of
// every status into an exception.
using System;

namespace LibAttn
{
    /// <summary>
    /// A libattn call failed for a reason other than its arguments (Unsupported, OutOfMemory,
    /// Internal): <see cref="Status"/> is the library's status, the message its own (attn_last_error).
    /// <para>Argument errors are <see cref="ArgumentException"/>s carrying the library's message:
    /// InvalidArgument becomes an <see cref="ArgumentException"/> (an
    /// <see cref="ArgumentOutOfRangeException"/> from a setter of one value) and NullPointer an
    /// <see cref="ArgumentNullException"/> (docs/errors.md, "One rule in every language"). Use after
    /// Dispose is an <see cref="ObjectDisposedException"/>.</para>
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
        // Throws the exception for `status` unless it is Ok (see FromLastError).
        internal static void Check(attn_status status, string argName = null, bool range = false)
        {
            if (status != attn_status.ATTN_OK)
                throw FromLastError(status, argName, range);
        }

        // InvalidArgument -> ArgumentException (ArgumentOutOfRangeException with `range`),
        // NullPointer -> ArgumentNullException, else AttentionException; the message is the
        // library's, ParamName `argName` or else the argument the message names first
        // ("attn_run: q has 3 elements, ..." -> "q"). Runs on the thread of the failed call,
        // before any other libattn call there (the message is thread-local).
        internal static Exception FromLastError(attn_status status, string argName = null,
                                                bool range = false)
        {
            string message = AttnNative.attn_last_error();
            if (string.IsNullOrEmpty(message))
                message = AttnNative.attn_status_string(status);
            string name = argName ?? NamedArgument(message);
            switch (status)
            {
            case attn_status.ATTN_ERR_INVALID_ARGUMENT:
                return range ? new ArgumentOutOfRangeException(name, message)
                             : new ArgumentException(message, name);
            case attn_status.ATTN_ERR_NULL_POINTER:
                return new ArgumentNullException(name, message);
            default:
                return new AttentionException((Status)status, message);
            }
        }

        // The identifier right after "function: " in a library message, or null.
        static string NamedArgument(string message)
        {
            int start = message.IndexOf(": ", StringComparison.Ordinal) + 2, end = start;
            if (start < 2)
                return null;
            while (end < message.Length && message[end] < 128
                   && (char.IsLetterOrDigit(message[end]) || message[end] == '_'))
                end++;
            return end > start ? message.Substring(start, end - start) : null;
        }

        // An argument the C API cannot see: its sign (sizes are size_t) or a C# enum value
        // outside the header's.
        internal static T InRange<T>(T value, string name, bool ok, string what)
        {
            if (!ok)
                throw new ArgumentOutOfRangeException(name, value, name + " " + what);
            return value;
        }

        // A C# array shorter than a length the C call cannot check itself (it is given none).
        internal static void Length(long length, string name, ulong required)
        {
            if ((ulong)length < required)
                throw new ArgumentException(
                    name + " has " + length + " elements, needs at least " + required, name);
        }

        internal static T[] NotNull<T>(T[] array, string name)
        {
            if (array == null)
                throw new ArgumentNullException(name, name + " must not be null");
            return array;
        }
    }
}
