#!/usr/bin/env bash
# Installs what libattn's build, demo and tests need on Debian 12 (idempotent; apt-get runs only
# when something is missing). Usage: scripts/setup-deps.sh [demo|all]
set -euo pipefail
what=${1:-all}

demo_pkgs=(cmake ninja-build g++ gcc pkg-config libxsimd-dev)
all_pkgs=("${demo_pkgs[@]}" doctest-dev swig mono-mcs mono-runtime nunit-console libnunit-cil-dev
          junit5 default-jdk-headless clang clang-format libclang-rt-14-dev valgrind python3 python3-pytest
          python3-numpy libopenblas-dev doxygen nuget openmpi-bin libopenmpi-dev
          python3-venv dpkg-dev file maven)
if [ "$what" = demo ]; then pkgs=("${demo_pkgs[@]}"); else pkgs=("${all_pkgs[@]}"); fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A JDK, Go and pytest that the machine image ships outside Debian's packages count as present.
filtered=()
for p in "${missing[@]}"; do
  case "$p" in
    default-jdk-headless) command -v javac >/dev/null 2>&1 && continue ;;
    maven) command -v mvn >/dev/null 2>&1 && continue ;;
    python3) command -v python3 >/dev/null 2>&1 && continue ;;
    python3-pytest) python3 -c 'import pytest' >/dev/null 2>&1 && continue ;;
    python3-numpy) python3 -c 'import numpy' >/dev/null 2>&1 && continue ;;
  esac
  filtered+=("$p")
done

if [ ${#filtered[@]} -gt 0 ]; then
  echo "setup-deps: installing ${filtered[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${filtered[@]}" >/dev/null
fi

if [ "$what" != demo ]; then
  # The python3 on PATH may not be Debian's (pyenv): give it pytest and numpy if it lacks them.
  if ! python3 -c 'import numpy, pytest' >/dev/null 2>&1; then
    echo "setup-deps: pip installing numpy pytest for $(command -v python3)"
    python3 -m pip install -q numpy pytest
  fi
  if ! command -v go >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go >/dev/null
  fi
fi
