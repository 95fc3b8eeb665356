# Whole-program checks: the apps run under mpirun, and an installed Prism is usable from a
# separate CMake project (find_package(Prism) -> prism::core).
find_package(MPI REQUIRED COMPONENTS CXX)
set(PRISM_MPIRUN ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe)

add_test(NAME app_core_demo_1rank COMMAND $<TARGET_FILE:core_demo>)
add_test(NAME app_core_demo_3ranks COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:core_demo>)
set_tests_properties(app_core_demo_1rank app_core_demo_3ranks PROPERTIES
  TIMEOUT 120 LABELS apps PASS_REGULAR_EXPRESSION "fib\\(12\\) = 144.*done")
set_tests_properties(app_core_demo_3ranks PROPERTIES PROCESSORS 3)
if(TARGET batch_predict)
  # The default mode: ReadHdf5 -> MapBatches(model class in a pool of 1..3 actors) ->
  # WriteHdf5, every prediction checked against a local run.
  add_test(NAME app_batch_predict_3ranks
           COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:batch_predict> --max-actors=3
                   --out=${PROJECT_BINARY_DIR}/app_batch_predict_out)
  set_tests_properties(app_batch_predict_3ranks PROPERTIES PROCESSORS 3
    TIMEOUT 120 LABELS "apps;data" PASS_REGULAR_EXPRESSION "OK: all 12288 predictions match")
  add_test(NAME app_batch_predict_tasks_3ranks
           COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:batch_predict> --mode=tasks)
  add_test(NAME app_batch_predict_actors_3ranks
           COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:batch_predict> --mode=actors)
  set_tests_properties(app_batch_predict_tasks_3ranks app_batch_predict_actors_3ranks PROPERTIES PROCESSORS 3
    TIMEOUT 120 LABELS apps PASS_REGULAR_EXPRESSION "OK: all 12 shards match")
endif()

if(TARGET train_fashion_mnist)
  # The main demo, shortened: 2 workers on 3 ranks, and one worker without mpirun. Each
  # restores its final checkpoint into a fresh model and checks the reported accuracy.
  set(_fmnist_store ${PROJECT_BINARY_DIR}/app_train_fashion_mnist_results)
  add_test(NAME app_train_fashion_mnist_3ranks
    COMMAND ${CMAKE_COMMAND} -E env PRISM_STORAGE_PATH=${_fmnist_store}
            ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:train_fashion_mnist> --workers=2 --epochs=1
            --train-samples=3000 --name=ci_3ranks_$<CONFIG>)
  add_test(NAME app_train_fashion_mnist_1rank
    COMMAND ${CMAKE_COMMAND} -E env PRISM_STORAGE_PATH=${_fmnist_store}
            $<TARGET_FILE:train_fashion_mnist> --workers=1 --epochs=1 --train-samples=2000
            --name=ci_1rank_$<CONFIG>)
  # The same through prism::data: the IDX files converted once to HDF5, streamed to the
  # workers as equal shards (ReadHdf5 -> TorchTrainer(datasets) -> GetDatasetShard).
  add_test(NAME app_train_fashion_mnist_hdf5_3ranks
    COMMAND ${CMAKE_COMMAND} -E env PRISM_STORAGE_PATH=${_fmnist_store}
            ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:train_fashion_mnist> --workers=2 --epochs=1
            --train-samples=3000 --test-samples=2000 --data=hdf5 --name=ci_hdf5_3ranks_$<CONFIG>)
  set_tests_properties(app_train_fashion_mnist_3ranks app_train_fashion_mnist_1rank
                       app_train_fashion_mnist_hdf5_3ranks PROPERTIES
    TIMEOUT 300 LABELS apps
    FIXTURES_REQUIRED fmnist_clean
    PASS_REGULAR_EXPRESSION "OK: the restored model matches the reported accuracy")
  set_tests_properties(app_train_fashion_mnist_hdf5_3ranks PROPERTIES LABELS "apps;data")
  set_tests_properties(app_train_fashion_mnist_3ranks app_train_fashion_mnist_hdf5_3ranks PROPERTIES PROCESSORS 3)
  # A storage path one worker's rank cannot see (its own mount namespace): a clear error
  # naming the rank, before training starts.
  add_test(NAME failure_storage_not_shared
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/failure/storage_not_shared.sh train ${PRISM_MPIRUN} --
            $<TARGET_FILE:train_fashion_mnist>)
  set_tests_properties(failure_storage_not_shared PROPERTIES PROCESSORS 3
    TIMEOUT 150 LABELS failure SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "storage_path is not shared: rank 2 \\(host [^)]*\\) cannot see the probe file")
  # A resume after the newest checkpoint's model.h5 was overwritten in the middle (size
  # unchanged): it names that checkpoint and resumes from the newest intact one; with every
  # checkpoint damaged it fails, naming them, and trains nothing.
  add_test(NAME failure_corrupt_checkpoint
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/failure/corrupt_checkpoint.sh ${PRISM_MPIRUN} --
            $<TARGET_FILE:train_fashion_mnist>)
  set_tests_properties(failure_corrupt_checkpoint PROPERTIES PROCESSORS 3
    TIMEOUT 300 LABELS failure PASS_REGULAR_EXPRESSION "PASS: corrupt checkpoint")
  # The tuning demo, shortened: 4 trials of 2 epochs with ASHA on 3 ranks; it scores the best
  # trial's checkpoint again and checks it against the reported accuracy.
  add_test(NAME app_tune_fashion_mnist_3ranks
    COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:tune_fashion_mnist> --num-samples=4 --epochs=2
            --train-samples=2000 --test-samples=300 --storage-path=${_fmnist_store}
            --name=ci_tune_$<CONFIG>)
  set_tests_properties(app_tune_fashion_mnist_3ranks PROPERTIES PROCESSORS 3
    TIMEOUT 300 LABELS "apps;tune" FIXTURES_REQUIRED fmnist_clean
    PASS_REGULAR_EXPRESSION "OK: the best checkpoint scores what its trial reported")
  # A tuning experiment killed with SIGKILL (mpirun and every rank) once its journal holds a
  # few results, then --restore: every trial finishes once, none lost, added or repeated.
  add_test(NAME failure_tune_kill9
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/failure/tune_kill9.sh ${PRISM_MPIRUN} --
            $<TARGET_FILE:tune_fashion_mnist>)
  set_tests_properties(failure_tune_kill9 PROPERTIES PROCESSORS 3
    TIMEOUT 240 LABELS "failure;tune" PASS_REGULAR_EXPRESSION "PASS: tune kill9")
  add_test(NAME app_train_fashion_mnist_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${_fmnist_store})
  set_tests_properties(app_train_fashion_mnist_clean PROPERTIES FIXTURES_SETUP fmnist_clean)
