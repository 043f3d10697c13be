# End-to-end tests: the real shardc binary driven by Python runners (stdlib only).
# Included from tests/CMakeLists.txt (which finds Python3).
#
#   case/<folder>       tests/cases/<folder>: golden case (expected.json) via run_case.py
#   plan/<recipe>       plans/<recipe>.recipe.yaml: validate + compile a rank sample
#   models/compact      plans/*.model.yaml expand to exactly the real inventories
#   schemas/static      schemas/*.schema.json: valid draft 2020-12; every shipped input and
#                       README example validates; invalid documents fail
#   schemas/cli         `shardc schema NAME` = the files; compiled plans and rank files validate
#   determinism/bytes   outputs byte-identical across runs and -j 1 / -j 2
#   determinism/golden  sha256 of every shipped plan's outputs = tests/golden/outputs.sha256
#   bench/smoke         tools/bench --quick runs and prints its table (no timing asserted)
#   bad/<folder>        tests/bad/<folder>: a bad input gives the expected diagnostics (run_bad.py)
#   hostile/<folder>    tests/hostile/<folder>: a hostile-input finding behaves as expected
#   output/safety       compile: atomic, --force, no partial outputs, symlinked/unwritable OUTDIR
#   reshard/<pair>      shardc reshard between plan variants, checked by test_reshard.py
#   docs/layers         src/README.md's room table = cmake/rooms.cmake (tools/check-layers)
#   layers/refused-include  a room's include directory refuses the rooms it may not use
#   tidy/names          .clang-tidy (names, parameter counts) on tools/tidy's files
#   docs/passes         src/README.md pass table = build_plan order (tools/check-docs)
#   docs/diagnostics    docs/diagnostics.md's code table = the one tools/update-docs
#                       generates from diag_code.hpp
#   (fuzz/replay-*      the fuzz corpus replay is registered from tests/fuzz/replay.cmake)
#
# Cases whose feature is not implemented yet still run (and fail): they are the spec.

set(SHARDC_E2E_DIR ${CMAKE_CURRENT_SOURCE_DIR}/e2e)

# One test per folder tests/<kind>/<name>/ that holds FILE: <prefix>/<name> runs
# `SCRIPT <folder> --shardc BIN ARGN...` with LABELS "e2e;<label>" (the folder-driven suites:
# golden cases, bad inputs, bug reports).
function(shardc_folder_tests prefix kind file script label)
  file(GLOB markers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${kind}/*/${file})
  list(SORT markers)
  foreach(marker IN LISTS markers)
    get_filename_component(dir ${marker} DIRECTORY)
    get_filename_component(name ${dir} NAME)
    add_test(NAME ${prefix}/${name}
             COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/${script} ${dir}
                     --shardc $<TARGET_FILE:shardc> ${ARGN})
    set_tests_properties(${prefix}/${name} PROPERTIES LABELS "e2e;${label}" TIMEOUT 300)
  endforeach()
endfunction()

shardc_folder_tests(case cases expected.json run_case.py case)
file(GLOB SHARDC_CASE_EXPECTED CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cases/*/expected.json)
list(SORT SHARDC_CASE_EXPECTED)

