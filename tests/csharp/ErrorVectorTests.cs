// The error lines of the shared vectors (tests/vectors/errors.txt, VARIANTS.md) through the C#
// face: every line must fail with its status (ArgumentException -> INVALID_ARGUMENT,
// ArgumentNullException -> NULL_POINTER, AttentionException -> its Status, no exception -> OK)
// and a message containing its names.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ErrorVectorTests
    {
        static readonly CultureInfo Inv = CultureInfo.InvariantCulture;

        // Runs one error line; returns the status its first failing step maps to, and the message.
        static Status RunErrorCase(Dictionary<string, string> c, out string message)
        {
            message = "";
            string brk = c.ContainsKey("break") ? c["break"] : "";
            int colon = brk.IndexOf(':');
            string kind = colon < 0 ? brk : brk.Substring(0, colon);
            string what = colon < 0 ? "" : brk.Substring(colon + 1);
            var line = new Dictionary<string, string>(c);
            if (kind == "param" || kind == "strides")
            {
                int eq = what.IndexOf('=');
                line[(kind == "strides" ? "strides." : "") + what.Substring(0, eq)] =
                    what.Substring(eq + 1);
            }
            else
                Assert.Contains(kind, new[] { "short", "null", "set", "alias", "op", "empty", "" },
                                c["name"] + ": unknown break " + brk);
            try
            {
                using (AttentionDesc desc = Vectors.Builder(line).Build())
                using (var args = new AttentionArgs())
                {
                    // kv_append: Desc.KvAppend with k and v as the caches; merge: Desc.Merge
                    bool append = c["op"] == "kv_append", merge = c["op"] == "merge";
                    bool fwd = c["op"] == "forward";
                    Assert.IsTrue(fwd || append || merge || c["op"] == "weights",
                                  c["name"] + ": op=" + c["op"]);
                    var bound = new List<string>(Vectors.Inputs(c));
                    if (append) bound.Remove("q");
                    if (merge) bound.RemoveAll(n => n == "q" || n == "k" || n == "v");
                    if (fwd || merge) bound.AddRange(new[] { "out", "lse" });
                    else if (!append) bound.Add("weights");
                    if (fwd && c["mass"] == "1") bound.Add("key_mass");
                    string[] empty = kind == "empty" ? what.Split(',') : new string[0];
                    var arrays = new Dictionary<string, Array>();
                    foreach (string n in bound)
                    {
                        Operand op = Vectors.OperandOf(n);
                        long len = (long)desc.RequiredLen(op);
                        if (kind == "short" && what == n) len--;
                        if (empty.Contains(n)) len = 0;
                        arrays[n] = n == "seq_lens_k" || n.StartsWith("cu_seqlens") ? new int[len]
                                    : n == "key_valid" || n == "allowed" || n == "query_valid"
                                        ? (Array)new byte[len] : new float[len];
                    }
                    if (kind == "set")
                    {
                        // operand[index]=value
                        int lb = what.IndexOf('['), rb = what.IndexOf(']');
                        string n = what.Substring(0, lb);
                        int at = int.Parse(what.Substring(lb + 1, rb - lb - 1), Inv);
                        arrays[n].SetValue(Convert.ChangeType(double.Parse(what.Substring(rb + 2), Inv),
                                                              arrays[n].GetType().GetElementType(), Inv),
                                           at);
                    }
                    if (kind == "null" && what != "part")
                        arrays.Remove(what);
                    float[] kCache = null, vCache = null;
                    if (append)
                    {
                        kCache = (float[])arrays["k"];
                        vCache = (float[])arrays["v"];
                        arrays.Remove("k");
                        arrays.Remove("v");
                    }
                    // alias:a=b: one buffer of max(required_len(a), required_len(b)) floats, each
                    // bound with its own required length (Memory windows of the same array).
                    string[] alias = kind == "alias" ? what.Split('=') : new string[0];
                    float[] shared = null;
                    if (alias.Length == 2)
                        shared = new float[Math.Max(arrays[alias[0]].Length, arrays[alias[1]].Length)];
                    foreach (var kv in arrays.OrderBy(x => (int)Vectors.OperandOf(x.Key)))
                    {
                        Operand op = Vectors.OperandOf(kv.Key);
                        if (shared != null && alias.Contains(kv.Key))
                            args.Bind(op, new Memory<float>(shared, 0, kv.Value.Length));
                        else if (kv.Value is float[]) args.Bind(op, (float[])kv.Value);
                        else if (kv.Value is byte[]) args.Bind(op, (byte[])kv.Value);
                        else args.Bind(op, (int[])kv.Value);
                    }
                    if (append)
                    {
                        desc.KvAppend(args, kCache, vCache);
                    }
                    else if (merge && brk == "null:part")
                    {
                        desc.Merge(args, null);
                    }
                    else if (merge)
                    {
                        using (var part = new AttentionArgs())
                        {
                            part.Bind(Operand.Out, new float[desc.RequiredLen(Operand.Out)]);
                            part.Bind(Operand.Lse, new float[desc.RequiredLen(Operand.Lse)]);
                            desc.Merge(args, part);
                        }
                    }
                    else
                    {
                        Op run = kind == "op" ? (Op)Enum.Parse(typeof(Op), what, true)
                                 : fwd ? Op.Forward : Op.Weights;
                        desc.Run(run, args);
                    }
                }
                return Status.Ok;
            }
            catch (ArgumentNullException e) // before ArgumentException: it is one
            {
                message = e.Message;
                return Status.NullPointer;
            }
            catch (ArgumentException e)
            {
                message = e.Message;
                return Status.InvalidArgument;
            }
            catch (AttentionException e)
            {
                // the rule: NullPointer and InvalidArgument are ArgumentNullException /
                // ArgumentException, never an AttentionException (reported as a wrong status)
                message = e.Message;
                if (e.Status == Status.NullPointer || e.Status == Status.InvalidArgument)
                {
                    message += " [an AttentionException, where the rule is an Argument(Null)Exception]";
                    return (Status)(-1);
                }
                return e.Status;
            }
        }

        // The word, case-insensitively, with no letter or digit right before or after it.
        static bool NamesWord(string message, string word)
        {
            for (int at = message.IndexOf(word, StringComparison.OrdinalIgnoreCase); at >= 0;
                 at = message.IndexOf(word, at + 1, StringComparison.OrdinalIgnoreCase))
            {
                int end = at + word.Length;
                if ((at == 0 || !char.IsLetterOrDigit(message[at - 1])) &&
                    (end == message.Length || !char.IsLetterOrDigit(message[end])))
                    return true;
            }
            return false;
        }

        [Test]
        public void NamesMatchWholeWords()
        {
            Assert.IsTrue(NamesWord("attn_desc_set_int: ATTN_PARAM_WINDOW_LEFT (-2) is outside",
                                    "window_left"));
            Assert.IsTrue(NamesWord("q has 3 elements", "q"));
            Assert.IsFalse(NamesWord("seq_q must be > 0", "q_x"));
            Assert.IsFalse(NamesWord("sequence", "q"));
            Assert.IsFalse(NamesWord("alibi2", "alibi"));
        }

        [Test]
        public void ErrorLinesGiveTheirStatusAndNameTheArgument()
        {
            var lines = Vectors.Lines("errors.txt");
            var failures = new List<string>();
            foreach (var c in lines)
            {
                foreach (string key in new[] { "op", "break", "status" })
                    Assert.IsTrue(c.ContainsKey(key), c["name"] + ": no " + key);
                string message;
                Status got = RunErrorCase(c, out message);
                var want = (Status)int.Parse(c["status"], Inv);
                if (got != want)
                    failures.Add(c["name"] + ": status " + got + ", expected " + want + " ("
                                 + message.Split('\n')[0] + ")");
                string word;
                if (c.TryGetValue("names", out word) && !NamesWord(message, word))
                    failures.Add(c["name"] + ": message '" + message.Split('\n')[0]
                                 + "' does not name " + word);
                else if (want != Status.Ok && !c.ContainsKey("names"))
                    failures.Add(c["name"] + ": a failing line without names");
            }
            Assert.IsEmpty(failures, string.Join("\n", failures));
            Console.WriteLine("error vectors: {0} cases passed", lines.Count);
        }
    }
}
