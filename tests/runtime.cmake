# Runtime tests (label `runtime`): real PyTorch processes consume shardc plans
# (tests/runtime/README.md). They run on the project's environment (torch 2.13.0, CPU:
# tools/venv creates .venv and tools/test passes -DSHARDC_TORCH_PYTHON=.venv/bin/python).
# When SHARDC_TORCH_PYTHON is set, a python without torch fails the tests; only a build
# configured without it (a C++-only build) lets them exit 77 and CTest report them skipped.
# RESOURCE_LOCK keeps two 8-process launches from sharing the 2-core CI machine.
set(SHARDC_RUNTIME_DIR ${CMAKE_CURRENT_SOURCE_DIR}/runtime)
set(SHARDC_TORCH_PYTHON "" CACHE FILEPATH "python with torch 2.13 for the runtime and agreement tests (tools/venv)")
if(SHARDC_TORCH_PYTHON)
  set(SHARDC_TORCH_ENV "SHARDC_TORCH_PYTHON=${SHARDC_TORCH_PYTHON};SHARDC_REQUIRE_TORCH=1")
else()
  set(SHARDC_TORCH_ENV "SHARDC_TORCH_PYTHON=")
endif()

add_test(NAME runtime/adapter
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_RUNTIME_DIR}/test_adapter.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(runtime/adapter PROPERTIES LABELS "e2e;runtime" TIMEOUT 300
                     SKIP_RETURN_CODE 77 ENVIRONMENT "${SHARDC_TORCH_ENV}")

foreach(test plans features negative)
  add_test(NAME runtime/${test}
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_RUNTIME_DIR}/run_runtime.py
                   --shardc $<TARGET_FILE:shardc> --test ${test})
  set_tests_properties(runtime/${test} PROPERTIES LABELS "e2e;runtime" TIMEOUT 600
                       SKIP_RETURN_CODE 77 RESOURCE_LOCK runtime_processes
                       ENVIRONMENT "${SHARDC_TORCH_ENV}")
endforeach()

# Resharding by `shardc reshard`'s listing: registered once the command exists (src/reshard).
if(EXISTS ${PROJECT_SOURCE_DIR}/src/reshard)
  add_test(NAME runtime/reshard
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_RUNTIME_DIR}/run_runtime.py
                   --shardc $<TARGET_FILE:shardc> --test reshard)
  set_tests_properties(runtime/reshard PROPERTIES LABELS "e2e;runtime" TIMEOUT 600
                       SKIP_RETURN_CODE 77 RESOURCE_LOCK runtime_processes
                       ENVIRONMENT "${SHARDC_TORCH_ENV}")
endif()
