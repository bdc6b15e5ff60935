// consumer_csharp's outside program: compiled against the LibAttn.dll of a restored NuGet package
// only (mcs -r:packages/LibAttn.<v>/lib/<tfm>/LibAttn.dll), run by mono without LD_LIBRARY_PATH.
//
//   mono App.exe                   the seed example; prints the versions, the result and the
//                                  files the natives were mapped from (/proc/self/maps); exit 0
//                                  only if out[1][0] == 15 exactly and both natives are mapped
//   mono App.exe --expect-missing  the natives are absent: exit 0 only if the first call throws a
//                                  DllNotFoundException itself (not wrapped), printing its message
using System;
using System.IO;
using System.Reflection;
using LibAttn;

static class App
{
    static int Main(string[] args)
    {
        return args.Length == 1 && args[0] == "--expect-missing" ? ExpectMissing() : Seed();
    }

    static int Seed()
    {
        Assembly lib = typeof(Attention).Assembly;
        var info = (AssemblyInformationalVersionAttribute)Attribute.GetCustomAttribute(
            lib, typeof(AssemblyInformationalVersionAttribute));
        var file = (AssemblyFileVersionAttribute)Attribute.GetCustomAttribute(
            lib, typeof(AssemblyFileVersionAttribute));
        Console.WriteLine("LibAttn.dll: " + lib.Location);
        Console.WriteLine("assembly version: " + lib.GetName().Version + ", file version: "
                          + (file == null ? "none" : file.Version) + ", informational version: "
                          + (info == null ? "none" : info.InformationalVersion));

        // The seed example: Q = 0, so each visible key gets the same weight; causal, so query 1
        // sees keys 0 and 1: out[1][0] = (10 + 20) / 2 = 15 exactly.
        float[] q = { 0f, 0f, 0f }, k = { 1f, 2f, 3f }, v = { 10f, 20f, 30f };
        float[] output = Attention.Simple(q, k, v, 3, 1, true);
        Console.WriteLine("libattn " + Attention.Version + ", out = [" + R(output[0]) + ", "
                          + R(output[1]) + ", " + R(output[2]) + "]");
        Console.WriteLine("out[1][0] = " + R(output[1]));

        int mapped = 0;
        foreach (string name in new[] { "libattn_csharp.so", "libattn.so.0" })
        {
            string path = MappedFrom(name);
            Console.WriteLine("native " + name + ": " + (path ?? "NOT MAPPED"));
            if (path != null)
                mapped++;
        }
        if (output[1] != 15.0f)
        {
            Console.WriteLine("FAIL: out[1][0] is " + R(output[1]) + ", expected exactly 15");
            return 1;
        }
        return mapped == 2 ? 0 : 1;
    }

    static int ExpectMissing()
    {
        try
        {
            Console.WriteLine("unexpected: libattn " + Attention.Version);
            return 1;
        }
        catch (DllNotFoundException e)
        {
            // Exactly a DllNotFoundException: not a TypeInitializationException around one.
            Console.WriteLine(e.GetType().FullName + ": " + e.Message);
            return 0;
        }
        catch (Exception e)
        {
            Console.WriteLine("FAIL: expected a DllNotFoundException, got " + e);
            return 1;
        }
    }

    static string R(float x)
    {
        return x.ToString("R", System.Globalization.CultureInfo.InvariantCulture);
    }

    // The file a shared library of this name is mapped from (Linux /proc/self/maps), or null.
    static string MappedFrom(string fileName)
    {
        foreach (string line in File.ReadAllLines("/proc/self/maps"))
        {
            int slash = line.IndexOf('/');
            if (slash < 0)
                continue;
            string path = line.Substring(slash);
            if (Path.GetFileName(path) == fileName)
                return path;
        }
        return null;
    }
}
