#!/usr/bin/env bash
# Installs the built tree into a scratch prefix, builds a separate project against it with
# find_package(Prism), and runs that project's binary.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" -j 2 >/dev/null
"$work/build/consumer"
