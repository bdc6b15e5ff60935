#!/usr/bin/env python3
"""The docs are tested: every block a user would copy runs, every relative link resolves.

  test_docs.py blocks --root SRC --build BUILD [--require java,csharp] [--only FILE]
  test_docs.py links  --root SRC

blocks: every fenced block of README.md, docs/*.md and bindings/*/README.md, by its language:
  c        written to a file, compiled as C99 against SRC/capi and BUILD's libattn, run: exit 0
  python   run with the tree's binding (PYTHONPATH=SRC/bindings/python, ATTN_LIBRARY=BUILD's
           libattn.so) in a scratch directory: exit 0
  sh       run by `bash -e` in a scratch directory holding links to SRC's folders and to BUILD
           as `build`: exit 0
  text     a picture or an output, not code (nothing to run), unless marked `output of:`
A marker, an HTML comment on the line before a block's fence, changes that:
  <!-- not run: REASON -->        not run, and REASON is printed (a visible reason in the doc)
  <!-- output of: PROGRAM -->      BUILD/PROGRAM is run; every line of the block must appear in
                                   its output, in order
  <!-- same as: FILE -->          the block must be SRC/FILE byte for byte (the file is a tested
                                   example); a java / csharp block is then compiled and run by
                                   the sh block that follows it
  <!-- needs: PATH[, PATH] -->    the block runs only if BUILD/PATH exists (a binding built in
                                   this build); else it is reported as not run, and it fails
                                   if its language is in --require
  <!-- file NAME: the block above -->   the previous block is written to NAME in the scratch
                                   directory first
Any other language without a marker fails: every block is either run or says why not.
Also, every build target these files name (`--target attn_x`, `ninja -C build attn_x`, in
blocks and in inline code) must be a target of BUILD (a Ninja build), unless it belongs to a
language off in this build (not in --require).

links: every relative link and image of every .md file in SRC (outside build*/ and hidden
folders) must name a file or folder that exists; a link with #anchor into a .md file must
name one of its headings (GitHub's anchors).
"""
import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")
RUNNABLE = {"c", "python", "sh"}


def doc_files(root):
    files = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    bindings = os.path.join(root, "bindings")
    for lang in sorted(os.listdir(bindings)):
        p = os.path.join(bindings, lang, "README.md")
        if os.path.isfile(p):
            files.append(p)
    return files


