# Runtime tests (label `runtime`): real PyTorch processes consume shardc plans
# (tests/runtime/README.md). They are pytest tests run on the project's environment
# (torch 2.13.0, CPU: tools/venv creates .venv and tools/test passes
# -DSHARDC_TORCH_PYTHON=.venv/bin/python) as `${SHARDC_TORCH_PYTHON} -m pytest FILE::TEST`.
# Any non-zero pytest exit fails the test, including 5 (no test collected), so a renamed
# test cannot pass silently. Only a build configured without SHARDC_TORCH_PYTHON (a
# C++-only build) registers them as skipped (exit 77). RESOURCE_LOCK keeps two 8-process
# launches from sharing the 2-core CI machine.
set(SHARDC_RUNTIME_DIR ${CMAKE_CURRENT_SOURCE_DIR}/runtime)
set(SHARDC_TORCH_PYTHON "" CACHE FILEPATH "python with torch 2.13 for the runtime and agreement tests (tools/venv)")

# shardc_runtime_test(NAME NODE [LOCK]): runtime/NAME runs pytest node NODE (tests/runtime).
function(shardc_runtime_test name node)
  if(SHARDC_TORCH_PYTHON)
    add_test(NAME runtime/${name}
             COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -c ${SHARDC_RUNTIME_DIR}/pytest.ini
                     --rootdir ${SHARDC_RUNTIME_DIR} ${SHARDC_RUNTIME_DIR}/${node}
                     --shardc $<TARGET_FILE:shardc>
             WORKING_DIRECTORY ${SHARDC_RUNTIME_DIR})
  else()
    add_test(NAME runtime/${name}
             COMMAND ${Python3_EXECUTABLE} -c
                     "print('SKIPPED: configure with -DSHARDC_TORCH_PYTHON=.venv/bin/python (tools/venv)'); raise SystemExit(77)")
  endif()
  set_tests_properties(runtime/${name} PROPERTIES LABELS "e2e;runtime" TIMEOUT 600
                       SKIP_RETURN_CODE 77)
  if(ARGC GREATER 2)
    set_tests_properties(runtime/${name} PROPERTIES RESOURCE_LOCK runtime_processes)
  endif()
endfunction()

shardc_runtime_test(adapter test_adapter.py)
shardc_runtime_test(flat test_flat.py)
shardc_runtime_test(local_attributes test_local_attributes.py)
shardc_runtime_test(hostile test_hostile.py lock)  # test_model_and_launch_misuse: 4 processes
shardc_runtime_test(plans test_distributed.py::test_plans lock)
shardc_runtime_test(features test_distributed.py::test_features lock)
shardc_runtime_test(flat_gloo test_distributed.py::test_flat_buffers lock)
shardc_runtime_test(negative test_distributed.py::test_negative lock)
shardc_runtime_test(dtensor test_dtensor.py::test_dtensors lock)
shardc_runtime_test(fsdp test_fsdp.py lock)
shardc_runtime_test(train test_train.py lock)
shardc_runtime_test(hf test_hf.py lock)
# The communication witness (issue 26 item 5): bytes really sent on gloo = `shardc cost`.
shardc_runtime_test(comm test_comm_witness.py lock)
set_tests_properties(runtime/comm PROPERTIES LABELS "e2e;runtime;torch")
# Resharding by `shardc reshard`'s listing: registered once the command exists (src/reshard).
if(EXISTS ${PROJECT_SOURCE_DIR}/src/reshard)
  shardc_runtime_test(reshard test_distributed.py::test_reshard lock)
  shardc_runtime_test(dcp test_dtensor.py::test_dcp_reshard lock)
endif()

# The adapter's annotations, checked by mypy --strict (settings in tools/python/pyproject.toml).
if(SHARDC_TORCH_PYTHON)
  # mypy's caches live outside the build tree, as ccache's does, so a fresh clone or build
  # tree on this machine starts warm: torch's and transformers' stubs are analysed once
  # (about 80 s on 2 cores), then each run takes seconds. mypy re-checks every cached module
  # against its source (size, mtime, hash), so a stale entry is never trusted. One cache per
  # run: the two runs use other options (--strict for the package, the default for the
  # tests), and mypy treats an entry written under other options as stale, so one shared
  # cache made each run re-analyse torch after the other (36 s + 82 s on every run).
  # Override with -DSHARDC_MYPY_CACHE_DIR=DIR.
  if(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
    set(shardc_user_cache "$ENV{XDG_CACHE_HOME}")
  elseif(DEFINED ENV{HOME} AND NOT "$ENV{HOME}" STREQUAL "")
    set(shardc_user_cache "$ENV{HOME}/.cache")
  else()
    set(shardc_user_cache "${CMAKE_BINARY_DIR}")
  endif()
  set(SHARDC_MYPY_CACHE_DIR "${shardc_user_cache}/shardc/mypy"
      CACHE PATH "mypy's caches for runtime/mypy (package/) and runtime/mypy-tests (tests/)")
  add_test(NAME runtime/mypy
           COMMAND ${SHARDC_TORCH_PYTHON} -m mypy --cache-dir ${SHARDC_MYPY_CACHE_DIR}/package
                   --config-file ${PROJECT_SOURCE_DIR}/tools/python/pyproject.toml
                   ${PROJECT_SOURCE_DIR}/tools/python/shardc_runtime
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tools/python)
  # The timeouts guard against a hang on a loaded machine; nothing is timed.
  set_tests_properties(runtime/mypy PROPERTIES LABELS "runtime;lint" TIMEOUT 900)
  # The tests' annotations (mypy's default mode: the package is checked --strict above).
  add_test(NAME runtime/mypy-tests
           COMMAND ${SHARDC_TORCH_PYTHON} -m mypy --cache-dir ${SHARDC_MYPY_CACHE_DIR}/tests
                   --config-file ${SHARDC_RUNTIME_DIR}/mypy.ini ${SHARDC_RUNTIME_DIR}
           WORKING_DIRECTORY ${SHARDC_RUNTIME_DIR})
  set_tests_properties(runtime/mypy-tests PROPERTIES LABELS "runtime;lint" TIMEOUT 900)
endif()
