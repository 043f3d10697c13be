# Runtime tests (label `runtime`): real PyTorch processes consume shardc plans
# (tests/runtime/README.md). They need a python3 with torch (Debian python3-torch;
# tools/common.sh installs it); without one they exit 77 and CTest reports them skipped.
# RESOURCE_LOCK keeps two 8-process launches from sharing the 2-core CI machine.
set(SHARDC_RUNTIME_DIR ${CMAKE_CURRENT_SOURCE_DIR}/runtime)

add_test(NAME runtime/adapter
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_RUNTIME_DIR}/test_adapter.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(runtime/adapter PROPERTIES LABELS "e2e;runtime" TIMEOUT 300
                     SKIP_RETURN_CODE 77)

foreach(test plans features negative)
  add_test(NAME runtime/${test}
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_RUNTIME_DIR}/run_runtime.py
                   --shardc $<TARGET_FILE:shardc> --test ${test})
  set_tests_properties(runtime/${test} PROPERTIES LABELS "e2e;runtime" TIMEOUT 600
                       SKIP_RETURN_CODE 77 RESOURCE_LOCK runtime_processes)
endforeach()

# Resharding by `shardc reshard`'s listing: registered once the command exists (src/reshard).
if(EXISTS ${PROJECT_SOURCE_DIR}/src/reshard)
  add_test(NAME runtime/reshard
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_RUNTIME_DIR}/run_runtime.py
                   --shardc $<TARGET_FILE:shardc> --test reshard)
  set_tests_properties(runtime/reshard PROPERTIES LABELS "e2e;runtime" TIMEOUT 600
                       SKIP_RETURN_CODE 77 RESOURCE_LOCK runtime_processes)
endif()
