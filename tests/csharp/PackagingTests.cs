// What the NuGet package relies on, checked in the build tree (ctest csharp_tests): LibAttn.dll's
// versions are the library's, the natives are loaded by NativeLoader from beside the assembly and
// the runtime's [DllImport] bound to that same copy, the JIT cannot defeat the preload (raw
// methods never inlined, face types preload in their static constructors), and LibAttn.xml
// documents every public type. The package itself: ctest consumer_csharp
// (tests/consumer/csharp).
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Xml;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class PackagingTests
    {
        static readonly Assembly Lib = typeof(Attention).Assembly;

        [Test]
        public void AssemblyVersionsAreTheLibrarys()
        {
            string v = Attention.Version; // from libattn.so, i.e. capi/attn.h
            Assert.AreEqual(new Version(v + ".0"), Lib.GetName().Version);
            var file = (AssemblyFileVersionAttribute)Attribute.GetCustomAttribute(
                Lib, typeof(AssemblyFileVersionAttribute));
            var info = (AssemblyInformationalVersionAttribute)Attribute.GetCustomAttribute(
                Lib, typeof(AssemblyInformationalVersionAttribute));
            Assert.IsNotNull(file);
            Assert.IsNotNull(info);
            Assert.AreEqual(v + ".0", file.Version);
            Assert.AreEqual(v, info.InformationalVersion);
            Assert.AreEqual(v, NativeNames.Version);
        }

        [Test]
        public void NativesAreLoadedFromBesideTheAssemblyOnce()
        {
            Assert.IsNotNull(Attention.Isa); // any call
            string dir = Path.GetDirectoryName(Path.GetFullPath(Lib.Location));
            Assert.AreEqual(Path.Combine(dir, NativeNames.Glue), NativeLoader.LoadedFrom);
            // The runtime's DllImport bound to the preloaded glue: one file mapped under that name.
            string[] glue = MappedFiles(NativeNames.Glue);
            CollectionAssert.AreEqual(new[] { Path.Combine(dir, NativeNames.Glue) }, glue);
            // libattn.so.0 is a link to libattn.so.0.X.Y in the build tree: the mapped file's name.
            string[] core = MappedFiles(NativeNames.Core, true);
            Assert.AreEqual(1, core.Length, string.Join(", ", core));
        }

        [Test]
        public void RawMethodsAreNeverInlinedAndFaceTypesPreload()
        {
            MethodInfo[] raw = typeof(AttnNative).GetMethods(
                BindingFlags.Static | BindingFlags.Public | BindingFlags.DeclaredOnly);
            Assert.Greater(raw.Length, 20);
            foreach (MethodInfo m in raw)
                Assert.AreNotEqual((MethodImplAttributes)0,
                                   m.MethodImplementationFlags & MethodImplAttributes.NoInlining,
                                   m.Name + " may be inlined into the face");
            foreach (Type t in new[] { typeof(Attention), typeof(AttentionDesc),
                                       typeof(AttentionDesc.Builder), typeof(AttentionArgs) })
                Assert.IsNotNull(t.TypeInitializer, t.Name + " has no static constructor");
        }

        [Test]
        public void XmlDocumentationDocumentsEveryPublicType()
        {
            string path = Path.ChangeExtension(Path.GetFullPath(Lib.Location), ".xml");
            Assert.IsTrue(File.Exists(path), path);
            var doc = new XmlDocument();
            doc.Load(path);
            Assert.AreEqual("LibAttn", doc.SelectSingleNode("/doc/assembly/name").InnerText);
            var names = new HashSet<string>();
            foreach (XmlNode member in doc.SelectNodes("/doc/members/member"))
                names.Add(member.Attributes["name"].Value);
            string[] missing = Lib.GetExportedTypes()
                                   .Select(t => "T:" + t.FullName.Replace('+', '.'))
                                   .Where(n => !names.Contains(n)).ToArray();
            CollectionAssert.IsEmpty(missing);
            foreach (string n in new[] { "F:LibAttn.Status.InvalidArgument", "F:LibAttn.Operand.Q",
                                         "F:LibAttn.Causal.BottomRight", "P:LibAttn.Attention.Version" })
                Assert.IsTrue(names.Contains(n), n);
        }

        // Every file mapped into this process whose name is fileName, or with orLonger also
        // fileName.* (Linux /proc/self/maps).
        static string[] MappedFiles(string fileName, bool orLonger = false)
        {
            var files = new SortedSet<string>(StringComparer.Ordinal);
            foreach (string line in File.ReadAllLines("/proc/self/maps"))
            {
                int slash = line.IndexOf('/');
                if (slash < 0)
                    continue;
                string name = Path.GetFileName(line.Substring(slash));
                if (name == fileName || (orLonger && name.StartsWith(fileName + ".", StringComparison.Ordinal)))
                    files.Add(line.Substring(slash));
            }
            return files.ToArray();
        }
    }
}
