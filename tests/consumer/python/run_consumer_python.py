"""consumer_python: does `pip install` of this repository give a working, self-contained package?

Like a user, from the source alone, in a fresh temporary folder outside the source and build
trees:
  1. python3 -m venv <tmp>/venv (a clean venv: no system site-packages), pip install build;
  2. python -m build --outdir <tmp>/dist <source>: an sdist, then a wheel built from that sdist
     (unpacked in a temporary folder: the build compiles libattn from the sdist's copy of the
     source; nothing is written into the source tree or the build tree);
  3. checks the wheel's name (version from capi/attn.h, platform tag of this machine, e.g.
     py3-none-linux_x86_64, never "any") and contents (attn/libattn.so with SONAME libattn.so.0,
     attn/py.typed, the LICENSE) and the sdist's (the sources, no tests);
  4. pip install <the wheel> into the venv (numpy comes from PyPI);
  5. runs check_installed.py with the venv's python from <tmp>/run, with no ATTN_LIBRARY,
     LD_LIBRARY_PATH or PYTHONPATH: it imports attn, checks the seed example's exact result and
     that the library was loaded from inside the venv.
pip reaches PyPI for build, scikit-build-core (the isolated build environments) and numpy; the
system's cmake and ninja are used (pyproject.toml), so no cmake or ninja wheel is fetched.

Usage: python3 run_consumer_python.py --source DIR --build DIR --version X.Y.Z
Set ATTN_KEEP_CONSUMER_TMP=1 to keep <tmp> for inspection.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
# Nothing of the caller's environment may tell Python or the loader where libattn or the
# package is; CMAKE_ARGS would change the build.
SCRUB = ("ATTN_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP",
         "PYTHONUSERBASE", "VIRTUAL_ENV", "CMAKE_ARGS", "SKBUILD_CMAKE_ARGS", "PIP_TARGET",
         "PIP_PREFIX", "PIP_USER")


class Failure(Exception):
    pass


def inside(path, root):
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)


def run(what, cmd, env, cwd, log):
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    log.append("$ %s  (%.1f s)" % (" ".join(cmd), time.monotonic() - t0))
    if r.returncode != 0:
        raise Failure("%s failed (exit %d):\n  %s\n--- output\n%s"
                      % (what, r.returncode, " ".join(cmd), r.stdout))
    print("-- %s: %.1f s" % (what, time.monotonic() - t0), flush=True)
    return r.stdout


def expected_platform_tag():
    """The wheel platform tag of this interpreter's platform (linux-x86_64 -> linux_x86_64)."""
    return re.sub(r"[-.]", "_", sysconfig.get_platform())


def check_wheel(path, version):
    name = os.path.basename(path)
    m = re.fullmatch(r"attn-(?P<ver>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl",
                     name)
    if not m:
        raise Failure("unexpected wheel name %s" % name)
    if m["ver"] != version:
        raise Failure("wheel %s has version %s, capi/attn.h says %s" % (name, m["ver"], version))
    if m["plat"] == "any" or m["plat"] != expected_platform_tag():
        raise Failure("wheel %s: platform tag %s, expected %s (a platform wheel)"
                      % (name, m["plat"], expected_platform_tag()))
    if not (m["py"] == "py3" or re.fullmatch(r"cp3\d+", m["py"])) or m["abi"] not in (
            "none", "abi3") and not re.fullmatch(r"cp3\d+", m["abi"]):
        raise Failure("wheel %s: python tag %s / abi tag %s" % (name, m["py"], m["abi"]))
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        dist_info = "attn-%s.dist-info/" % version
        for need in ("attn/__init__.py", "attn/_lib.py", "attn/py.typed", "attn/libattn.so",
                     dist_info + "METADATA", dist_info + "WHEEL",
                     dist_info + "licenses/LICENSE"):
            if need not in names:
                raise Failure("wheel %s lacks %s; it has:\n  %s"
                              % (name, need, "\n  ".join(sorted(names))))
        pkg = sorted(n for n in names if not n.startswith(dist_info))
        odd = [n for n in pkg if not re.fullmatch(r"attn/(\w+\.py|py\.typed|libattn\.so)", n)]
        if odd:
            raise Failure("wheel %s has files that are not the package's: %s" % (name, odd))
        libs = sorted(n for n in names if "libattn" in n)
        if libs != ["attn/libattn.so"]:
            raise Failure("wheel %s: expected one library, attn/libattn.so; found %s"
                          % (name, libs))
        so = z.read("attn/libattn.so")
        if so[:4] != b"\x7fELF" or b"libattn.so.0\x00" not in so:
            raise Failure("attn/libattn.so is not the ELF library with SONAME libattn.so.0")
        meta = z.read(dist_info + "METADATA").decode("utf-8")
        for line in ("Name: attn", "Version: " + version, "License-Expression: Apache-2.0",
                     "Requires-Dist: numpy"):
            if line not in meta:
                raise Failure("METADATA lacks %r" % line)
        wheel_meta = z.read(dist_info + "WHEEL").decode("utf-8")
        if "Root-Is-Purelib: false" not in wheel_meta:
            raise Failure("WHEEL: expected Root-Is-Purelib: false (a platform wheel)")
    print("-- wheel %s: %d files, attn/libattn.so (%d bytes), attn/py.typed"
          % (name, len(names), len(so)))


