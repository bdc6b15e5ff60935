// libattn C# binding: finds and loads the native libraries before the first P/Invoke.
//
// LibAttn.dll calls the SWIG glue libattn_csharp.so ([DllImport("libattn_csharp")]), which needs
// libattn.so.0. Left to itself the runtime only looks for the glue beside LibAttn.dll and on the
// loader's search path, never in the package's runtimes/linux-x64/native/ folder, and when the
// glue is found but libattn.so.0 is not, Mono's DllNotFoundException names "libattn_csharp"
// rather than the library that is missing.
//
// When it runs. Mono binds a [DllImport] when it JIT-compiles the method that calls it, before
// that method's body runs, and keeps a failure for good; .NET binds at the first call. So:
//   - Attention, AttentionDesc, AttentionDesc.Builder and AttentionArgs (every face type that
//     calls the raw AttnNative methods) call Preload() in their static constructors, which run
//     before any of their methods' bodies, hence before a raw method is first compiled;
//   - the raw methods are [MethodImpl(NoInlining)], so they are never compiled into the face;
//   - every raw method starts with EnsureLoaded() (attn_csharp.i [T7]), which throws the
//     DllNotFoundException below, unwrapped, when nothing could be loaded.
//
// What it does, on Linux:
//   1. for each folder D in order: the folder of LibAttn.dll (Assembly.Location, then the
//      CodeBase under shadow copying), D/runtimes/linux-x64/native/ (a .NET SDK build output),
//      D/../../runtimes/linux-x64/native/ (`nuget install`'s packages/LibAttn.<v>/lib/<tfm>/),
//      and the application's base folder: if D holds libattn_csharp.so, dlopen()s D/libattn.so.0
//      (when present) and then D/libattn_csharp.so by full path, RTLD_NOW | RTLD_GLOBAL;
//   2. else dlopen("libattn_csharp.so") by name (LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib);
//   3. else one call through the runtime's own DllImport search (Mono's dllmap and probing,
//      .NET's deps.json).
// SWIG's [DllImport("libattn_csharp")] then binds to the library already loaded: Mono tries
// "<dir of LibAttn.dll>/libattn_csharp[.so]", its own lib folder, then dlopen("libattn_csharp")
// and dlopen("libattn_csharp.so") by name, and glibc's dlopen returns an already loaded object
// whose SONAME equals the name asked for (the glue's SONAME is libattn_csharp.so; the build
// checks it with readelf). .NET probes the same names.
// If all three fail, the DllNotFoundException names both files and lists every place tried with
// the loader's own reason (dlerror: "libattn.so.0: cannot open shared object file ...").
using System;
using System.Collections.Generic;
using System.IO;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text;

namespace LibAttn
{
    internal static class NativeLoader
    {
        const int RTLD_NOW = 0x0002;
        const int RTLD_GLOBAL = 0x0100; // glibc (Linux)

        static readonly object Gate = new object();
        static volatile bool loaded;
        static string loadedFrom;

        /// <summary>Loads the natives unless already done; cheap after the first success.</summary>
        /// <exception cref="DllNotFoundException">neither the package's natives nor the
        /// runtime's own search found a loadable libattn_csharp.so.</exception>
        internal static void EnsureLoaded()
        {
            if (!loaded)
                Load();
        }

        /// <summary>EnsureLoaded for static constructors: never throws (a failure is thrown,
        /// with the full message, by the raw method the caller goes on to call).</summary>
        internal static void Preload()
        {
            try
            {
                EnsureLoaded();
            }
            catch (DllNotFoundException)
            {
            }
        }

        /// <summary>Where the glue came from ("/…/libattn_csharp.so", "the loader's search path"
        /// or "the runtime's DllImport search"), null before the first call.</summary>
        internal static string LoadedFrom
        {
            get { return loadedFrom; }
        }

