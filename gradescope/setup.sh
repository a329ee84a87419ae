#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (its Ubuntu base): Python
# 3.11 (with venv) and the sandbox's tools if missing, the grader in a virtualenv from /autograder/source,
# then, unless they are already in gpulab's cache, the lab cluster's binaries built from the pinned Go
# modules (about 15 min), with Go downloaded first if older than 1.26.
# GPULAB_AUTOGRADER_ROOT moves /autograder and GPULAB_AUTOGRADER_SOURCE the source; the tests use both.
set -euo pipefail
root=${GPULAB_AUTOGRADER_ROOT:-/autograder}
source_dir=${GPULAB_AUTOGRADER_SOURCE:-$root/source}
go_version=${GPULAB_GO_VERSION:-1.26.8}

python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    python=$(command -v "$candidate")
    break
  fi
done
packages=()
[ -n "$python" ] || packages+=(python3.11 python3.11-venv)
# Debian's and Ubuntu's python3 come without venv (ensurepip) unless python3-venv is installed.
[ -z "$python" ] || "$python" -c 'import ensurepip' 2>/dev/null || packages+=(python3-venv)
for tool in bwrap setpriv prlimit ps; do
  command -v "$tool" >/dev/null || { packages+=(bubblewrap util-linux procps); break; }
done
if [ ${#packages[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
  python=${python:-$(command -v python3.11)}
fi
"$python" -m venv "$root/gpulab-venv"
"$root/gpulab-venv/bin/python" -m pip install --quiet --disable-pip-version-check "$source_dir"
missing=$("$root/gpulab-venv/bin/python" -c 'from pytest_gpulab.cluster import toolchain; print(*toolchain.missing_binaries())')
if [ -z "$missing" ]; then
  exit 0  # built beforehand (the tests mount them into the cache)
fi
if ! go version 2>/dev/null | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])'; then
  curl -fsSL "https://go.dev/dl/go${go_version}.linux-amd64.tar.gz" | tar -C /usr/local -xz
  export PATH=/usr/local/go/bin:$PATH
fi
"$root/gpulab-venv/bin/gpulab" build
