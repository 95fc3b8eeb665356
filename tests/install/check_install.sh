#!/usr/bin/env bash
# Installs the built tree into a scratch prefix, builds a separate project against it with
# find_package(Prism), and runs that project's binary; then builds the same program with
# Prism added by add_subdirectory.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# ScriptTrainer's Python module is installed with the libraries, and imports from there.
if grep -q "PRISM_BUILD_TRAIN:BOOL=ON" "$build_dir/CMakeCache.txt"; then
  module=$(find "$work/prefix" -path '*/prism/python/prism_train/__init__.py' | head -1)
  [[ -n $module ]] || { echo "FAIL: prism_train is not installed under $work/prefix"; exit 1; }
  PYTHONPATH=$(dirname "$(dirname "$module")") /usr/bin/python3 -c 'import prism_train; prism_train.get_context()'
fi
# The prism Python package is installed under lib/python3/dist-packages, and runs from there.
if grep -q "PRISM_BUILD_PYTHON:BOOL=ON" "$build_dir/CMakeCache.txt"; then
  package=$(find "$work/prefix" -path '*/dist-packages/prism/__init__.py' | head -1)
  [[ -n $package ]] || { echo "FAIL: the prism Python package is not installed under $work/prefix"; exit 1; }
  PYTHONPATH=$(dirname "$(dirname "$package")") /usr/bin/python3 -c \
    'import prism; prism.init(); assert prism.get(prism.remote(lambda: 6 * 7).remote(), timeout=60) == 42; prism.shutdown()'
fi
cmake -S "$src_dir/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" -j 2 >/dev/null
"$work/build/consumer"
# The same program with Prism pulled in by add_subdirectory.
src_root=$(cd "$src_dir/../.." && pwd)
# Build type None (no -O, no -g, as Debian's packaging builds): Prism's RelWithDebInfo
# default took 129 s of this test's build on 2 cores, None 98 s.
cmake -S "$src_dir/subdir_consumer" -B "$work/sub" -DPRISM_SOURCE_DIR="$src_root" -DCMAKE_BUILD_TYPE=None >/dev/null
# Only what the consumer links (prism::core and prism::collective), as a user's build of
# their own target does: building "all" would compile every library of Prism a second time.
cmake --build "$work/sub" -j 2 --target consumer >/dev/null
"$work/sub/consumer"