        static void Load()
        {
            lock (Gate)
            {
                if (loaded)
                    return;
                var tried = new List<string>();
                string from = TryLoad(tried);
                if (from == null)
                    throw new DllNotFoundException(Message(tried));
                loadedFrom = from;
                loaded = true;
            }
        }

        // Returns where the glue was loaded from, or null with every attempt in `tried`.
        static string TryLoad(List<string> tried)
        {
            if (IsLinux())
            {
                foreach (string dir in CandidateFolders())
                {
                    string glue = Path.Combine(dir, NativeNames.Glue);
                    if (!File.Exists(glue))
                    {
                        tried.Add(glue + ": no such file");
                        continue;
                    }
                    string core = Path.Combine(dir, NativeNames.Core);
                    string error;
                    if (File.Exists(core) && !DlOpen(core, out error))
                    {
                        tried.Add(core + ": " + error);
                        continue;
                    }
                    if (DlOpen(glue, out error))
                        return glue;
                    tried.Add(glue + ": " + error);
                }
                string byName;
                if (DlOpen(NativeNames.Glue, out byName))
                    return "the loader's search path";
                tried.Add(NativeNames.Glue + " by name (LD_LIBRARY_PATH, /etc/ld.so.cache, /lib, "
                          + "/usr/lib): " + byName);
            }
            try
            {
                ProbeVersionNumber();
                return "the runtime's DllImport search";
            }
            catch (DllNotFoundException e)
            {
                tried.Add("the runtime's own DllImport search for \"" + NativeNames.DllImport
                          + "\" failed too (" + e.Message + ")");
            }
            catch (EntryPointNotFoundException e)
            {
                tried.Add("the runtime's own DllImport search for \"" + NativeNames.DllImport
                          + "\" found a library without attn_version_number: " + e.Message);
            }
            return null;
        }

        static string Message(List<string> tried)
        {
            var sb = new StringBuilder();
            sb.Append("LibAttn ").Append(NativeNames.Version).Append(" could not load its native ")
                .Append("libraries ").Append(NativeNames.Glue).Append(" (the P/Invoke glue) and ")
                .Append(NativeNames.Core).Append(" (libattn, which ").Append(NativeNames.Glue)
                .Append(" needs), built for ").Append(NativeNames.Rid).Append(". Tried:");
            foreach (string t in tried)
                sb.Append(Environment.NewLine).Append("  ").Append(t);
            sb.Append(Environment.NewLine)
                .Append("The NuGet package LibAttn ships both in runtimes/").Append(NativeNames.Rid)
                .Append("/native/: keep the layout `nuget install` creates (LibAttn.dll in ")
                .Append("lib/<tfm>/, the natives in ../../runtimes/").Append(NativeNames.Rid)
                .Append("/native/ from it), or put both files beside LibAttn.dll.");
            return sb.ToString();
        }

        // Folders to look in, best first, without duplicates.
        static List<string> CandidateFolders()
        {
            var bases = new List<string>();
            Assembly self = typeof(NativeLoader).Assembly;
            AddFolderOf(bases, SafeLocation(self));
            AddFolderOf(bases, SafeCodeBasePath(self));
            var result = new List<string>();
            string native = Path.Combine("runtimes", NativeNames.Rid, "native");
            foreach (string b in bases)
            {
                AddFolder(result, b);
                AddFolder(result, Path.Combine(b, native));
                AddFolder(result, Path.Combine(Path.Combine(Path.Combine(b, ".."), ".."), native));
            }
            AddFolder(result, AppDomain.CurrentDomain.BaseDirectory);
            return result;
        }

        static void AddFolder(List<string> folders, string dir)
        {
            if (string.IsNullOrEmpty(dir))
                return;
            string full = Path.GetFullPath(dir);
            if (full.Length > 1)
                full = full.TrimEnd(Path.DirectorySeparatorChar);
            if (!folders.Contains(full))
                folders.Add(full);
        }

