# PyTorch agreement suite (label `torch`): shardc's plans judged by real DTensor and FSDP2
# on a fake process group (tests/torch/README.md). Runs on the project's environment
# (SHARDC_TORCH_PYTHON, from tools/venv; tools/test always sets it). A build configured
# without it (C++ only) registers one test that fails and says how to get it.
set(SHARDC_TORCH_DIR ${CMAKE_CURRENT_SOURCE_DIR}/torch)
if(SHARDC_TORCH_PYTHON)
  # -p no:cacheprovider: no .pytest_cache in the source tree
  # Every shipped plan and every valid case is one pytest node (test_pytorch_agrees[<id>]);
  # CTest runs them 5 to a test, plans and cases apart (torch/agreement/plans-1 ...,
  # cases-1 ...): one pytest process then pays torch's import (about 5 s) for 5 nodes, and
  # CTest still spreads the groups over the cores, each with its own time bound. -v names
  # every node with its verdict; one node alone: pytest test_agreement.py -k 'plan/gpt2'.
  file(GLOB shardc_judge_recipes CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/plans/*.recipe.yaml)
  file(GLOB shardc_judge_cases LIST_DIRECTORIES true CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/cases/*)
  set(shardc_judge_plans)
  foreach(recipe ${shardc_judge_recipes})
    get_filename_component(name ${recipe} NAME)
    string(REPLACE ".recipe.yaml" "" name ${name})
    list(APPEND shardc_judge_plans plan/${name})
  endforeach()
  set(shardc_judge_case_ids)
  foreach(case ${shardc_judge_cases})
    if(IS_DIRECTORY ${case} AND EXISTS ${case}/expected.json)
      file(READ ${case}/expected.json expected)
      if(expected MATCHES "\"expect_error\": null")
        get_filename_component(name ${case} NAME)
        list(APPEND shardc_judge_case_ids case/${name})
      endif()
    endif()
  endforeach()
  foreach(kind plans cases)
    if(kind STREQUAL "plans")
      set(ids ${shardc_judge_plans})
    else()
      set(ids ${shardc_judge_case_ids})
    endif()
    list(LENGTH ids count)
    set(first 0)
    set(group 1)
    while(first LESS count)
      list(SUBLIST ids ${first} 5 members)
      set(nodes)
      foreach(id ${members})
        list(APPEND nodes "${SHARDC_TORCH_DIR}/test_agreement.py::test_pytorch_agrees[${id}]")
      endforeach()
      add_test(NAME torch/agreement/${kind}-${group}
               COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -v -p no:cacheprovider -rfE ${nodes}
               WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
      set_tests_properties(torch/agreement/${kind}-${group} PROPERTIES LABELS "e2e;torch"
                           TIMEOUT 1500 COST 60
                           ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
      math(EXPR first "${first} + 5")
      math(EXPR group "${group} + 1")
    endwhile()
  endforeach()
  # shard orders and strided labels under FSDP2 (fully_shard with shard_placement_fn), the
  # FP8 block scales of such weights, frozen params sharded as FSDP2 does (fsdp.frozen:
  # shard), FSDP axes before, after and around the TP axis; every rank of small models, one
  # pytest process
  add_test(NAME torch/agreement/features
           COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -p no:cacheprovider -rfE
                   "${SHARDC_TORCH_DIR}/test_agreement.py::test_shard_order_under_fsdp2"
                   "${SHARDC_TORCH_DIR}/test_agreement.py::test_fp8_scales_of_ordered_and_strided_weights"
                   "${SHARDC_TORCH_DIR}/test_agreement.py::test_frozen_params_sharded_like_fsdp2"
                   "${SHARDC_TORCH_DIR}/test_agreement.py::test_fsdp_labels_on_any_mesh_order"
                   "${SHARDC_TORCH_DIR}/test_agreement.py::test_tied_alias_first_in_module_order"
           WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
  set_tests_properties(torch/agreement/features PROPERTIES LABELS "e2e;torch"
                       TIMEOUT 900 ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
  add_test(NAME torch/hf-modules
           COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -p no:cacheprovider -rfE
                   ${SHARDC_TORCH_DIR}/test_hf_modules.py
           WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
  set_tests_properties(torch/hf-modules PROPERTIES LABELS "e2e;torch" TIMEOUT 600
                       ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
  add_test(NAME torch/hf-tp-plan
           COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -p no:cacheprovider -rfE
                   ${SHARDC_TORCH_DIR}/test_hf_tp_plan.py
           WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
  set_tests_properties(torch/hf-tp-plan PROPERTIES LABELS "e2e;torch" TIMEOUT 600
                       ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
  add_test(NAME torch/negative
           COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -p no:cacheprovider -rfE
                   ${SHARDC_TORCH_DIR}/test_negative.py
           WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
  set_tests_properties(torch/negative PROPERTIES LABELS "e2e;torch" TIMEOUT 300
                       ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
  # Activation memory witness (issue 26, docs/memory.md): the bytes autograd saves on the
  # shrunk Hugging Face modules vs `shardc memory`; -s prints the table.
  add_test(NAME torch/activation-witness
           COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -s -p no:cacheprovider -rfE
                   ${SHARDC_TORCH_DIR}/test_activation_witness.py
           WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
  set_tests_properties(torch/activation-witness PROPERTIES LABELS "e2e;torch" TIMEOUT 900
                       ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
  # FSDP2's gathered units and unsharded grads (without resharding after forward, and as
  # torch.distributed.pipelining runs a stage) vs `shardc memory` (docs/memory.md).
  add_test(NAME torch/fsdp2-gathered
           COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -p no:cacheprovider -rfE
                   ${SHARDC_TORCH_DIR}/test_fsdp2_gathered.py
           WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
  set_tests_properties(torch/fsdp2-gathered PROPERTIES LABELS "e2e;torch" TIMEOUT 300
                       ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
  # torchtitan 0.3.0 parallelizes its own Llama-3 / DeepSeek-V3 (docs/torchtitan.md)
  add_test(NAME torch/torchtitan
           COMMAND ${SHARDC_TORCH_PYTHON} -m pytest -q -p no:cacheprovider -rfE
                   ${SHARDC_TORCH_DIR}/test_torchtitan.py
           WORKING_DIRECTORY ${SHARDC_TORCH_DIR})
  set_tests_properties(torch/torchtitan PROPERTIES LABELS "e2e;torch" TIMEOUT 600
                       ENVIRONMENT "SHARDC_BIN=$<TARGET_FILE:shardc>;OMP_NUM_THREADS=1")
else()
  add_test(NAME torch/agreement/not-configured
           COMMAND ${CMAKE_COMMAND} -E echo
                   "configure with -DSHARDC_TORCH_PYTHON=$(tools/venv) to run the PyTorch agreement suite")
  set_tests_properties(torch/agreement/not-configured PROPERTIES LABELS "torch" WILL_FAIL TRUE)
endif()
