# The fuzz targets (tests/fuzz/): libFuzzer with ASan and UBSan on the parsers of untrusted
# bytes (HTTP requests and routes, JSON request bodies, checkpoint records, Tune's journal,
# spill files, .npy, CSV, HDF5 and Data's output manifests). libFuzzer needs clang, and
# the main build is GCC's, so tests/fuzz/ is a CMake project of its own that "all" builds
# with clang++ as an external project (each target compiles only the parser sources it
# needs). Each target then runs for a few seconds as a ctest test (label fuzz): first
# every input of its checked-in corpus (tests/fuzz/corpus/<target>/: seeds and the inputs
# that once failed, regress-*), then new ones. scripts/fuzz.sh runs them longer.
#
# PRISM_BUILD_FUZZERS (ON by default) needs clang++ with libFuzzer (Debian: clang and
# libclang-rt-14-dev, which scripts/install-deps.sh installs); without them the targets and
# their tests are left out, with a warning.
option(PRISM_BUILD_FUZZERS "Build the libFuzzer targets with clang and run them in ctest (label fuzz)" ON)
set(PRISM_FUZZ_SECONDS "" CACHE STRING
    "Seconds each fuzz target runs in ctest (empty: the per-target defaults, about 60 s in all)")
if(NOT PRISM_BUILD_FUZZERS)
  return()
endif()

find_program(PRISM_FUZZ_CXX NAMES clang++ clang++-14 clang++-15 clang++-16 clang++-17 clang++-18)
find_program(PRISM_FUZZ_CC NAMES clang clang-14 clang-15 clang-16 clang-17 clang-18)
if(PRISM_FUZZ_CXX AND PRISM_FUZZ_CC AND NOT DEFINED PRISM_FUZZ_WORKS)
  # Can it link a libFuzzer target with both sanitizers? (clang without libclang-rt-*-dev
  # cannot.)
  set(_probe_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
  file(WRITE ${_probe_dir}/probe.cc
       "#include <cstddef>\n#include <cstdint>\n"
       "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(COMMAND ${PRISM_FUZZ_CXX} -fsanitize=fuzzer,address,undefined probe.cc -o probe
                  WORKING_DIRECTORY ${_probe_dir} RESULT_VARIABLE _probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(_probe_rc EQUAL 0)
    set(PRISM_FUZZ_WORKS TRUE CACHE INTERNAL "clang++ links libFuzzer targets")
  else()
    set(PRISM_FUZZ_WORKS FALSE CACHE INTERNAL "clang++ links libFuzzer targets")
  endif()
endif()
if(NOT PRISM_FUZZ_CXX OR NOT PRISM_FUZZ_CC OR NOT PRISM_FUZZ_WORKS)
  message(WARNING "The fuzz targets are not built and their tests (label fuzz) are left out: "
                  "no clang++ that links -fsanitize=fuzzer was found. Install clang and "
                  "libclang-rt-14-dev (scripts/install-deps.sh does), or configure with "
                  "-DPRISM_BUILD_FUZZERS=OFF to silence this.")
  return()
endif()

# Targets and the seconds each fuzzes in ctest: about 60 s in all; the HTTP target, whose
# inputs each cross a socket, gets more. Every ctest run starts from the checked-in corpus
# with the same seed (-seed=1), so a failure reproduces with the same command;
# scripts/fuzz.sh explores with new seeds. HDF5 runs a fixed 1,000 inputs (about 5 s):
# libhdf5 itself (not Prism) crashes on some damaged files (tests/fuzz/libhdf5_crashes/),
# and a run that might reach one by chance would fail CI by chance.
set(PRISM_FUZZERS http:10 json:6 checkpoint:6 journal:6 spill:4 npy:6 csv:6 hdf5:10 manifest:4)
set(PRISM_FUZZ_FLAGS_hdf5 -runs=1000)

# The fuzz build compiles alongside the main one: at most half the cores, so the two
# together stay near the machine's.
cmake_host_system_information(RESULT _cores QUERY NUMBER_OF_LOGICAL_CORES)
math(EXPR _fuzz_jobs "(${_cores} + 1) / 2")
set(PRISM_FUZZ_JOBS ${_fuzz_jobs} CACHE STRING "Parallel compile jobs of the fuzz build")

set(PRISM_FUZZ_DIR ${PROJECT_BINARY_DIR}/fuzz)
set(_fuzz_binaries "")
foreach(entry IN LISTS PRISM_FUZZERS)
  string(REPLACE ":" ";" entry ${entry})
  list(GET entry 0 name)
  list(APPEND _fuzz_binaries ${PRISM_FUZZ_DIR}/${name}_fuzzer)
endforeach()

include(ExternalProject)
ExternalProject_Add(prism_fuzzers
  SOURCE_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz
  BINARY_DIR ${PRISM_FUZZ_DIR}
  CMAKE_ARGS -DCMAKE_C_COMPILER=${PRISM_FUZZ_CC} -DCMAKE_CXX_COMPILER=${PRISM_FUZZ_CXX}
             -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPRISM_SOURCE_DIR=${PROJECT_SOURCE_DIR}
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> -j ${PRISM_FUZZ_JOBS}
  BUILD_ALWAYS ON  # its own Ninja decides what changed in the Prism sources it compiles
  BUILD_BYPRODUCTS ${_fuzz_binaries}
  INSTALL_COMMAND "")

foreach(entry IN LISTS PRISM_FUZZERS)
  string(REPLACE ":" ";" entry ${entry})
  list(GET entry 0 name)
  list(GET entry 1 seconds)
  if(PRISM_FUZZ_SECONDS)
    set(seconds ${PRISM_FUZZ_SECONDS})
  endif()
  math(EXPR timeout "${seconds} + 90")
  add_test(NAME fuzz_${name}
           COMMAND ${PROJECT_SOURCE_DIR}/tests/fuzz/run.sh ${PRISM_FUZZ_DIR}/${name}_fuzzer ${seconds}
                   ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${name} ${PRISM_FUZZ_DIR}/ctest-runs/${name}
                   -seed=1 ${PRISM_FUZZ_FLAGS_${name}})
  set_tests_properties(fuzz_${name} PROPERTIES LABELS fuzz PROCESSORS 1 TIMEOUT ${timeout}
                       ENVIRONMENT PRISM_FUZZ_FRESH=1)
endforeach()