def check_sdist(path, version):
    top = "attn-%s/" % version
    with tarfile.open(path) as t:
        names = set(t.getnames())
    for need in ("pyproject.toml", "PKG-INFO", "CMakeLists.txt", "LICENSE", "capi/attn.h",
                 "cmake/python_wheel.cmake", "bindings/python/attn/py.typed"):
        if top + need not in names:
            raise Failure("sdist %s lacks %s" % (os.path.basename(path), need))
    stray = sorted(n for n in names if n.startswith((top + "tests/", top + "build"))
                   or "/." in n or "__pycache__" in n or n.endswith(".pyc"))
    if stray:
        raise Failure("sdist has files it does not need: %s" % stray[:10])
    print("-- sdist %s: %d files" % (os.path.basename(path), len(names)))


# Paths a Python build could leave in the source tree (setuptools, scikit-build, pip, build).
def leftovers(source):
    found = set()
    for d in (source, os.path.join(source, "bindings", "python"),
              os.path.join(source, "bindings", "python", "attn")):
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for e in entries:
            if (e in ("dist", "_skbuild", "wheelhouse") or e.endswith(".egg-info")
                    or e.startswith("libattn")):
                found.add(os.path.join(d, e))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--version", required=True)
    a = ap.parse_args()
    source, build = os.path.realpath(a.source), os.path.realpath(a.build)

    env = {k: v for k, v in os.environ.items() if k not in SCRUB}
    root = env.get("TMPDIR") if os.path.isdir(env.get("TMPDIR", "")) else "/tmp"
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="attn-consumer-python-", dir=root))
    for tree in (source, build):
        if inside(tmp, tree):
            raise SystemExit("consumer_python: temporary folder %s is inside %s" % (tmp, tree))
    env["TMPDIR"] = os.path.join(tmp, "tmp")  # pip's and build's own temporary folders too
    os.mkdir(env["TMPDIR"])
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    print("-- temporary folder: %s" % tmp, flush=True)

    log = []
    before = leftovers(source)
    t0 = time.monotonic()
    try:
        venv = os.path.join(tmp, "venv")
        run("python -m venv", [sys.executable, "-m", "venv", venv], env, tmp, log)
        py = os.path.join(venv, "bin", "python")
        run("pip install build", [py, "-m", "pip", "install", "-q", "build"], env, tmp, log)

        dist = os.path.join(tmp, "dist")
        out = run("python -m build (sdist, then a wheel from it)",
                  [py, "-m", "build", "--outdir", dist, source], env, tmp, log)
        if "Building C" not in out and "Building CXX" not in out:
            raise Failure("the wheel build compiled nothing?\n%s" % out)
        files = sorted(os.listdir(dist))
        wheels = [f for f in files if f.endswith(".whl")]
        sdists = [f for f in files if f.endswith(".tar.gz")]
        if len(wheels) != 1 or len(sdists) != 1:
            raise Failure("expected one wheel and one sdist in %s, found %s" % (dist, files))
        wheel = os.path.join(dist, wheels[0])
        check_sdist(os.path.join(dist, sdists[0]), a.version)
        check_wheel(wheel, a.version)

        run("pip install <wheel>", [py, "-m", "pip", "install", "-q", wheel], env, tmp, log)

        work = os.path.join(tmp, "run")
        os.mkdir(work)
        shutil.copy(os.path.join(HERE, "check_installed.py"), work)
        print(run("check_installed.py", [py, "check_installed.py", venv, a.version], env, work,
                  log), end="")

        new = leftovers(source) - before
        if new:
            raise Failure("the build wrote into the source tree: %s" % sorted(new))
    except Failure as e:
        print("\n".join(log))
        print("consumer_python: FAILED: %s" % e)
        return 1
    finally:
        if os.environ.get("ATTN_KEEP_CONSUMER_TMP"):
            print("-- kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("consumer_python: passed in %.1f s" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
