# kagent_area(NAME SOURCES... [LINK libs...]): a static library of one area, headers from the root.
function(kagent_area name)
  cmake_parse_arguments(A "" "" "SOURCES;LINK" ${ARGN})
  add_library(kagent_${name} STATIC ${A_SOURCES})
  target_include_directories(kagent_${name} PUBLIC ${KAGENT_ROOT})
  target_link_libraries(kagent_${name} PUBLIC ${A_LINK})
endfunction()

# kagent_test(NAME SOURCES... [LINK libs...] [LABELS l...] [FILTER gtest-filter]): one GoogleTest
# binary, each case its own ctest test. Tests find the fakes and examples through KAGENT_SOURCE_DIR /
# KAGENT_BINARY_DIR. FILTER limits which cases are discovered here (the rest can be discovered again
# with other properties, e.g. a ctest fixture: see tests/e2e_search).
# Every test runs with KAGENT_CACHE_DIR=off: no test reads or fills the user's profile cache (a test of
# the cache names its own directory).
function(kagent_test name)
  cmake_parse_arguments(A "" "TIMEOUT;FILTER" "SOURCES;LINK;LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${KAGENT_ROOT})
  target_link_libraries(${name} PRIVATE ${A_LINK} GTest::gtest_main GTest::gmock)
  # Test code itself is compiled without optimization: it halves the compile time of a GoogleTest
  # translation unit (22 s -> 10 s for tests/e2e_search at -O3 -> -O0 on 2 cores), and the tests spend
  # their time in the libraries (optimized) and the processes they start, not in their own code.
  target_compile_options(${name} PRIVATE -O0)
  target_compile_definitions(${name} PRIVATE
    KAGENT_SOURCE_DIR="${KAGENT_ROOT}" KAGENT_BINARY_DIR="${CMAKE_BINARY_DIR}")
  if(TARGET kagent_test_pch)
    target_precompile_headers(${name} REUSE_FROM kagent_test_pch)
  endif()
  set(labels ${A_LABELS})
  if(NOT labels)
    set(labels unit)
  endif()
  if(A_FILTER)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER "${A_FILTER}"
      PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${labels}" ENVIRONMENT "KAGENT_CACHE_DIR=off")
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
      PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${labels}" ENVIRONMENT "KAGENT_CACHE_DIR=off")
  endif()
endfunction()
