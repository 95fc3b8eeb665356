# What keeps Prism's build short (measured in perf/README.md, "Build time"):
#
# * LibTorch's <torch/torch.h> is precompiled once and reused by every translation unit
#   that includes it (target_precompile_headers REUSE_FROM). A unit that includes it costs
#   about 32 s on this machine alone (40-60 s beside another compile), half of it parsing
#   (what a precompiled header saves) and half instantiating templates at the unit's end
#   (what it cannot: an empty unit with the precompiled header still takes 15 s). So the
#   header goes only to the units that include LibTorch (found by following their
#   includes), never to a whole target: a unit without LibTorch keeps its 2-10 s.
# * GoogleTest executables get GoogleTest and prism/api.h precompiled (2-3 s a unit).
# * Unity builds (PRISM_UNITY_BUILD, on by default): a target's sources compile together,
#   up to 16 in one unit, so the headers they share (Prism's, Boost's, LibTorch's templates
#   instantiated at a unit's end) are compiled once per target, not once per source:
#   prism_head 85 -> 36 s, prism_train 105 -> 52 s. The price: a change to one source
#   recompiles its unit; -DPRISM_UNITY_BUILD=OFF for a long edit-compile session. Names
#   at file scope (anonymous namespaces included) must then be unique within a target.
# * RelWithDebInfo compiles with line tables only (-g1: backtraces, gdb's bt, perf and
#   callgrind still name every function and line) instead of full debug information (-g:
#   also types and local variables), a third of a test's compile time and 13% of a LibTorch
#   unit's. -DPRISM_FULL_DEBUG_INFO=ON gives -g back for a debugging session.
# * mold links when installed (PRISM_MOLD): the 92 links of a full build took 263 s with
#   GNU ld.
# * ccache, when installed (PRISM_CCACHE), for rebuilds of the same sources.
#
# GCC accepts a precompiled header only when it was made with the same code-generation
# flags as its user: libraries compile with -fPIC and executables with -fPIE, so there is
# a donor target per set (prism_pch_torch_lib, prism_pch_test_exe), and -Winvalid-pch
# (prism_warnings) reports a header GCC refused.
#
# prism_precompile_headers(), called once every target exists, gives every static library
# under src/ and every executable under tests/, perf/ and apps/ what its units include. An
# executable that includes LibTorch compiles with -fPIC, as the libraries do, and reuses
# their header. A new target needs nothing of its own.

option(PRISM_PCH "Precompile LibTorch and GoogleTest once and reuse them" ON)
option(PRISM_UNITY_BUILD "Compile each target's sources together, up to 16 a unit (CMake's unity build)" ON)
if(PRISM_UNITY_BUILD AND NOT DEFINED CMAKE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)
endif()
if(CMAKE_UNITY_BUILD)
  # GCC warns when a class in an included file has a member of an anonymous-namespace type
  # (another unit could see a different type); a unity unit includes its sources, so every
  # source's private Impl would warn (9 of them), though each source is still compiled once.
  target_compile_options(prism_warnings INTERFACE -Wno-subobject-linkage)
endif()
option(PRISM_FULL_DEBUG_INFO "RelWithDebInfo with full debug information (-g), not line tables (-g1)" OFF)
if(NOT PRISM_FULL_DEBUG_INFO)
  string(REGEX REPLACE "(^| )-g( |$)" "\\1-g1\\2" CMAKE_CXX_FLAGS_RELWITHDEBINFO "${CMAKE_CXX_FLAGS_RELWITHDEBINFO}")
endif()

find_program(PRISM_MOLD_PROGRAM mold)
if(PRISM_MOLD_PROGRAM)
  option(PRISM_MOLD "Link with mold (found at ${PRISM_MOLD_PROGRAM})" ON)
  if(PRISM_MOLD)
    add_link_options(-fuse-ld=mold)
  endif()
endif()

find_program(PRISM_CCACHE_PROGRAM ccache)
if(PRISM_CCACHE_PROGRAM)
  option(PRISM_CCACHE "Compile through ccache (found at ${PRISM_CCACHE_PROGRAM})" ON)
  if(PRISM_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
    # pch_defines and time_macros: ccache may then serve results built with a precompiled
    # header; include_file_*time: headers CMake regenerates keep their cached results.
    set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
        CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
        ${PRISM_CCACHE_PROGRAM})
  endif()
endif()

set(_prism_pch_torch_lib_headers <torch/torch.h>)
set(_prism_pch_test_exe_headers <gtest/gtest.h> <gmock/gmock.h> [["prism/api.h"]])

