# Layers: one static library per source folder, linking only the layers it names (and theirs).
#   kb_layer(NAME [DEPS LAYER...] [SUBDIRS DIR...])
# builds kb_NAME from NAME/*.cpp (and NAME/DIR/*.cpp), links kb_DEP for each DEP, and checks that every
# `#include "X/..."` in NAME/ names NAME itself or a layer below it. A violation stops the configure step
# with the file, line and the rule it breaks.
set(KB_ALL_LAYERS "" CACHE INTERNAL "")

include(${CMAKE_CURRENT_LIST_DIR}/layer_rules.cmake)

function(kb_check_layer name files allowed)
  kb_layer_violations(v "${name}" "${files}" "${allowed}" "${KB_ALL_LAYERS}")
  if(v)
    list(JOIN v "\n  " msg)
    message(FATAL_ERROR "layer rule broken (docs/design.md, Layers):\n  ${msg}")
  endif()
endfunction()

function(kb_layer name)
  cmake_parse_arguments(L "" "" "DEPS;SUBDIRS" ${ARGN})
  set(globs ${CMAKE_SOURCE_DIR}/${name}/*.cpp)
  set(hglobs ${CMAKE_SOURCE_DIR}/${name}/*.h)
  foreach(d ${L_SUBDIRS})
    list(APPEND globs ${CMAKE_SOURCE_DIR}/${name}/${d}/*.cpp)
    list(APPEND hglobs ${CMAKE_SOURCE_DIR}/${name}/${d}/*.h)
  endforeach()
  file(GLOB srcs CONFIGURE_DEPENDS ${globs})
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${name}/*.h ${CMAKE_SOURCE_DIR}/${name}/*.cpp
       ${CMAKE_SOURCE_DIR}/${name}/*.cu)
  add_library(kb_${name} STATIC ${srcs})
  target_include_directories(kb_${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_compile_options(kb_${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  # Everything a layer may use: itself, its DEPS and everything they may use.
  set(allowed "")
  foreach(d ${L_DEPS})
    target_link_libraries(kb_${name} PUBLIC kb_${d})
    list(APPEND allowed ${d} ${KB_LAYER_${d}_ALLOWED})
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set(KB_LAYER_${name}_ALLOWED "${allowed}" CACHE INTERNAL "")
  set(KB_LAYER_${name}_FILES "${headers}" CACHE INTERNAL "")
  set(all ${KB_ALL_LAYERS} ${name})
  set(KB_ALL_LAYERS "${all}" CACHE INTERNAL "")
endfunction()

# After the last layer: checks each layer's files (every layer is known by then) and writes the graph
# for the `layers` test (build/layers.txt, one line per layer: NAME;ALLOWED...).
function(kb_write_layer_graph)
  set(text "")
  foreach(l ${KB_ALL_LAYERS})
    kb_check_layer(${l} "${KB_LAYER_${l}_FILES}" "${KB_LAYER_${l}_ALLOWED}")
    string(APPEND text "${l}=${KB_LAYER_${l}_ALLOWED}\n")
  endforeach()
  string(APPEND text "cli=${KB_ALL_LAYERS}\n")
  file(WRITE ${CMAKE_BINARY_DIR}/layers.txt "${text}")
endfunction()