endif()

add_test(NAME install_find_package
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/install/check_install.sh ${PROJECT_BINARY_DIR})
set_tests_properties(install_find_package PROPERTIES TIMEOUT 600 LABELS install PROCESSORS 2
  PASS_REGULAR_EXPRESSION "consumer got 42.*consumer got 42")

# An unserializable type is a compile error that says what to add (not a runtime failure).
add_test(NAME compile_fail_unserializable
  COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -I${PROJECT_SOURCE_DIR}/include
          ${CMAKE_CURRENT_LIST_DIR}/compile_fail/unserializable.cc)
set_tests_properties(compile_fail_unserializable PROPERTIES TIMEOUT 120 LABELS unit
  PASS_REGULAR_EXPRESSION "prism: the return type of a remote function must be serializable")

# Ray's rules where a Ray program cannot build on Prism, each a compile error that says why:
# a cross-language call, and a value passed for an ObjectRef<T> parameter (issue 41).
add_test(NAME compile_fail_ray_cross_language
  COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -I${PROJECT_SOURCE_DIR}/include
          ${CMAKE_CURRENT_LIST_DIR}/compile_fail/ray_cross_language.cc)
set_tests_properties(compile_fail_ray_cross_language PROPERTIES TIMEOUT 120 LABELS unit
  PASS_REGULAR_EXPRESSION "prism: cross-language calls \\(Python or Java functions and actors\\) are not supported")
add_test(NAME compile_fail_object_ref_parameter
  COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -I${PROJECT_SOURCE_DIR}/include
          ${CMAKE_CURRENT_LIST_DIR}/compile_fail/object_ref_parameter.cc)
set_tests_properties(compile_fail_object_ref_parameter PROPERTIES TIMEOUT 120 LABELS unit
  PASS_REGULAR_EXPRESSION "prism: this parameter is an ObjectRef<T>: pass an ObjectRef<T>")

