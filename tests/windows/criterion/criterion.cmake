# tests/windows/criterion/criterion.cmake — keel_dep::criterion backed by
# the Criterion-compatible header and runner in this folder, for systems
# where Criterion does not exist (Windows: mingw-w64 or MSVC).
#
# Included by cmake/KeelDependencies.cmake when KEEL_MINI_CRITERION is ON
# (the default on Windows). The library carries main(): a test executable
# links it and defines only its Test(...) functions, as with Criterion.

if(TARGET keel_dep::criterion)
    return()
endif()

add_library(keel_mini_criterion STATIC "${CMAKE_CURRENT_LIST_DIR}/runner.c")
target_include_directories(keel_mini_criterion PUBLIC "${CMAKE_CURRENT_LIST_DIR}")
set_target_properties(keel_mini_criterion PROPERTIES
    ARCHIVE_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/lib")
add_library(keel_dep::criterion ALIAS keel_mini_criterion)
set(Criterion_VERSION "mini (tests/windows/criterion)")

# The runner's self-test: one test for each way a test can end (most fail on
# purpose). Not part of `all`, never a ctest test; tests/windows/blackbox.py
# builds on it to check the runner reports failures as failures.
add_executable(kl_criterion_selftest EXCLUDE_FROM_ALL "${CMAKE_CURRENT_LIST_DIR}/selftest.c")
target_link_libraries(kl_criterion_selftest PRIVATE keel_mini_criterion)
if(NOT WIN32)
    find_package(Threads REQUIRED)
    target_link_libraries(kl_criterion_selftest PRIVATE Threads::Threads)
endif()
# $<1:...>: no per-configuration subfolder with multi-config generators.
set_target_properties(kl_criterion_selftest PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY "$<1:${CMAKE_BINARY_DIR}/tests/windows>")
