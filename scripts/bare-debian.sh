#!/usr/bin/env bash
# A newcomer's first hour, as CI proves it: README's two quick-start commands, verbatim, in a bare
# Debian 12 (`debootstrap --variant=minbase bookworm`: no compiler, no cmake, no JDK, no Go, no
# MPI, no Python packages), in a chroot. What the root gets from this machine is only what any
# real machine has of its own: the CA certificates (pip, Maven and apt reach their registries
# through them), the package-manager configuration (apt sources and settings, /etc/pip.conf) and
# /etc/resolv.conf. The source is `git archive <rev>` (default HEAD), unpacked to /root/libattn.
#
# Fails if either command fails, if the demo does not print the seed example's result
# (`out[1][0] = 15`), or if a plain `cmake -S . -B build-plain` on the machine as the demo left
# it (the demo's packages only) fails: its summary line says what is off. The root is unmounted
# and deleted on every exit. The last lines are the seed result and ctest's summary.
#
# Usage (as root): scripts/bare-debian.sh [<rev>]
#   ATTN_BARE_MIRROR  Debian mirror (default: the first .../debian URI of the apt sources)
#   ATTN_BARE_DIR     parent folder of the temporary root (default /var/tmp)
#   ATTN_BARE_KEEP=1  keep the root (for a look inside); it is still unmounted
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}

if [ "$(id -u)" -ne 0 ]; then
  echo "bare-debian: needs root (debootstrap, mount, chroot)" >&2
  exit 2
fi
stamp() { date -u +%H:%M:%S; }
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 ))s"; }

# The commands run are the quick start's: if README changes them, this stage must change too.
for cmd in scripts/demo.sh scripts/test.sh; do
  if ! grep -Eq "^${cmd}( |$)" README.md; then
    echo "bare-debian: README.md's quick start no longer has the line '${cmd}'" >&2
    exit 2
  fi
done

