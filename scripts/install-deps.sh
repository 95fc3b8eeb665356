#!/usr/bin/env bash
# Installs the Debian packages Prism needs.
#   ./scripts/install-deps.sh          everything: build, tests, benchmarks' peers, Slurm
#   ./scripts/install-deps.sh --demo   only what ./scripts/demo.sh needs to build and train
# Idempotent: packages already installed are skipped, and apt is not touched at all
# when nothing is missing. Run as root (or with sudo available).
set -euo pipefail

# To configure and build the libraries, the apps and the demo (CMake finds GoogleTest and
# CLI11 even when it builds only the demo's targets).
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libopenmpi-dev openmpi-bin
  libucx-dev ucx-utils zlib1g-dev
  libhdf5-openmpi-dev hdf5-tools
  libboost-serialization-dev nlohmann-json3-dev
  libcli11-dev  # prism-train-script's flags
  libtorch-dev libopenblas0-pthread
  libpmix-dev
  libgtest-dev libgmock-dev
  dataset-fashion-mnist
)
if [[ "${1:-}" != --demo ]]; then
  packages+=(
    libbenchmark-dev mold  # mold: faster links (cmake/PrismBuildSpeed.cmake)
    python3-distributed python3-mpi4py python3-torch python3-numpy python3-pandas
    python3-torchvision  # the Ray Tune example reads Fashion-MNIST through torchvision
    pybind11-dev python3-cloudpickle python3-pytest  # the prism Python package and its tests
    valgrind python3-matplotlib python3-optuna
    wrk curl python3-requests  # Serve: the HTTP load generator and the tests' real clients
    python3-starlette python3-fastapi python3-uvicorn  # prism.serve's requests, its ingress test, the peer
    python3-pil  # prism.data.read_images
    clang libclang-rt-14-dev  # the fuzz targets (tests/fuzz/: libFuzzer, ASan, UBSan)
    python3-prometheus-client  # the dashboard's /metrics, parsed back by its tests
    chromium chromium-driver python3-selenium  # the dashboard in a headless browser (label browser)
  )
  # Slurm for the Slurm tests and jobs/ (PRISM_WITH_SLURM=0 to skip).
  if [[ "${PRISM_WITH_SLURM:-1}" == 1 ]]; then
    packages+=(slurm-wlm munge)
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
