"""PEP 517 backend of bindings/python/pyproject.toml: scikit-build-core's hooks, run from the
repository root, so that `pip install bindings/python` builds the package that the root's
pyproject.toml describes (the wheel with libattn.so inside; its sdist is the root's sdist).

Only the wheel and sdist hooks are offered; for an editable install use the root
(`pip install -e .`)."""

import functools
import os

from scikit_build_core import build as _backend

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

__all__ = ["build_wheel", "build_sdist", "prepare_metadata_for_build_wheel",
           "get_requires_for_build_wheel", "get_requires_for_build_sdist"]


def _in_root(hook, has_dir):
    @functools.wraps(hook)
    def run(*args, **kwargs):
        if not os.path.isfile(os.path.join(ROOT, "pyproject.toml")):
            raise RuntimeError(
                "bindings/python is built from the libattn repository around it, but %s has no "
                "pyproject.toml (was bindings/python copied out of the repository?); run "
                "`pip install .` in the repository root instead" % ROOT)
        if has_dir:  # output folders given relative to the caller's folder
            args = (os.path.abspath(args[0]),) + args[1:]
        if kwargs.get("metadata_directory"):
            kwargs["metadata_directory"] = os.path.abspath(kwargs["metadata_directory"])
        old = os.getcwd()
        os.chdir(ROOT)
        try:
            return hook(*args, **kwargs)
        finally:
            os.chdir(old)
    return run


build_wheel = _in_root(_backend.build_wheel, True)
build_sdist = _in_root(_backend.build_sdist, True)
if hasattr(_backend, "prepare_metadata_for_build_wheel"):  # optional hook
    prepare_metadata_for_build_wheel = _in_root(_backend.prepare_metadata_for_build_wheel, True)
else:
    __all__.remove("prepare_metadata_for_build_wheel")
get_requires_for_build_wheel = _in_root(_backend.get_requires_for_build_wheel, False)
get_requires_for_build_sdist = _in_root(_backend.get_requires_for_build_sdist, False)
