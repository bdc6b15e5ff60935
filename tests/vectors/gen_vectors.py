#!/usr/bin/env python3
"""Generate the shared test vectors (tests/vectors/) from the float64 reference.

    python3 tests/vectors/gen_vectors.py            # (re)write index.txt and the binary files
    python3 tests/vectors/gen_vectors.py --check    # regenerate in memory, compare byte for byte

Every language's tests read these files (format: index.txt's header). Inputs are drawn from
random.Random(seed) per case and rounded to float32 before the reference sees them, so the
expected values are the float64 answer to exactly the float32 inputs the libraries get; the
expected outputs are then rounded to float32. Output is deterministic byte for byte.

Input elements the strides do not address, and the K/V rows of padding keys (key_valid false),
hold NaN: they must never be read, so every expected value is still finite (or -inf for the
lse of a row with no visible key).
"""

import os
import sys

# The cases live beside this file, one set a module (gen_*.py); the float64 reference in
# tests/reference/attn_ref.py.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
sys.path.insert(0, HERE)

from gen_backward import BACKWARD, BACKWARD_HEADER  # noqa: E402
from gen_cases import CASES, INDEX_HEADER, build_case  # noqa: E402
from gen_errors import ERRORS, ERRORS_HEADER, build_error  # noqa: E402
from gen_storage import STORAGE, STORAGE_HEADER  # noqa: E402
from gen_variants import VARIANTS, VARIANTS_HEADER, build_variant  # noqa: E402


def generate():
    """All files as {filename: bytes}."""
    files = {}
    names = set()

    def add_set(cases, build, header, index):
        """The data files of every case and the index file listing them."""
        lines = []
        for c in cases:
            assert c["name"] not in names, c["name"]
            names.add(c["name"])
            line, parts = build(c)
            lines.append(line)
            for part, data in parts.items():
                files["%s.%s" % (c["name"], part)] = data
        files[index] = (header + "\n".join(lines) + "\n").encode("ascii")

    add_set(CASES, build_case, INDEX_HEADER, "index.txt")
    add_set(VARIANTS, build_variant, VARIANTS_HEADER, "variants.txt")
    add_set(STORAGE, build_variant, STORAGE_HEADER, "storage.txt")
    add_set(BACKWARD, build_variant, BACKWARD_HEADER, "backward.txt")

    lines = []
    for e in ERRORS:
        assert e["c"]["name"] not in names, e["c"]["name"]
        names.add(e["c"]["name"])
        lines.append(build_error(e))
    files["errors.txt"] = (ERRORS_HEADER + "\n".join(lines) + "\n").encode("ascii")
    return files


def is_vector_file(name):
    return (name in ("index.txt", "variants.txt", "storage.txt", "backward.txt", "errors.txt") or
            name.endswith(".f32") or name.endswith(".f16") or name.endswith(".bf16") or
            name.endswith(".i8") or
            name.endswith(".u8") or name.endswith(".i32"))


def main(argv):
    check = "--check" in argv[1:]
    files = generate()
    if check:
        bad = []
        present = {n for n in os.listdir(HERE) if is_vector_file(n)}
        for name in sorted(present - set(files)):
            bad.append("unexpected file %s" % name)
        for name, data in sorted(files.items()):
            path = os.path.join(HERE, name)
            if not os.path.exists(path):
                bad.append("missing %s" % name)
                continue
            with open(path, "rb") as f:
                if f.read() != data:
                    bad.append("differs: %s" % name)
        for b in bad:
            print(b)
        print("%s: %d files, %d problems" % ("FAIL" if bad else "OK", len(files), len(bad)))
        return 1 if bad else 0

    for name in [n for n in os.listdir(HERE) if is_vector_file(n) and n not in files]:
        os.remove(os.path.join(HERE, name))
    total = 0
    for name, data in sorted(files.items()):
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        total += len(data)
    print("wrote %d files, %d + %d + %d + %d cases, %d error cases, %d bytes"
          % (len(files), len(CASES), len(VARIANTS), len(STORAGE), len(BACKWARD), len(ERRORS),
             total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