def blocks_of(path):
    """(line, lang, text, markers) of every fenced block; markers from the lines just above."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise SystemExit("%s:%d: unterminated code block" % (path, start + 1))
        markers, k = [], start - 1
        while k >= 0 and MARKER.match(lines[k]):
            markers.insert(0, MARKER.match(lines[k]).group(1))
            k -= 1
        out.append((start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", markers))
        i = j + 1
    return out


def marker(markers, key):
    for m in markers:
        if m.startswith(key + ":"):
            return m[len(key) + 1:].strip()
        if key == "file" and m.startswith("file "):
            return m[5:].split(":")[0].strip()
    return None


def run(cmd, cwd, env, timeout=300, shell=False):
    p = subprocess.run(cmd, cwd=cwd, env=env, shell=shell, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout,
                       executable="/bin/bash" if shell else None)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def scratch_dir(root, build):
    d = tempfile.mkdtemp(prefix="attn_docs_")
    for name in os.listdir(root):
        if name.startswith(".") or name.startswith("build"):
            continue
        os.symlink(os.path.join(root, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def cmd_blocks(a):
    root, build = os.path.abspath(a.root), os.path.abspath(a.build)
    required = set(x for x in (a.require or "").split(",") if x)
    lib = os.path.join(build, "libattn.so")
    if not os.path.exists(lib):
        raise SystemExit("no %s: build the library first" % lib)
    cc = a.cc or os.environ.get("CC") or "cc"
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "bindings", "python"),
               ATTN_LIBRARY=lib, PYTHONDONTWRITEBYTECODE="1")
    ran, skipped, failed = [], [], []
    files = doc_files(root)
    if a.only:
        files = [f for f in files if os.path.relpath(f, root) in a.only]
    for path in files:
        rel = os.path.relpath(path, root)
        prev_text = None
        for line, lang, text, markers in blocks_of(path):
            where = "%s:%d (%s)" % (rel, line, lang or "no language")
            this_text, prev = text, prev_text
            prev_text = this_text
            reason = marker(markers, "not run")
            same = marker(markers, "same as")
            if same is not None:
                want = open(os.path.join(root, same), encoding="utf-8").read()
                if text != want:
                    diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                        same, where))
                    failed.append((where, "differs from %s:\n%s" % (same, diff)))
                    continue
                ran.append((where, "equal to %s" % same))
                continue
            if reason is not None:
                if not reason:
                    failed.append((where, "a `not run` marker needs its reason"))
                else:
                    skipped.append((where, reason))
                continue
            needs = marker(markers, "needs")
            if needs:
                missing = [p for p in (x.strip() for x in needs.split(","))
                           if not os.path.exists(os.path.join(build, p))]
                if missing:
                    langs = [l for l in required if "/%s/" % l in "/" + "/".join(missing) + "/"
                             or any(m.startswith(l + "/") for m in missing)]
                    msg = "needs %s, not built here" % ", ".join("build/" + m for m in missing)
                    if langs:
                        failed.append((where, msg + " (required: %s is on)" % ", ".join(langs)))
                    else:
                        skipped.append((where, msg))
                    continue
            out_of = marker(markers, "output of")
            if out_of is not None:
                code, out = run([os.path.join(build, out_of)], build, env)
                lines = [l.rstrip() for l in text.splitlines()]
                got = [l.rstrip() for l in out.splitlines()]
                pos, ok = 0, code == 0
                for l in lines:
                    while pos < len(got) and got[pos] != l:
                        pos += 1
                    if pos == len(got):
                        ok = False
                        break
                    pos += 1
                if ok:
                    ran.append((where, "output of %s" % out_of))
                else:
                    failed.append((where, "not in the output of %s (exit %d):\n%s" % (out_of, code, out)))
                continue
            if lang in ("text", "") and not markers:
                continue  # a picture or an output: nothing to run
            if lang not in RUNNABLE:
                failed.append((where, "a %s block must be run or marked (<!-- not run: reason -->, "
                                      "<!-- same as: FILE -->)" % (lang or "bare")))
                continue
            d = scratch_dir(root, build)
            try:
                fname = marker(markers, "file")
                if fname and prev is not None:
                    with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
                        f.write(prev)
                if lang == "c":
                    src = os.path.join(d, "block.c")
                    with open(src, "w", encoding="utf-8") as f:
                        f.write(text)
                    exe = os.path.join(d, "block")
                    code, out = run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-I",
                                     os.path.join(root, "capi"), src, "-o", exe, "-L", build,
                                     "-lattn", "-lm", "-Wl,-rpath," + build], d, env)
                    if code == 0:
                        code, out = run([exe], d, env)
                elif lang == "python":
                    src = os.path.join(d, "block.py")
                    with open(src, "w", encoding="utf-8") as f:
                        f.write(text)
                    code, out = run([a.python or sys.executable, src], d, env)
                else:
                    code, out = run("set -euo pipefail\n" + text, d, env, shell=True)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            if code == 0:
                ran.append((where, "ran"))
            else:
                failed.append((where, "exit %d:\n%s" % (code, out)))
    targets_checked = check_targets(files, root, build, required, ran, skipped, failed)
    for where, how in ran:
        print("ok       %s: %s" % (where, how))
    for where, why in skipped:
        print("not run  %s: %s" % (where, why))
    for where, why in failed:
        print("FAIL     %s: %s" % (where, why))
    print("docs_blocks: %d blocks run or checked, %d not run (each with its reason), %d failed; "
          "%d build targets named in the docs checked" % (len(ran) - targets_checked,
                                                         len(skipped), len(failed), targets_checked))
    return 1 if failed else 0


def check_targets(files, root, build, required, ran, skipped, failed):
    """Every `--target attn_x` / `ninja -C build attn_x` of the docs names a target of the build."""
    if not os.path.exists(os.path.join(build, "build.ninja")):
        skipped.append(("build targets", "not a Ninja build: targets not listed"))
        return 0
    code, out = run(["ninja", "-C", build, "-t", "targets", "all"], build, os.environ)
    if code != 0:
        failed.append(("build targets", "ninja -t targets failed:\n" + out))
        return 0
    known = set(l.split(":")[0] for l in out.splitlines())
    named = re.compile(r"(?:--target|ninja -C build(?:-demo)?)\s+(attn_[A-Za-z0-9_]+)")
    checked = 0
    for path in files:
        rel = os.path.relpath(path, root)
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            for t in named.findall(line):
                where = "%s:%d (target %s)" % (rel, n, t)
                if t in known:
                    ran.append((where, "a target of this build"))
                    checked += 1
                    continue
                lang = next((l for l in ("java", "csharp", "go", "python") if "_%s" % l in t),
                            "python" if t == "attn_heatmap_image" else None)  # cmake/python.cmake
                if lang and lang not in required:
                    skipped.append((where, "%s is off in this build" % lang))
                else:
                    failed.append((where, "no such target in %s" % build))
    return checked


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    h = re.sub(r"`", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors_of(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    seen, out = {}, set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def cmd_links(a):
    root = os.path.abspath(a.root)
    mds = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")
                   and x not in ("node_modules", "__pycache__")]
        mds += [os.path.join(d, f) for f in files if f.endswith(".md")]
    bad, count = [], 0
    link = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
    for path in sorted(mds):
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)   # code blocks
        text = re.sub(r"`[^`\n]*`", "", text)                          # inline code
        for m in link.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            rel = os.path.relpath(path, root)
            if not os.path.exists(dest):
                bad.append("%s: %s: no such file" % (rel, target))
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
                bad.append("%s: %s: no heading with that anchor in %s" % (rel, target,
                                                                           os.path.relpath(dest, root)))
    for b in bad:
        print("FAIL " + b)
    print("docs_links: %d relative links in %d .md files, %d broken" % (count, len(mds), len(bad)))
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("blocks")
    b.add_argument("--root", required=True)
    b.add_argument("--build", required=True)
    b.add_argument("--require", default="")
    b.add_argument("--cc")
    b.add_argument("--python")
    b.add_argument("--only", nargs="*")
    l = sub.add_parser("links")
    l.add_argument("--root", required=True)
    a = p.parse_args()
    return cmd_blocks(a) if a.cmd == "blocks" else cmd_links(a)


if __name__ == "__main__":
    sys.exit(main())