        static void AddFolderOf(List<string> bases, string file)
        {
            if (string.IsNullOrEmpty(file))
                return;
            string dir = Path.GetDirectoryName(file);
            if (!string.IsNullOrEmpty(dir) && !bases.Contains(dir))
                bases.Add(dir);
        }

        static string SafeLocation(Assembly a)
        {
            try
            {
                return a.Location; // "" for an assembly loaded from bytes or a single-file bundle
            }
            catch (NotSupportedException)
            {
                return null;
            }
        }

        // The original file of an assembly that NUnit or ASP.NET shadow-copied elsewhere.
        static string SafeCodeBasePath(Assembly a)
        {
            try
            {
#pragma warning disable 618 // CodeBase is obsolete on .NET 5+, still what shadow copies keep
                string codeBase = a.CodeBase;
#pragma warning restore 618
                Uri uri;
                if (codeBase != null && Uri.TryCreate(codeBase, UriKind.Absolute, out uri)
                    && uri.IsFile)
                    return uri.LocalPath;
            }
            catch (Exception e) when (e is NotSupportedException || e is NotImplementedException
                                      || e is PlatformNotSupportedException)
            {
            }
            return null;
        }

        static bool IsLinux()
        {
            // PlatformID.Unix covers Linux and macOS (Mono); only Linux has /proc/self/maps.
            return Environment.OSVersion.Platform == PlatformID.Unix
                && File.Exists("/proc/self/maps");
        }

        // dlopen(path, RTLD_NOW | RTLD_GLOBAL); on failure `error` is dlerror()'s text.
        static bool DlOpen(string path, out string error)
        {
            try
            {
                return DlOpen(path, false, out error);
            }
            catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException)
            {
                // glibc < 2.34 has dlopen in libdl.so.2 only; newer ones also in libc.so.6.
                try
                {
                    return DlOpen(path, true, out error);
                }
                catch (Exception e2) when (e2 is DllNotFoundException
                                           || e2 is EntryPointNotFoundException)
                {
                    error = "dlopen is unavailable (" + e2.Message + ")";
                    return false;
                }
            }
        }

        static bool DlOpen(string path, bool libc, out string error)
        {
            if (libc)
            {
                Libc.dlerror(); // clear a stale error
                if (Libc.dlopen(path, RTLD_NOW | RTLD_GLOBAL) != IntPtr.Zero)
                {
                    error = null;
                    return true;
                }
                error = DlErrorText(Libc.dlerror());
                return false;
            }
            Libdl.dlerror();
            if (Libdl.dlopen(path, RTLD_NOW | RTLD_GLOBAL) != IntPtr.Zero)
            {
                error = null;
                return true;
            }
            error = DlErrorText(Libdl.dlerror());
            return false;
        }

        static string DlErrorText(IntPtr message)
        {
            return message == IntPtr.Zero ? "dlopen failed" : Marshal.PtrToStringAnsi(message);
        }

        // The handle is deliberately never closed: the libraries stay loaded for the process.
        static class Libdl
        {
            [DllImport("libdl.so.2")]
            internal static extern IntPtr dlopen(string file, int mode);

            [DllImport("libdl.so.2")]
            internal static extern IntPtr dlerror();
        }

        static class Libc
        {
            [DllImport("libc.so.6")]
            internal static extern IntPtr dlopen(string file, int mode);

            [DllImport("libc.so.6")]
            internal static extern IntPtr dlerror();
        }

        // Any function of libattn reached through the glue's name: dlsym on the glue's handle
        // also searches its dependency libattn.so.0, so this needs both to load.
        [DllImport(NativeNames.DllImport, EntryPoint = "attn_version_number")]
        static extern uint ProbeVersionNumberNative();

        [System.Runtime.CompilerServices.MethodImpl(
            System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        static void ProbeVersionNumber()
        {
            ProbeVersionNumberNative();
        }
    }
}
