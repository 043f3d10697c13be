# CTest layers/refused-include (cmake -P): the build refuses a wrong include.
#   -DCXX=<compiler> -DROOMS_DIR=<build>/rooms -DSRC=<repo>/src -DHERE=<this dir> -DWORK=<scratch>
# 1. refused_include.cpp (frontend including "planner/passes.hpp") must fail to compile with
#    frontend's include directory, naming the missing header; allowed_include.cpp must compile.
# 2. For every room R (rooms.txt) and every room X: `__has_include("X/<a file of X>")` in a TU
#    compiled with R's include directory is true exactly when R may see X.
# 3. Third-party headers: see below.
cmake_minimum_required(VERSION 3.25)
set(flags -std=c++20 -fsyntax-only -x c++)

execute_process(COMMAND ${CXX} ${flags} -I${ROOMS_DIR}/frontend ${HERE}/refused_include.cpp
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "frontend compiled #include \"planner/passes.hpp\": the layering is not enforced")
endif()
# g++: "planner/passes.hpp: No such file or directory"; clang: "'planner/passes.hpp' file not found"
if(NOT err MATCHES "planner/passes.hpp(: No such file or directory|' file not found)")
  message(FATAL_ERROR "refused_include.cpp failed for another reason:\n${err}")
endif()
execute_process(COMMAND ${CXX} ${flags} -I${ROOMS_DIR}/frontend ${HERE}/allowed_include.cpp
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "allowed_include.cpp (frontend including core/) does not compile:\n${err}")
endif()

file(STRINGS ${ROOMS_DIR}/rooms.txt lines)
set(rooms)
foreach(line IN LISTS lines)
  string(REGEX REPLACE ":.*" "" room "${line}")
  list(APPEND rooms ${room})
endforeach()
file(GLOB folders LIST_DIRECTORIES true RELATIVE ${SRC} ${SRC}/*)
foreach(folder IN LISTS folders)
  if(IS_DIRECTORY ${SRC}/${folder} AND NOT folder IN_LIST rooms)
    message(FATAL_ERROR "src/${folder}/ is no room in cmake/rooms.cmake")
  endif()
endforeach()
file(MAKE_DIRECTORY ${WORK})
set(pairs 0)
foreach(line IN LISTS lines)
  string(REGEX REPLACE ":.*" "" room "${line}")
  string(REGEX REPLACE "^[^:]*: *" "" sees "${line}")
  separate_arguments(sees)
  set(tu "")
  foreach(other IN LISTS rooms)
    file(GLOB files RELATIVE ${SRC} ${SRC}/${other}/*.?pp)
    list(SORT files)
    list(GET files 0 probe)
    if(other IN_LIST sees)
      string(APPEND tu "#if !__has_include(\"${probe}\")\n#error ${room} cannot see ${probe}\n#endif\n")
    else()
      string(APPEND tu "#if __has_include(\"${probe}\")\n#error ${room} sees ${probe}\n#endif\n")
    endif()
    math(EXPR pairs "${pairs} + 1")
  endforeach()
  file(WRITE ${WORK}/${room}.cpp "${tu}")
  execute_process(COMMAND ${CXX} ${flags} -I${ROOMS_DIR}/${room} ${WORK}/${room}.cpp
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "room ${room}'s include directory does not match rooms.txt:\n${err}")
  endif()
endforeach()

# 3. Third-party libraries (cmake/rooms.cmake SHARDC_THIRD_PARTY_HEADERS): a room's include
#    directory holds a refusing header for exactly the libraries refused-libs.txt names,
#    and for each library one room that may not use it fails to preprocess its header,
#    naming the rule, while one room given it preprocesses it.
set(libs "yaml-cpp=yaml-cpp/yaml.h" "simdjson::simdjson=simdjson.h"
         "nlohmann_json::nlohmann_json=nlohmann/json.hpp" "spdlog::spdlog=spdlog/spdlog.h"
         "CLI11::CLI11=CLI/CLI.hpp" "OpenSSL::Crypto=openssl/evp.h")
file(STRINGS ${ROOMS_DIR}/refused-libs.txt refusals)
set(refused_pairs 0)
foreach(entry IN LISTS libs)
  string(REPLACE "=" ";" parts "${entry}")
  list(GET parts 0 lib)
  list(GET parts 1 header)
  set(a_refusing "")
  set(a_using "")
  foreach(line IN LISTS refusals)
    string(FIND "${line}" ":" colon)
    string(SUBSTRING "${line}" 0 ${colon} room)
    math(EXPR after "${colon} + 1")
    string(SUBSTRING "${line}" ${after} -1 refused)
    string(STRIP "${refused}" refused)
    separate_arguments(refused)
    set(poison ${ROOMS_DIR}/${room}/${header})
    if(lib IN_LIST refused)
      if(NOT EXISTS ${poison})
        message(FATAL_ERROR "room ${room} may not use ${lib} but has no refusing ${header}")
      endif()
      set(a_refusing ${room})
      math(EXPR refused_pairs "${refused_pairs} + 1")
    else()
      if(EXISTS ${poison})
        message(FATAL_ERROR "room ${room} is given ${lib} but ${header} refuses it")
      endif()
      set(a_using ${room})
    endif()
  endforeach()
  file(WRITE ${WORK}/third_party.cpp "#include <${header}>\n")
  if(a_refusing)
    execute_process(COMMAND ${CXX} -std=c++20 -E -x c++ -I${ROOMS_DIR}/${a_refusing}
                            ${WORK}/third_party.cpp
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
    if(rc EQUAL 0 OR NOT err MATCHES "may not use")
      message(FATAL_ERROR "room ${a_refusing} included <${header}> (${lib}) unrefused:\n${err}")
    endif()
  endif()
  if(a_using)
    execute_process(COMMAND ${CXX} -std=c++20 -E -x c++ -I${ROOMS_DIR}/${a_using}
                            ${WORK}/third_party.cpp
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "room ${a_using}, given ${lib}, cannot include <${header}>:\n${err}")
    endif()
  endif()
endforeach()
message(STATUS "layers: frontend refuses planner/passes.hpp; ${pairs} room pairs as rooms.txt "
               "says; ${refused_pairs} room x library refusals")
