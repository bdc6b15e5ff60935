#!/usr/bin/env bash
# Checks that every hand-written C/C++ file of the tree is formatted as the repository's
# .clang-format says: runs `clang-format --dry-run -Werror` on each, prints the files that
# differ, exits 1 if any does (0 if none; 2 if clang-format is missing or an argument is wrong).
#
#   scripts/format-check.sh               check the whole tree
#   scripts/format-check.sh FILE...       check these files only
#   scripts/format-check.sh -v [FILE...]  also print clang-format's report (the lines that differ)
#   scripts/format-check.sh --fix [FILE...]  rewrite the files that differ (clang-format -i)
#
# The files: those git tracks (outside a git checkout: found under the root, build*/ and hidden
# folders left out) ending in .c .h .cc .cpp .cxx .hpp .hh .hxx .inc, except
#   - generated code: the Go module's committed SWIG output (bindings/go/internal/capi/*_wrap.c),
#     and any file whose first lines say it was generated ("automatically generated", "DO NOT
#     EDIT");
#   - the X-macro tables (*.def): their rows are laid out as columns by hand.
# The tree holds no third-party C/C++ (xsimd and doctest come from the system).
#
# Needs clang-format (Debian: apt-get install clang-format); it installs nothing. Versions format
# differently: CI and this check use Debian 12's clang-format 14. CLANG_FORMAT=path picks another.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
clang_format=${CLANG_FORMAT:-clang-format}
verbose=0
fix=0
files=()
for a in "$@"; do
  case "$a" in
    -v | --verbose) verbose=1 ;;
    --fix) fix=1 ;;
    -h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "format-check.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) files+=("$a") ;;
  esac
done

if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "format-check.sh: $clang_format not found. Install it: apt-get install clang-format" \
       "(Debian 12: clang-format 14), or set CLANG_FORMAT=/path/to/clang-format." >&2
  exit 2
fi

# generated <file>: true if the file is generated code (by path, or by the banner it starts with).
generated() {
  case "$1" in
    bindings/go/internal/capi/*_wrap.c) return 0 ;;
  esac
  head -n 10 -- "$1" | grep -q -i -E 'automatically generated|do not edit'
}

if [ ${#files[@]} -eq 0 ]; then
  cd "$root" || exit 2
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t all < <(git ls-files -- '*.c' '*.h' '*.cc' '*.cpp' '*.cxx' '*.hpp' '*.hh' \
                                       '*.hxx' '*.inc')
  else
    mapfile -t all < <(find . -mindepth 1 \( -name 'build*' -o -name '.*' \) -prune -o -type f \
      \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cxx' \
         -o -name '*.hpp' -o -name '*.hh' -o -name '*.hxx' -o -name '*.inc' \) -print \
      | sed 's#^\./##' | LC_ALL=C sort)
  fi
  for f in "${all[@]}"; do
    [ -f "$f" ] || continue # listed by git but deleted in the work tree
    generated "$f" || files+=("$f")
  done
fi

if [ ${#files[@]} -eq 0 ]; then
  echo "format-check.sh: no C/C++ file found under $root" >&2
  exit 2
fi
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "format-check.sh: no such file: $f" >&2; exit 2; }
done
echo "format-check.sh: $("$clang_format" --version | head -n 1), style from" \
     "$root/.clang-format; files to check: ${#files[@]}"
differ=()
for f in "${files[@]}"; do
  if ! report=$("$clang_format" --style=file --dry-run -Werror -- "$f" 2>&1); then
    differ+=("$f")
    echo "differs: $f"
    [ "$verbose" = 1 ] && printf '%s\n' "$report"
  fi
done

if [ ${#differ[@]} -eq 0 ]; then
  echo "format-check.sh: every file is formatted"
  exit 0
fi
if [ "$fix" = 1 ]; then
  "$clang_format" --style=file -i -- "${differ[@]}" || exit 2
  echo "format-check.sh: reformatted ${#differ[@]} files (review with git diff)"
  exit 0
fi
echo "format-check.sh: ${#differ[@]} of ${#files[@]} files differ from .clang-format;" \
     "see with -v, fix with: scripts/format-check.sh --fix (or clang-format -i FILE)"
exit 1
