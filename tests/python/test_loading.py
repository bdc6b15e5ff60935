"""Where the package finds libattn: $ATTN_LIBRARY, then beside the package, then the system's
paths. Each case runs in a fresh interpreter on a copy of the package."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGE = os.path.join(ROOT, "bindings", "python", "attn")
LIB = os.environ.get("ATTN_LIBRARY")

pytestmark = pytest.mark.skipif(not LIB, reason="needs ATTN_LIBRARY (ctest sets it)")

PROBE = "import attn; print(attn.library_path); print(attn.attention([[0]], [[1]], [[7]])[0][0])"


def run(tmp_path, env_extra, unset=("ATTN_LIBRARY",)):
    env = {k: v for k, v in os.environ.items() if k not in unset and k != "LD_LIBRARY_PATH"}
    env.update(env_extra)
    env["PYTHONPATH"] = str(tmp_path)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


@pytest.fixture
def pkg(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "attn")
    return tmp_path


def test_env_var_first(pkg):
    shutil.copy(LIB, pkg / "attn" / "libattn.so.0")  # would be found, but the env var wins
    r = run(pkg, {"ATTN_LIBRARY": LIB}, unset=())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [LIB, "7.0"]


def test_env_var_that_fails_is_an_error(pkg):
    shutil.copy(LIB, pkg / "attn" / "libattn.so.0")
    r = run(pkg, {"ATTN_LIBRARY": str(pkg / "nope.so")}, unset=())
    assert r.returncode != 0
    assert "ATTN_LIBRARY" in r.stderr and "nope.so" in r.stderr


def test_beside_the_package(pkg):
    shutil.copy(LIB, pkg / "attn" / "libattn.so.0")
    r = run(pkg, {})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(pkg / "attn" / "libattn.so.0"), "7.0"]


def test_the_wheels_file_comes_first(pkg):
    """An installed wheel has attn/libattn.so (cmake/python_wheel.cmake): it is loaded before a
    libattn.so.0 that may lie beside it."""
    shutil.copy(LIB, pkg / "attn" / "libattn.so")
    shutil.copy(LIB, pkg / "attn" / "libattn.so.0")
    r = run(pkg, {})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(pkg / "attn" / "libattn.so"), "7.0"]


def test_a_broken_file_beside_the_package_is_an_error(pkg):
    (pkg / "attn" / "libattn.so").write_bytes(b"not a library")
    r = run(pkg, {})
    assert r.returncode != 0 and "libattn.so" in r.stderr


def test_system_paths(pkg, tmp_path_factory):
    libdir = tmp_path_factory.mktemp("lib")
    shutil.copy(LIB, libdir / "libattn.so.0")
    r = run(pkg, {"LD_LIBRARY_PATH": str(libdir)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[1] == "7.0"


def test_not_found_says_where_it_looked(pkg):
    r = run(pkg, {})
    if r.returncode == 0:  # a libattn installed on this system: it must come from there
        assert str(pkg) not in r.stdout
        return
    assert "libattn not found" in r.stderr and "ATTN_LIBRARY" in r.stderr