# The boundaries the build enforces (src/CMakeLists.txt, prism_layer and prism_sees): a
# source compiled with a target's own include settings cannot reach a folder the target does
# not see. Each test builds a target outside "all" (so the build itself stays green) and
# expects the compiler's "No such file" for the forbidden header.
function(prism_compile_fail name like source forbidden)
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/compile_fail/${source})
  target_include_directories(${name} PRIVATE $<TARGET_PROPERTY:${like},INCLUDE_DIRECTORIES>)
  target_link_libraries(${name} PRIVATE prism_core)  # MPI and Boost, as the target has them
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS unit RESOURCE_LOCK prism_build_dir
    PASS_REGULAR_EXPRESSION "${forbidden}: No such file or directory")
endfunction()
prism_compile_fail(compile_fail_library_includes_head prism_tune library_includes_head.cc head/head.h)
prism_compile_fail(compile_fail_transport_includes_node prism_transport transport_includes_node.cc
  node_manager/node.h)

# The prism::serve demo end to end (tests/apps/serve_fashion_mnist_test.py): a tiny
# checkpoint trained, served by 2 replicas on 3 ranks (127.0.0.1, port 0, endpoint file),
# answers from curl and Python requests checked against a local forward pass, 400 on bad
# images, then SIGTERM to rank 0: drained, exit 0.
if(TARGET serve_fashion_mnist AND TARGET train_fashion_mnist)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_FOUND)
    add_test(NAME app_serve_fashion_mnist_3ranks
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/apps/serve_fashion_mnist_test.py
              "--mpirun=${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe"
              --train=$<TARGET_FILE:train_fashion_mnist> --serve=$<TARGET_FILE:serve_fashion_mnist>
              --work=${PROJECT_BINARY_DIR}/app_serve_fashion_mnist_$<CONFIG>)
    set_tests_properties(app_serve_fashion_mnist_3ranks PROPERTIES PROCESSORS 3
      TIMEOUT 600 LABELS "apps;serve" PASS_REGULAR_EXPRESSION "serve_fashion_mnist: ok"
      ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
  endif()
endif()

# Level 4: a real local Slurm (skipped without root). See tests/slurm/run_slurm_test.sh for
# what each case submits and checks. slurm_start starts one Slurm for all the cases and
# slurm_stop stops it (a ctest fixture: `ctest -R slurm_core` runs them too). The cases
# run in two lanes, one case at a time in each (a lock per lane), so that two jobs at most
# share the 2 cores with the other tests; the lanes hold about the same time (measured,
# docs/TEST_TIMES.md). Each case counts one processor: its jobs' 2-3 ranks spend most of
# the test waiting (for Slurm, a signal, a requeue), and counting them would keep every
# 3-rank test waiting behind the Slurm lanes. A high COST starts them first.
set(_slurm_lane_a perf)  # perf: jobs/perf.sbatch in quick mode
set(_slurm_lane_b core)
# recovery: a lost rank survived under mpirun --enable-recovery in a batch job (8 s).
list(APPEND _slurm_lane_a recovery)
if(TARGET train_fashion_mnist)
  # The training demo: arrays, preemption at four moments; the tuning demo preempted,
  # requeued and restored.
  list(APPEND _slurm_lane_a timelimit usr1 setup)
  list(APPEND _slurm_lane_b term early array tune)
endif()
if(TARGET train_script)
  list(APPEND _slurm_lane_b script)  # a Python DDP script preempted, requeued and resumed
endif()
if(PRISM_BUILD_PYTHON)
  list(APPEND _slurm_lane_a python)  # import prism on 3 ranks through srun
  # Ray's Tune and Train examples in Python (jobs/python_*.sbatch) preempted, requeued and
  # resumed.
  list(APPEND _slurm_lane_a python_tune)
  if(PRISM_BUILD_TRAIN)
    list(APPEND _slurm_lane_b python_train)
    # Ray's Data, RLlib and Serve examples in Python (jobs/python_{data,rllib,serve}.sbatch).
    list(APPEND _slurm_lane_b python_libs)
  endif()
endif()
foreach(_fixture start stop)
  add_test(NAME slurm_${_fixture}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/slurm/run_slurm_test.sh ${PROJECT_BINARY_DIR} ${_fixture})
  set_tests_properties(slurm_${_fixture} PROPERTIES TIMEOUT 180 LABELS slurm SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "PASS: slurm ${_fixture}")
endforeach()
set_tests_properties(slurm_start PROPERTIES FIXTURES_SETUP prism_slurm COST 2000)
set_tests_properties(slurm_stop PROPERTIES FIXTURES_CLEANUP prism_slurm)
foreach(_lane a b)
  foreach(_case IN LISTS _slurm_lane_${_lane})
    add_test(NAME slurm_${_case}
      COMMAND ${CMAKE_CURRENT_LIST_DIR}/slurm/run_slurm_test.sh ${PROJECT_BINARY_DIR} ${_case})
    set_tests_properties(slurm_${_case} PROPERTIES TIMEOUT 600 LABELS slurm SKIP_RETURN_CODE 77
      PASS_REGULAR_EXPRESSION "PASS: slurm ${_case}" FIXTURES_REQUIRED prism_slurm
      RESOURCE_LOCK prism_slurm_lane_${_lane} PROCESSORS 1 COST 1000)
  endforeach()
endforeach()
if(TARGET train_script)
  set_tests_properties(slurm_script PROPERTIES LABELS "slurm;script")
endif()
if(PRISM_BUILD_PYTHON)
  set_tests_properties(slurm_python PROPERTIES LABELS "slurm;python")
  set_tests_properties(slurm_python_tune PROPERTIES LABELS "slurm;python_tune")
  if(PRISM_BUILD_TRAIN)
    set_tests_properties(slurm_python_train PROPERTIES LABELS "slurm;python_train")
    set_tests_properties(slurm_python_libs PROPERTIES LABELS "slurm;python_data;python_serve;python_rl")
  endif()
endif()

# Ray C++ compatibility: a Ray-style program, only its include line changed.
add_executable(ray_style_program ${CMAKE_CURRENT_LIST_DIR}/compat/ray_style_program.cc)
target_link_libraries(ray_style_program PRIVATE prism::core prism_warnings)
add_test(NAME compat_ray_style_1rank COMMAND $<TARGET_FILE:ray_style_program>)
add_test(NAME compat_ray_style_3ranks COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:ray_style_program>)
set_tests_properties(compat_ray_style_1rank compat_ray_style_3ranks PROPERTIES
  TIMEOUT 120 LABELS apps PASS_REGULAR_EXPRESSION "all checks passed")
set_tests_properties(compat_ray_style_3ranks PROPERTIES PROCESSORS 3)

if(TARGET rl_cartpole)
  # PPO on CartPole-v1 with 2 env runners on 3 ranks, shortened (stop at a mean return of
  # 150): saved, restored into a new Algorithm and evaluated greedily.
  add_test(NAME app_rl_cartpole_3ranks
    COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:rl_cartpole> --runners=2 --stop-return=150
            --max-iterations=40 --eval-episodes=3 --checkpoint-dir=${PROJECT_BINARY_DIR}/app_rl_cartpole_ckpt)
  set_tests_properties(app_rl_cartpole_3ranks PROPERTIES PROCESSORS 3
    TIMEOUT 180 LABELS "apps;rl"
    PASS_REGULAR_EXPRESSION "reached return .*restored.*greedy evaluation of the restored policy")
  # The same app on Pendulum-v1 (continuous actions, RLlib's Pendulum settings), shortened:
  # from about -1200 (a random policy) to a mean return of -900; --curve's CSV has a row per
  # iteration.
  set(_pendulum_curve ${PROJECT_BINARY_DIR}/app_rl_pendulum_curve.csv)
  add_test(NAME app_rl_pendulum_3ranks
    COMMAND bash -c "csv=\"$1\"; shift; rm -f \"$csv\" && \"$@\" && rows=$(grep -c '^Pendulum-v1,' \"$csv\") && echo \"curve rows: $rows\" && test $rows -ge 2"
            _ ${_pendulum_curve} ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:rl_cartpole> --env=Pendulum-v1 --runners=2
            --envs-per-runner=4 --train-batch-size=1024 --minibatch-size=64 --num-epochs=6 --lr=3e-4
            --gamma=0.95 --lambda=0.1 --vf-loss-coeff=1 --hidden=128,128 --stop-return=-900
            --max-iterations=120 --eval-episodes=2 --curve=${_pendulum_curve}
            --checkpoint-dir=${PROJECT_BINARY_DIR}/app_rl_pendulum_ckpt)
  set_tests_properties(app_rl_pendulum_3ranks PROPERTIES PROCESSORS 3 TIMEOUT 240 LABELS "apps;rl")
endif()