file(GLOB SHARDC_PLAN_RECIPES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/plans/*.recipe.yaml)
list(SORT SHARDC_PLAN_RECIPES)
foreach(recipe IN LISTS SHARDC_PLAN_RECIPES)
  get_filename_component(recipe_file ${recipe} NAME)
  string(REPLACE ".recipe.yaml" "" plan_name ${recipe_file})
  add_test(NAME plan/${plan_name}
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/run_plans.py
                   --shardc $<TARGET_FILE:shardc> ${recipe})
  set_tests_properties(plan/${plan_name} PROPERTIES LABELS "e2e;plan" TIMEOUT 600)
endforeach()

# Pure Python: the compact models against the inventories (no binary needed) ...
add_test(NAME models/compact
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_models_compact.py
                 --plans ${PROJECT_SOURCE_DIR}/plans)
set_tests_properties(models/compact PROPERTIES LABELS "e2e;models" TIMEOUT 300)
# ... and the same models read by the real front end.
add_test(NAME models/compact-cli
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_models_compact.py
                 --plans ${PROJECT_SOURCE_DIR}/plans --shardc $<TARGET_FILE:shardc>)
set_tests_properties(models/compact-cli PROPERTIES LABELS "e2e;models" TIMEOUT 600)

# Byte identity: the same outputs across runs and writer counts, and pinned by digests
# (refresh tests/golden/outputs.sha256 with tools/update-golden after an intended change).
add_test(NAME determinism/bytes
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_deterministic.py
                 --shardc $<TARGET_FILE:shardc> --check bytes)
set_tests_properties(determinism/bytes PROPERTIES LABELS "e2e;determinism" TIMEOUT 600)
add_test(NAME determinism/golden
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_deterministic.py
                 --shardc $<TARGET_FILE:shardc> --check golden)
set_tests_properties(determinism/golden PROPERTIES LABELS "e2e;determinism" TIMEOUT 600)

# The benchmark's smoke run (tools/bench --quick: one run each, 64-rank rank-file test):
# it must run and print its table; timings are not asserted. Writes its table into the
# build tree, never over the repository's bench-results.md.
add_test(NAME bench/smoke
         COMMAND bash ${PROJECT_SOURCE_DIR}/tools/bench --quick --no-build
                 --shardc $<TARGET_FILE:shardc>
                 --output ${CMAKE_CURRENT_BINARY_DIR}/bench-smoke.md)
# TIMEOUT guards against a hang (it timed out at 120 s on a machine running four builds).
set_tests_properties(bench/smoke PROPERTIES LABELS "e2e;bench" TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "tools/bench: ok \\(")

# JSON Schemas (schemas/*.schema.json; python3-jsonschema, python3-yaml) ...
add_test(NAME schemas/static
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_schemas.py --part static)
set_tests_properties(schemas/static PROPERTIES LABELS "e2e;schemas" TIMEOUT 300)
# ... and against the real CLI's outputs.
add_test(NAME schemas/cli
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_schemas.py --part cli
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(schemas/cli PROPERTIES LABELS "e2e;schemas" TIMEOUT 600)

# The README's five-minute tour runs as written (validate, inspect, explain, compile, verify).
add_test(NAME readme/tour
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_readme_tour.py
                 --shardc $<TARGET_FILE:shardc> --readme ${PROJECT_SOURCE_DIR}/README.md)
set_tests_properties(readme/tour PROPERTIES LABELS "e2e;readme" TIMEOUT 600)

# Buffer layouts round-trip: compile + `shardc verify` (and a corrupted copy must fail)
# on every shipped plan and every golden case whose recipe has `buffers:`. The real-model
# plans carry the label `long` (tools/test --quick leaves them out).
foreach(recipe IN LISTS SHARDC_PLAN_RECIPES)
  file(STRINGS ${recipe} has_buffers REGEX "^buffers:")
  if(NOT has_buffers)
    continue()
  endif()
  get_filename_component(recipe_file ${recipe} NAME)
  string(REPLACE ".recipe.yaml" "" plan_name ${recipe_file})
  add_test(NAME verify/plan/${plan_name}
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/run_verify.py
                   --shardc $<TARGET_FILE:shardc> --recipe ${recipe})
  set_tests_properties(verify/plan/${plan_name} PROPERTIES LABELS "e2e;verify;long;models" TIMEOUT 900)
endforeach()
foreach(expected IN LISTS SHARDC_CASE_EXPECTED)
  get_filename_component(case_dir ${expected} DIRECTORY)
  get_filename_component(case_name ${case_dir} NAME)
  file(STRINGS ${case_dir}/recipe.yaml has_buffers REGEX "^buffers:")
  if(NOT has_buffers)
    continue()
  endif()
  add_test(NAME verify/case/${case_name}
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/run_verify.py
                   --shardc $<TARGET_FILE:shardc> --case ${case_dir})
  set_tests_properties(verify/case/${case_name} PROPERTIES LABELS "e2e;verify" TIMEOUT 300)
endforeach()

# The flat optimizer buffers (megatron_distopt, deepspeed_zero ZeRO-2 and ZeRO-3) of the
# runtime case tests/runtime/cases/megatron_distopt round-trip in verify's simulation.
foreach(flat_recipe recipe recipe_ds2 recipe_ds3)
  add_test(NAME verify/flat/${flat_recipe}
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/run_verify.py
                   --shardc $<TARGET_FILE:shardc>
                   --model ${PROJECT_SOURCE_DIR}/tests/runtime/cases/megatron_distopt/model.yaml
                   --recipe ${PROJECT_SOURCE_DIR}/tests/runtime/cases/megatron_distopt/${flat_recipe}.yaml)
  set_tests_properties(verify/flat/${flat_recipe} PROPERTIES LABELS "e2e;verify" TIMEOUT 300)
endforeach()

# Bad inputs (tests/bad/<name>/, expect.json): `validate --format json` exits 1 or 2 with the
# expected codes and locations, every diagnostic has a hint, within 20 s (hostile inputs
# prove bounded time; peak RSS is checked where expect.json sets max_rss_mb).
set(SHARDC_BAD_FLAGS)
if(SHARDC_SANITIZE)
  set(SHARDC_BAD_FLAGS --sanitizer)
endif()
shardc_folder_tests(bad bad expect.json run_bad.py bad ${SHARDC_BAD_FLAGS})
# The million-param inputs prove bounded time and memory on a huge model: tens of seconds
# under ASan, so the sanitizer stage leaves them to stage 1 (label `long`).
foreach(big IN ITEMS gen_params_1e6_json gen_params_1e6_repeat)
  if(TEST bad/${big})
    get_test_property(bad/${big} LABELS big_labels)
    set_tests_properties(bad/${big} PROPERTIES LABELS "${big_labels};long")
  endif()
endforeach()

# Hostile inputs (tests/hostile/<name>/, issue 24): each finding of the hostile-input campaign
# (README.md: command, expected, observed) with test.py asserting the expected behaviour through
# run_hostile.py; any exit 3, timeout, signal or sanitizer report fails on its own. Folders
# without test.py (the Python adapter's findings) are inputs for the adapter's tests.
shardc_folder_tests(hostile hostile test.py run_hostile.py hostile ${SHARDC_BAD_FLAGS})
# Compiles of DeepSeek-V3 SIGKILLed or raced, and the 2^31 - 1-rank mesh: tens of seconds each,
# left out of tools/test --quick like output/commit.
set_tests_properties(hostile/kill_swap_leftovers hostile/concurrent_inplace_mix
                     hostile/memory_world_oom PROPERTIES LABELS "e2e;hostile;long" TIMEOUT 900)

# Random packed, padded and FP8 layouts (issue 24 item 4): never exit 3; valid ones compile to
# rank files that tile every param (checked by the script's own reader) and verify.
add_test(NAME property/layouts
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_layout_property.py
                 --shardc $<TARGET_FILE:shardc> --cases 300 ${SHARDC_BAD_FLAGS})
set_tests_properties(property/layouts PROPERTIES LABELS "e2e;property" TIMEOUT 900)

# Packed parts with their own placement (issue 27 item 7): fused q|k|v with KV heads
# replicated over tp ranks, every rank's boxes against vLLM's rule computed with numpy.
add_test(NAME packed/replicas
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_packed_replicas.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(packed/replicas PROPERTIES LABELS "e2e;packed" TIMEOUT 600)

# Output safety of `compile`: atomic writes, --force, no partial outputs, byte-identical
# reruns, symlinked and unwritable OUTDIRs.
add_test(NAME output/safety
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_output_safety.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(output/safety PROPERTIES LABELS "e2e;output" TIMEOUT 300)

# `shardc reshard` between plan variants (tests/data/reshard/), each listing proven against
# both plan.json files by an independent Python reader: exact tiling by element counting,
# the source rule, bytes and in-place fraction; plus the mismatch errors.
set(SHARDC_RESHARD_PAIRS gpt2-tp4-to-pp2 gpt2-pp2-to-tp4 gpt2-tp4-to-fsdp3 qwen-tp2-to-fsdp3
    qwen-fsdp3-to-tp2 mixtral-ep8-to-ep4 qwen3-ep8-to-pp2 llama8b-tp8-to-pp4 gpt2-heads-to-fsdp3
    gpt2-heads-to-plain fused-qkv-tp4-to-tp16 fused-qkv-tp16-to-tp4 gqa-tp2-to-tp4 gqa-tp4-to-tp8
    mismatch)
foreach(pair IN LISTS SHARDC_RESHARD_PAIRS)
  add_test(NAME reshard/${pair}
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_reshard.py
                   --shardc $<TARGET_FILE:shardc> --only ${pair})
  set_tests_properties(reshard/${pair} PROPERTIES LABELS "e2e;reshard" TIMEOUT 600)
endforeach()
# The pairs on real-model inventories (Mixtral, Qwen3-MoE, Llama-3.1-8B) are `models`: stage 1
# runs them; the sanitizer stage keeps the small pairs (same reshard code, seconds not minutes).
set_tests_properties(reshard/mixtral-ep8-to-ep4 reshard/qwen3-ep8-to-pp2 reshard/llama8b-tp8-to-pp4
                     PROPERTIES LABELS "e2e;reshard;models")
# The output directory commits as a whole: compile SIGKILLed at several moments leaves the
# previous complete state or a directory verify refuses as incomplete; changed inputs;
# tampered files caught by digest (tests/e2e/test_commit.py). Label `long` (~5 s here, ~30 s
# under the sanitizers; tools/test --quick leaves it out).
add_test(NAME output/commit
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_commit.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(output/commit PROPERTIES LABELS "e2e;output;long" TIMEOUT 900)

# `shardc verify` on tampered outputs (tests/tampered/cases.json: wrong types, negatives,
# huge and inconsistent values in plan.json, rank files and manifest.json; missing, extra,
# duplicate, foreign and symlinked files): the expected exit code and message, bounded time,
# no sanitizer report (runs in tools/test stage 2 too: the label is not excluded there).
add_test(NAME tampered/corpus
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/run_tampered.py
                 --shardc $<TARGET_FILE:shardc> ${SHARDC_BAD_FLAGS}
                 ${CMAKE_CURRENT_SOURCE_DIR}/tampered/cases.json)
set_tests_properties(tampered/corpus PROPERTIES LABELS "e2e;tampered" TIMEOUT 900)

# Checkpoint import (tests/e2e/test_import.py): every real inventory written as a sparse
# hub checkpoint (sharded safetensors + index + config.json) imports to exactly the
# inventory and compiles to the shipped model's plan; DeepSeek-V3's FP8 layout; natural
# order + W-MODULE-ORDER for an unknown architecture.
add_test(NAME import/checkpoints
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_import.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(import/checkpoints PROPERTIES LABELS "e2e;models" TIMEOUT 900)

# FP8 block scales follow their weights (tests/e2e/test_fp8_scales.py) on DeepSeek-V3's FP8
# checkpoint layout: scale shards are the block images of the weights' shards, rank files
# carry them, a tp that cuts a block is E-FP8-BLOCK with the valid sizes, `unit: 128` fixes it.
add_test(NAME import/fp8-scales
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_fp8_scales.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(import/fp8-scales PROPERTIES LABELS "e2e;models" TIMEOUT 600)

# tools/dump_model.py (PyTorch module on the meta device -> model) on small modules; uses
# /usr/bin/python3 (Debian's python3-torch) and prints SKIP when torch is missing.
add_test(NAME import/dump-model
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_dump_model.py
                 --shardc $<TARGET_FILE:shardc> --python /usr/bin/python3)
set_tests_properties(import/dump-model PROPERTIES LABELS "e2e;models" TIMEOUT 300)

# Cases from public bug reports (tests/reports/<name>/: inputs, README with the right answer,
# expect.json with the diagnostics / shapes / verify runs that prove it; run_report.py).
shardc_folder_tests(report reports expect.json run_report.py report)
# `shardc memory`, the budget check in validate/memory, and inspect's memory block.
add_test(NAME memory/cli
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_memory.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(memory/cli PROPERTIES LABELS "e2e;memory" TIMEOUT 300)
# `shardc cost` (communication per step per rank): schema, statistics vs classes, E-TRAINING.
add_test(NAME cost/cli
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_cost.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(cost/cli PROPERTIES LABELS "e2e;memory" TIMEOUT 300)
# `shardc search` (issue 22): ranked layouts, emitted recipes validate and their `memory`
# equals search's figure, the papers' layouts, E-SEARCH / E-HARDWARE.
add_test(NAME search/cli
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_search.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(search/cli PROPERTIES LABELS "e2e;search;models" TIMEOUT 300)
# `shardc report OUTDIR` and `search --report` (issue 25): an OUTDIR's page shows the MODEL
# RECIPE page's memory, largest-params and rank tables byte for byte and `memory --format
# json`'s figures; bad OUTDIRs are E-REPORT-INPUT; a search page's rows, step bars and pruned
# counts are `search --format json`'s; names with HTML are text.
add_test(NAME page/cli
         COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_report_pages.py
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(page/cli PROPERTIES LABELS "e2e;page;models" TIMEOUT 600)
# The runtime witness: real torch tensors (FSDP2-style padded storages) and a real
# torch.optim.AdamW step hold exactly what `shardc memory` reports, per rank and kind.
# Needs torch (it re-runs itself with /usr/bin/python3 when this Python lacks it); exit 77 =
# skipped.
# On the project's environment (SHARDC_TORCH_PYTHON, tools/venv) it must run; a C++-only
# build without it may skip.
if(SHARDC_TORCH_PYTHON)
  add_test(NAME memory/witness
           COMMAND ${SHARDC_TORCH_PYTHON} ${SHARDC_E2E_DIR}/test_memory_witness.py
                   --shardc $<TARGET_FILE:shardc>)
  set_tests_properties(memory/witness PROPERTIES LABELS "e2e;memory;torch" TIMEOUT 300)
else()
  add_test(NAME memory/witness
           COMMAND ${Python3_EXECUTABLE} ${SHARDC_E2E_DIR}/test_memory_witness.py
                   --shardc $<TARGET_FILE:shardc>)
  set_tests_properties(memory/witness PROPERTIES LABELS "e2e;memory" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()
# Docs and layering tied to the code (tools/check-layers, tools/check-docs).
add_test(NAME docs/layers COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check-layers
                                  ${PROJECT_SOURCE_DIR})
add_test(NAME docs/passes COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check-docs
                                  ${PROJECT_SOURCE_DIR})
add_test(NAME docs/diagnostics COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/update-docs
                                       --check ${PROJECT_SOURCE_DIR})
set_tests_properties(docs/layers docs/passes docs/diagnostics PROPERTIES LABELS "docs" TIMEOUT 60)
# The build refuses a wrong include (tests/layers/check_rooms.cmake): one failing and one
# passing -fsyntax-only compile, then every room x room pair by __has_include.
add_test(NAME layers/refused-include
         COMMAND ${CMAKE_COMMAND} -DCXX=${CMAKE_CXX_COMPILER} -DROOMS_DIR=${SHARDC_ROOMS_DIR}
                 -DSRC=${PROJECT_SOURCE_DIR}/src -DHERE=${PROJECT_SOURCE_DIR}/tests/layers
                 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layers
                 -P ${PROJECT_SOURCE_DIR}/tests/layers/check_rooms.cmake)
set_tests_properties(layers/refused-include PROPERTIES LABELS "docs" TIMEOUT 60)
# The agreed names and parameter counts (.clang-tidy) on every .cpp under src/ and tests/unit/.
add_test(NAME tidy/names COMMAND ${PROJECT_SOURCE_DIR}/tools/tidy ${PROJECT_BINARY_DIR})
set_tests_properties(tidy/names PROPERTIES LABELS "tidy;lint" TIMEOUT 300)

# `shardc report` pages in headless Chromium (tests/browser/report_test.mjs, ~30 s): DOM
# figures equal to `memory --format json` and the reshard listing, escaping of names,
# diagnostics with file:line:col, non-blank screenshots, axe-core WCAG 2 A/AA, no console
# error or network request; prints each page's load time and size. Node, the Debian chromium
# and the pinned npm packages come from the set-up (tools/common.sh shardc_ensure_browser):
# without them the test fails (exit 2), it never skips.
find_program(SHARDC_NODE node)
add_test(NAME browser/report
         COMMAND ${SHARDC_NODE} ${CMAKE_CURRENT_SOURCE_DIR}/browser/report_test.mjs
                 --shardc $<TARGET_FILE:shardc>)
set_tests_properties(browser/report PROPERTIES LABELS "e2e;browser" TIMEOUT 300)