if ! command -v debootstrap >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# The mirror this machine's apt uses (deb822 .sources or one-line .list).
mirror=${ATTN_BARE_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
             awk '$1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }' |
             grep -E '/debian/?$' | head -n 1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
             awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' |
             grep -E '/debian/?$' | head -n 1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

archive=$(mktemp /tmp/attn-bare-src.XXXXXX.tar)
root=$(mktemp -d "${ATTN_BARE_DIR:-/var/tmp}/attn-bare.XXXXXX")
chmod 755 "$root" # apt downloads as the user _apt
mounts=()
cleanup() {
  local rc=$?
  local m
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    m=${mounts[$i]}
    mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
  done
  if grep -q " ${root}/" /proc/self/mounts; then
    echo "bare-debian: still mounted under ${root}, not deleting it" >&2
    rc=1
  elif [ "${ATTN_BARE_KEEP:-0}" = 1 ]; then
    echo "bare-debian: root kept in ${root}"
  else
    rm -rf --one-file-system "$root"
  fi
  rm -f "$archive"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

git archive --format=tar -o "$archive" "$rev"
echo "bare-debian: $(stamp) debootstrap --variant=minbase bookworm ${root} ${mirror}"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
  { tail -n 20 "$root.debootstrap.log" >&2; rm -f "$root.debootstrap.log"; exit 1; }
rm -f "$root.debootstrap.log"
echo "bare-debian: $(stamp) root made ($(elapsed))"

# This machine's CA certificates (the bundle, Java's keystore, and the local CAs that
# update-ca-certificates adds to the bundle when a package inside installs ca-certificates).
copy() { # copy <host path>, if it exists, to the same path in the root
  if [ -e "$1" ]; then
    mkdir -p "$root$(dirname "$1")"
    cp -L "$1" "$root$1"
  fi
}
copy /etc/ssl/certs/ca-certificates.crt
copy /etc/ssl/certs/java/cacerts
for crt in /usr/local/share/ca-certificates/*.crt; do copy "$crt"; done
# Package-manager configuration: pip's, apt's sources and settings, name resolution.
copy /etc/pip.conf
copy /etc/resolv.conf
if ls /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list >/dev/null 2>&1; then
  rm -f "$root/etc/apt/sources.list"
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    copy "$f"
  done
fi
for f in /etc/apt/apt.conf.d/*; do
  [ -e "$root$f" ] || copy "$f"
done

mkdir -p "$root/root/libattn"
tar -xf "$archive" -C "$root/root/libattn"

mount -t proc proc "$root/proc" && mounts+=("$root/proc")
mount -t sysfs sysfs "$root/sys" && mounts+=("$root/sys")
mount --bind /dev "$root/dev" && mounts+=("$root/dev")
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" && mounts+=("$root/dev/pts")
mount -t tmpfs -o mode=1777 shm "$root/dev/shm" && mounts+=("$root/dev/shm")

# A clean login environment: nothing of this machine's (JAVA_HOME, GOPATH, ...) leaks in.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/libattn && $1"
}

fail=0
echo "bare-debian: $(stamp) scripts/demo.sh"
t1=$(date +%s)
demo_out=$(mktemp)
if in_root "scripts/demo.sh" 2>&1 | tee "$demo_out"; then demo_rc=0; else demo_rc=${PIPESTATUS[0]}; fi
echo "bare-debian: $(stamp) scripts/demo.sh exit ${demo_rc} ($(( $(date +%s) - t1 ))s)"
if [ "$demo_rc" -ne 0 ]; then
  echo "bare-debian: FAIL: scripts/demo.sh exited ${demo_rc}"
  fail=1
elif ! grep -q 'out\[1\]\[0\] = 15:' "$demo_out"; then
  echo "bare-debian: FAIL: the demo did not print the seed result out[1][0] = 15"
  fail=1
fi
seed=$(grep 'out\[1\]\[0\] = 15:' "$demo_out" | sed 's/^ *//' || true)
rm -f "$demo_out"

# With the demo's packages only, a plain configure turns on what it finds and says what is off.
echo "bare-debian: $(stamp) cmake -S . -B build-plain (the demo's packages only)"
if in_root "cmake -S . -B build-plain -G Ninja >build-plain.log 2>&1"; then
  plain=$(grep -- '-- libattn: ' "$root/root/libattn/build-plain.log" || true)
  echo "bare-debian: ${plain}"
  [ -n "$plain" ] || { echo "bare-debian: FAIL: no summary line in the plain configure"; fail=1; }
else
  cat "$root/root/libattn/build-plain.log"
  echo "bare-debian: FAIL: a plain configure with the demo's packages only failed"
  fail=1
fi
rm -rf "$root/root/libattn/build-plain" "$root/root/libattn/build-plain.log"

echo "bare-debian: $(stamp) scripts/test.sh"
t1=$(date +%s)
test_out=$(mktemp)
if in_root "scripts/test.sh" 2>&1 | tee "$test_out"; then test_rc=0; else test_rc=${PIPESTATUS[0]}; fi
test_s=$(( $(date +%s) - t1 ))
echo "bare-debian: $(stamp) scripts/test.sh exit ${test_rc} (${test_s}s)"
if [ "$test_rc" -ne 0 ]; then
  echo "bare-debian: FAIL: scripts/test.sh exited ${test_rc}"
  fail=1
fi

# Last: what a newcomer reads at the end of each command.
echo "bare-debian: $([ $fail -eq 0 ] && echo PASS || echo FAIL) in $(elapsed) (scripts/demo.sh" \
     "exit ${demo_rc}, scripts/test.sh exit ${test_rc} in ${test_s}s); scripts/demo.sh printed:"
echo "   ${seed:-(no seed result line)}"
echo "scripts/test.sh ended with:"
if grep -q 'tests passed, ' "$test_out"; then
  sed -n '/tests passed, /,$p' "$test_out"
else
  tail -n 5 "$test_out"
fi
rm -f "$test_out"
exit $fail
