# areal_add_plugin(<target> NAME <name> SOURCES <src>... [LIBRARIES <lib>...] [OUTPUT_DIRECTORY <dir>])
#
# Builds an areal plugin: a MODULE library named libareal-<name>.so that
# exports only areal_plugin_init (hidden visibility plus a version script),
# so plugins cannot interpose each other's symbols. Used in-tree and, after
# `cmake --install`, by out-of-tree plugins through find_package(areal).
get_filename_component(_AREAL_PLUGIN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)

function(areal_add_plugin target)
  cmake_parse_arguments(ARG "" "NAME;OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_NAME)
    message(FATAL_ERROR "areal_add_plugin(${target}): NAME is required")
  endif()
  if(NOT ARG_NAME MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "areal_add_plugin(${target}): NAME '${ARG_NAME}' must match [a-z0-9_]+")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET areal::plugin_sdk)
    target_link_libraries(${target} PRIVATE areal::plugin_sdk)
  else()
    target_link_libraries(${target} PRIVATE areal_plugin_sdk)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  if(EXISTS "${_AREAL_PLUGIN_CMAKE_DIR}/areal_plugin.map")
    set(_map "${_AREAL_PLUGIN_CMAKE_DIR}/areal_plugin.map")
  else()
    set(_map "${_AREAL_PLUGIN_CMAKE_DIR}/../plugin_api/areal_plugin.map")
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "areal-${ARG_NAME}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${_map}")
  target_link_options(${target} PRIVATE "-Wl,--version-script=${_map}")
  # Every symbol resolved at link time, except in the sanitizer build: there
  # the ASan runtime lives in the executable that loads the plugin.
  if(NOT AREAL_SANITIZE)
    target_link_options(${target} PRIVATE "-Wl,--no-undefined")
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED AREAL_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${AREAL_PLUGIN_OUTPUT_DIR}")
  endif()
endfunction()
