#!/usr/bin/env bash
# Binding overhead, all languages in one run: the C call bench (bench/c, target attn_call_bench)
# and each language's bench (bench/<lang>) that is present, then a table of ns per call and
# ratios to C for both shapes:
#   tiny  (B=1, H=1, n=16,   d=64): call overhead = ns per call relative to C (and the
#                                    difference in ns)
#   large (B=1, H=1, n=2048, d=64): throughput    = C's ns per call / the language's (>= 0.95
#                                    means the binding costs less than 5 %)
#
# Usage: bench/bindings.sh <build dir> [rounds]     e.g.  bench/bindings.sh build
# The build dir must be configured (cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release);
# missing targets are built. Every round (default 2) runs C and then each language; each
# language's figure (C's included) is its best over the rounds, so slow phases of a shared
# machine hit every language alike.
# Exit status: 0 if every bench present ran, 1 otherwise.
set -u -o pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 <build dir> [rounds]" >&2
    exit 2
fi
rounds=${2:-2}
case $rounds in ''|*[!0-9]*|0) echo "rounds must be a positive integer" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "$1" 2>/dev/null && pwd) || { echo "no such build dir: $1" >&2; exit 2; }
[ -f "$build/CMakeCache.txt" ] || { echo "$build is not a configured CMake build dir" >&2; exit 2; }

status=0
results=$(mktemp)
trap 'rm -f "$results"' EXIT

lib=$(ls "$build"/libattn.so 2>/dev/null || true)

# Build a target quietly; 1 if it does not exist or fails.
build_target() {
    cmake --build "$build" --target "$1" >/dev/null 2>&1
}

# Does the build define this target?
targets=
has_target() {
    # (listed once into a variable: `producer | grep -q` fails under pipefail with SIGPIPE)
    if [ -z "$targets" ]; then
        if [ -f "$build/build.ninja" ]; then
            targets=$(ninja -C "$build" -t targets all 2>/dev/null | sed 's/:.*//')
        else
            targets=$(make -C "$build" help 2>/dev/null | sed -n 's/^\.\.\. //p')
        fi
    fi
    grep -qx -- "$1" <<<"$targets"
}

# Keep the two result lines of one language from a command's output; 1 if they are missing.
collect() {
    local lang=$1 out=$2
    local lines
    lines=$(printf '%s\n' "$out" | grep -E "^lang=$lang shape=(tiny|large) ns_per_call=[0-9.]+$")
    if [ "$(printf '%s\n' "$lines" | grep -c "shape=")" -ne 2 ]; then
        return 1
    fi
    printf '%s\n' "$lines" | tee -a "$results"
}

run_c() {
    build_target attn_call_bench || { echo "c: cannot build attn_call_bench" >&2; return 1; }
    local exe
    exe=$(find "$build" -name attn_call_bench -type f -perm -u+x | head -n 1)
    [ -n "$exe" ] || { echo "c: attn_call_bench not found in $build" >&2; return 1; }
    local out
    out=$("$exe") || { echo "c: attn_call_bench failed" >&2; return 1; }
    collect c "$out"
}

# A language whose CMake glue defines a runner target (run_<lang>_bench or attn_<lang>_bench).
run_target() {
    local lang=$1 t out found=0
    for t in "run_${lang}_bench" "attn_${lang}_bench"; do
        has_target "$t" || continue
        found=1
        out=$(cmake --build "$build" --target "$t" 2>&1) || { printf '%s\n' "$out" >&2; continue; }
        collect "$lang" "$out" && return 0
    done
    [ $found = 1 ] || echo "$lang: no runner target (run_${lang}_bench or attn_${lang}_bench) in" \
        "$build: configured with ATTN_WITH_$(echo "$lang" | tr a-z A-Z)=OFF?" >&2
    return 1
}

run_python() {
    [ -n "$lib" ] || { echo "python: no libattn.so in $build" >&2; return 1; }
    local out
    out=$(ATTN_LIBRARY="$lib" python3 "$root/bench/python/bench.py") || return 1
    collect python "$out"
}

run_go() {
    if has_target attn_go_bench; then
        run_target go
        return
    fi
    # No runner target: go run the bench package against the built library.
    command -v go >/dev/null || { echo "go: no go toolchain" >&2; return 1; }
    [ -n "$lib" ] || { echo "go: no libattn.so in $build" >&2; return 1; }
    local out
    out=$(cd "$root/bench/go" && HOME=${HOME:-/tmp} \
          CGO_CFLAGS="-I$root/capi" CGO_LDFLAGS="-L$build -lattn -Wl,-rpath,$build" \
          LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" go run . 2>&1) || {
        printf '%s\n' "$out" >&2
        return 1
    }
    collect go "$out"
}

for round in $(seq "$rounds"); do
    echo "# round $round of $rounds: c"
    run_c || status=1
    for lang in java csharp go python; do
        if [ ! -d "$root/bench/$lang" ]; then
            echo "# $lang: no bench (bench/$lang absent)"
            continue
        fi
        echo "# round $round of $rounds: $lang"
        case $lang in
            python) run_python ;;
            go) run_go ;;
            *) run_target "$lang" ;;
        esac || { echo "# $lang: bench FAILED or printed no result lines" >&2; status=1; }
    done
done

echo
awk '
function val(line) { sub(/.*ns_per_call=/, "", line); return line + 0 }
{
    split($1, a, "="); lang = a[2]; split($2, s, "="); shape = s[2]; x = val($3)
    if (lang == "c") {
        if (!(shape in cbest) || x < cbest[shape]) cbest[shape] = x
    } else {
        if (!(lang in seen)) { order[++n] = lang; seen[lang] = 1 }
        if (!((lang, shape) in v) || x < v[lang, shape]) v[lang, shape] = x
    }
}
END {
    if (!("tiny" in cbest) || !("large" in cbest)) { print "no C reference: no ratios"; exit 1 }
    printf "%-8s %14s %10s %12s   %16s %12s\n", "lang", "tiny ns/call", "vs C", "overhead ns",
           "large ns/call", "throughput"
    printf "%-8s %14.1f %10s %12s   %16.1f %12s\n", "c", cbest["tiny"], "1.00x", "0",
           cbest["large"], "1.000"
    for (i = 1; i <= n; i++) {
        l = order[i]
        t = v[l, "tiny"]; g = v[l, "large"]
        printf "%-8s %14.1f %9.2fx %+12.1f   %16.1f %12.3f%s\n", l, t, t / cbest["tiny"],
               t - cbest["tiny"], g, cbest["large"] / g,
               (cbest["large"] / g >= 0.95 ? "" : "  (< 0.95 of C)")
    }
    print ""
    print "vs C: tiny ns per call / C tiny ns per call; throughput: C large ns / language large ns"
}' "$results" || status=1
exit $status
