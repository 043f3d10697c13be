# One static library per room of src/ (src/README.md "Rooms"), linking only the rooms and
# third-party libraries it may use. Each room compiles against an include directory of its
# own, generated here: build/rooms/<room>/ holds a symlink to src/<r> for every room r it may
# see (itself and, transitively, the rooms it uses) and shardc/ with the public headers, so
# `#include "planner/passes.hpp"` from frontend/ is "No such file or directory" (CTest
# layers/refused-include). Nothing else puts src/ on a room's include path.

set(SHARDC_ROOMS_DIR ${PROJECT_BINARY_DIR}/rooms)
# The public headers (include/shardc/) every room may include; driver.hpp only the driver.
set(SHARDC_PUBLIC_HEADERS exit_code.hpp file_system.hpp)

# The third-party libraries a room may be given (LIBS) and the headers that reach them. A
# room's include directory holds, for every library of this list it is NOT given, a header
# of the same name that stops the compile (`#error`), found before the system's copy: so a
# room including <nlohmann/json.hpp> without linking nlohmann_json fails to compile, header-
# only libraries included (CTest layers/refused-include checks each pair).
set(SHARDC_THIRD_PARTY_HEADERS
    "yaml-cpp=yaml-cpp/yaml.h"
    "simdjson::simdjson=simdjson.h"
    "nlohmann_json::nlohmann_json=nlohmann/json.hpp,nlohmann/json_fwd.hpp"
    "spdlog::spdlog=spdlog/spdlog.h,spdlog/logger.h,spdlog/fmt/fmt.h"
    "CLI11::CLI11=CLI/CLI.hpp"
    "OpenSSL::Crypto=openssl/evp.h,openssl/sha.h")

# shardc_room(NAME [EXECUTABLE target] [USES room...] [LIBS target...] [PUBLIC_HEADERS header...])
#   USES: the rooms NAME's sources may include and link (their own uses come with them).
#   LIBS: third-party targets, private to the room.
#   EXECUTABLE: the room is a program (cli/), not a library.
function(shardc_room name)
  cmake_parse_arguments(ROOM "" "EXECUTABLE" "USES;LIBS;PUBLIC_HEADERS" ${ARGN})
  set(sees ${name})
  foreach(used IN LISTS ROOM_USES)
    get_property(defined GLOBAL PROPERTY SHARDC_ROOMS)
    if(NOT used IN_LIST defined)
      message(FATAL_ERROR "room ${name} uses ${used}, which is not defined before it (rooms.cmake)")
    endif()
    get_property(used_sees GLOBAL PROPERTY SHARDC_ROOM_SEES_${used})
    list(APPEND sees ${used_sees})
  endforeach()
  list(REMOVE_DUPLICATES sees)
  set_property(GLOBAL PROPERTY SHARDC_ROOM_SEES_${name} ${sees})
  set_property(GLOBAL APPEND PROPERTY SHARDC_ROOMS ${name})

  set(dir ${SHARDC_ROOMS_DIR}/${name})
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir}/shardc)
  foreach(seen IN LISTS sees)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${seen} ${dir}/${seen} SYMBOLIC)
  endforeach()
  foreach(header IN LISTS SHARDC_PUBLIC_HEADERS ROOM_PUBLIC_HEADERS)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/shardc/${header} ${dir}/shardc/${header} SYMBOLIC)
  endforeach()

  list(JOIN sees " " sees_text)
  file(APPEND ${SHARDC_ROOMS_DIR}/rooms.txt "${name}: ${sees_text}\n")

  # Poison headers for the third-party libraries this room is not given.
  set(refused_libs)
  foreach(entry IN LISTS SHARDC_THIRD_PARTY_HEADERS)
    string(REPLACE "=" ";" parts "${entry}")
    list(GET parts 0 lib)
    list(GET parts 1 headers)
    if(lib IN_LIST ROOM_LIBS)
      continue()
    endif()
    list(APPEND refused_libs ${lib})
    string(REPLACE "," ";" headers "${headers}")
    foreach(header IN LISTS headers)
      file(WRITE ${dir}/${header}
           "#error \"room ${name} may not use ${lib} (cmake/rooms.cmake: not in its LIBS)\"\n")
    endforeach()
  endforeach()
  list(JOIN refused_libs " " refused_text)
  file(APPEND ${SHARDC_ROOMS_DIR}/refused-libs.txt "${name}: ${refused_text}\n")

  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  list(TRANSFORM ROOM_USES PREPEND shardc_ OUTPUT_VARIABLE used_targets)
  if(ROOM_EXECUTABLE)
    add_executable(${ROOM_EXECUTABLE} ${sources})
    set(target ${ROOM_EXECUTABLE})
    target_link_libraries(${target} PRIVATE shardc_settings ${used_targets} shardc_warnings
                          ${ROOM_LIBS})
  else()
    set(target shardc_${name})
    add_library(${target} STATIC ${sources})
    target_link_libraries(${target} PUBLIC shardc_settings ${used_targets}
                          PRIVATE shardc_warnings ${ROOM_LIBS})
  endif()
  target_include_directories(${target} PRIVATE ${dir})
endfunction()

# rooms.txt: "room: the rooms it sees", one a line, in definition order (the layering test
# and tools/check-layers read it).
file(REMOVE ${SHARDC_ROOMS_DIR}/rooms.txt ${SHARDC_ROOMS_DIR}/refused-libs.txt)

# Lowest first; a room may use only rooms above it in this list.
shardc_room(support LIBS OpenSSL::Crypto)
shardc_room(core USES support)
shardc_room(frontend USES core
            LIBS yaml-cpp simdjson::simdjson nlohmann_json::nlohmann_json spdlog::spdlog)
shardc_room(import USES frontend LIBS simdjson::simdjson spdlog::spdlog)
shardc_room(planner USES core)
shardc_room(memory USES planner)
shardc_room(comm USES planner)
shardc_room(outputs USES planner LIBS simdjson::simdjson nlohmann_json::nlohmann_json)
shardc_room(reshard USES outputs)
shardc_room(backend USES reshard memory comm)
shardc_room(verify USES backend)
shardc_room(search USES memory comm frontend LIBS Threads::Threads)
shardc_room(report USES backend search)
shardc_room(driver USES verify import report search LIBS spdlog::spdlog Threads::Threads
            PUBLIC_HEADERS driver.hpp)
shardc_room(cli EXECUTABLE shardc USES driver LIBS CLI11::CLI11 spdlog::spdlog
            PUBLIC_HEADERS driver.hpp)

if(SHARDC_CHECK_INVARIANTS)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/planner/check_plan.cpp PROPERTIES
                              COMPILE_DEFINITIONS SHARDC_CHECK_INVARIANTS=1)
endif()

# Every room: what the tests, the fuzz targets and a library user link.
add_library(libshardc INTERFACE)
target_link_libraries(libshardc INTERFACE shardc_driver)
target_include_directories(libshardc INTERFACE ${PROJECT_SOURCE_DIR}/include)
