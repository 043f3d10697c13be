# The fuzz corpus as an ordinary test (any compiler, no libFuzzer): every file of
# tests/fuzz/corpus/{model,recipe,outputs,safetensors,import} goes through the fuzz entry points. Included from
# tests/CMakeLists.txt.
set(SHARDC_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})
add_executable(shardc_fuzz_replay ${SHARDC_FUZZ_DIR}/replay_main.cpp
                                  ${SHARDC_FUZZ_DIR}/fuzz_entry.cpp)
target_include_directories(shardc_fuzz_replay PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(shardc_fuzz_replay PRIVATE libshardc shardc_warnings
                      nlohmann_json::nlohmann_json)
foreach(kind IN ITEMS model recipe outputs safetensors import)
  add_test(NAME fuzz/replay-${kind}
           COMMAND shardc_fuzz_replay ${kind} ${SHARDC_FUZZ_DIR}/corpus/${kind})
  set_tests_properties(fuzz/replay-${kind} PROPERTIES LABELS "fuzz" TIMEOUT 300)
endforeach()
