# Whole-program checks: the apps run under mpirun, and an installed Prism is usable from a
# separate CMake project (find_package(Prism) -> prism::core).
find_package(MPI REQUIRED COMPONENTS CXX)
set(PRISM_MPIRUN ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe)

add_test(NAME app_core_demo_1rank COMMAND $<TARGET_FILE:core_demo>)
add_test(NAME app_core_demo_3ranks COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:core_demo>)
set_tests_properties(app_core_demo_1rank app_core_demo_3ranks PROPERTIES
  TIMEOUT 120 LABELS apps PASS_REGULAR_EXPRESSION "fib\\(12\\) = 144.*done")
if(TARGET batch_predict)
  add_test(NAME app_batch_predict_3ranks COMMAND ${PRISM_MPIRUN} -n 3 $<TARGET_FILE:batch_predict>)
  set_tests_properties(app_batch_predict_3ranks PROPERTIES TIMEOUT 120 LABELS apps)
endif()

add_test(NAME install_find_package
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/install/check_install.sh ${PROJECT_BINARY_DIR})
set_tests_properties(install_find_package PROPERTIES TIMEOUT 300 LABELS install
  PASS_REGULAR_EXPRESSION "consumer got 42")
