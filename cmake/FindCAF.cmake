# Debian's libcaf-dev (0.17) installs headers and shared objects only: no CMake package, no .pc.
# This module locates them and exports the target names that CAF 0.18+ itself exports,
# CAF::core and CAF::io, so that an upgrade leaves every consumer untouched.
include(FindPackageHandleStandardArgs)
find_package(Threads REQUIRED)

find_path(CAF_INCLUDE_DIR NAMES caf/config.hpp HINTS ${CAF_ROOT} PATH_SUFFIXES include)
if(CAF_INCLUDE_DIR)
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_line REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+$" _caf_num "${_caf_line}")
  math(EXPR _caf_major "${_caf_num} / 10000")
  math(EXPR _caf_minor "(${_caf_num} / 100) % 100")
  math(EXPR _caf_patch "${_caf_num} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

set(_caf_wanted core ${CAF_FIND_COMPONENTS})
list(REMOVE_DUPLICATES _caf_wanted)
foreach(_c IN LISTS _caf_wanted)
  find_library(CAF_${_c}_LIBRARY NAMES caf_${_c} HINTS ${CAF_ROOT} PATH_SUFFIXES lib lib64)
  if(CAF_${_c}_LIBRARY AND NOT TARGET CAF::${_c})
    set(CAF_${_c}_FOUND TRUE)
    add_library(CAF::${_c} SHARED IMPORTED)
    set_target_properties(CAF::${_c} PROPERTIES
      IMPORTED_LOCATION "${CAF_${_c}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
    if(_c STREQUAL "core")
      target_link_libraries(CAF::core INTERFACE Threads::Threads)
    else()
      target_link_libraries(CAF::${_c} INTERFACE CAF::core)
    endif()
  elseif(CAF_${_c}_LIBRARY)
    set(CAF_${_c}_FOUND TRUE)
  endif()
endforeach()

find_package_handle_standard_args(CAF REQUIRED_VARS CAF_INCLUDE_DIR CAF_core_LIBRARY
  VERSION_VAR CAF_VERSION HANDLE_COMPONENTS)