# The donors: one object library per header set, with an empty source of its own.
set(_prism_pch_dir ${CMAKE_CURRENT_LIST_DIR})
function(_prism_pch_donor set)
  set(donor prism_pch_${set})
  if(TARGET ${donor})
    return()
  endif()
  add_library(${donor} OBJECT ${_prism_pch_dir}/pch_donor.cc)
  target_include_directories(${donor} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${donor} PRIVATE MPI::MPI_CXX Boost::serialization Threads::Threads)
  if(set MATCHES "^torch")
    target_link_libraries(${donor} PRIVATE ${TORCH_LIBRARIES})
  endif()
  if(set MATCHES "_exe$")
    find_package(GTest REQUIRED)  # tests/ found it, but its targets are not seen up here
    target_link_libraries(${donor} PRIVATE GTest::gtest GTest::gmock)
    # Compile as executables' sources do: -fPIE (Debian's default).
    set_target_properties(${donor} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  endif()
  target_compile_features(${donor} PRIVATE cxx_std_20)
  target_precompile_headers(${donor} PRIVATE ${_prism_pch_${set}_headers})
endfunction()

# Whether a file includes LibTorch, itself or through Prism's headers (memoized).
function(_prism_includes_torch file out)
  get_property(known GLOBAL PROPERTY _prism_torch_${file} SET)
  if(known)
    get_property(answer GLOBAL PROPERTY _prism_torch_${file})
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY _prism_torch_${file} FALSE)  # an include cycle ends here
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  get_filename_component(dir ${file} DIRECTORY)
  set(answer FALSE)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*" "\\1" header "${line}")
    if(header MATCHES "^(torch|ATen|c10)/")
      set(answer TRUE)
      break()
    endif()
    foreach(root ${dir} ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/apps)
      if(EXISTS ${root}/${header} AND NOT IS_DIRECTORY ${root}/${header})
        _prism_includes_torch(${root}/${header} nested)
        if(nested)
          set(answer TRUE)
        endif()
        break()
      endif()
    endforeach()
    if(answer)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY _prism_torch_${file} ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

function(_prism_targets_in dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _prism_targets_in(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(prism_precompile_headers)
  if(NOT PRISM_PCH)
    return()
  endif()
  _prism_targets_in(${PROJECT_SOURCE_DIR} targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(source_dir ${target} SOURCE_DIR)
    file(RELATIVE_PATH where ${PROJECT_SOURCE_DIR} ${source_dir})
    if(type STREQUAL "STATIC_LIBRARY" AND where MATCHES "^src")
      set(kind lib)
    elseif(type STREQUAL "EXECUTABLE" AND where MATCHES "^(tests|perf|apps)")
      set(kind exe)
    else()
      continue()  # the Python module, the donors
    endif()
    get_target_property(links ${target} LINK_LIBRARIES)
    list(REMOVE_ITEM links prism_warnings)
    if(NOT links MATCHES "prism|torch")
      continue()  # no Prism of its own (the RL environments, plain MPI benchmarks)
    endif()
    # GoogleTest's definitions (GTEST_HAS_PTHREAD) are part of the executables' header
    # sets: a benchmark without GoogleTest gets no precompiled header.
    set(gtest FALSE)
    foreach(link IN LISTS links)
      if(TARGET ${link})
        get_target_property(more ${link} INTERFACE_LINK_LIBRARIES)
        set(link "${link};${more}")
      endif()
      if(link MATCHES "GTest::")
        set(gtest TRUE)
      endif()
    endforeach()
    if(kind STREQUAL "exe" AND NOT gtest)
      set(kind app)
    endif()
    # Each unit that includes LibTorch gets it precompiled; the others get nothing (a
    # library) or GoogleTest and prism/api.h (a test).
    get_target_property(sources ${target} SOURCES)
    set(torch_units "")
    set(other_units "")
    foreach(source IN LISTS sources)
      if(source MATCHES "^\\$<" OR NOT source MATCHES "\\.cc$")
        continue()
      endif()
      if(NOT IS_ABSOLUTE ${source})
        set(source ${source_dir}/${source})
      endif()
      _prism_includes_torch(${source} torch)
      if(torch)
        list(APPEND torch_units ${source})
      else()
        list(APPEND other_units ${source})
      endif()
    endforeach()
    if(torch_units)
      # An executable (app, benchmark or test) compiles as the libraries do, -fPIC (an
      # executable of -fPIC objects still links as PIE), and reuses their LibTorch header:
      # a second header set for tests (LibTorch with GoogleTest) cost 92 s to build, more
      # than its 14 test units spend parsing GoogleTest. (POSITION_INDEPENDENT_CODE would
      # give an executable -fPIE.)
      if(NOT kind STREQUAL "lib")
        target_compile_options(${target} PRIVATE -fPIC)
      endif()
      _prism_pch_donor(torch_lib)
      target_precompile_headers(${target} REUSE_FROM prism_pch_torch_lib)
      set_source_files_properties(${other_units} TARGET_DIRECTORY ${target}
                                  PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    elseif(kind STREQUAL "exe" AND other_units)
      _prism_pch_donor(test_exe)
      target_precompile_headers(${target} REUSE_FROM prism_pch_test_exe)
    endif()
  endforeach()
endfunction()
