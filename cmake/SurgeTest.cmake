# GCC 12 at -O1 with ASan reports a false -Wmaybe-uninitialized inside
# libstdc++'s std::regex (a moved-from std::function in
# regex_automaton.h), which -Werror turns into a failed build of the asan
# part. Off there for test code only (every test target, and tools such as
# surge-stress that call this); the Release build keeps the warning.
function(surge_test_sanitizer_warnings target)
  if(SURGE_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
  endif()
endfunction()

# surge_test(NAME SOURCES ... LIBS ... LABELS ... [TIMEOUT s])
# One GoogleTest binary, registered with ctest under the given labels
# (unit, integration, fuse, rdma, fault) so a developer can run a slice.
function(surge_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  surge_test_sanitizer_warnings(${name})
  surge_test_run(${name} BINARY ${name} LABELS ${T_LABELS} TIMEOUT ${T_TIMEOUT})
endfunction()

# surge_test_run(NAME BINARY bin [ARGS ...] [ENV ...] LABELS ... [TIMEOUT s])
# Registers a surge_test binary with ctest under NAME (surge_test does so
# under its own name), with extra arguments and environment: one suite
# run again against a second backend without compiling its sources twice.
function(surge_test_run name)
  cmake_parse_arguments(T "" "BINARY;TIMEOUT" "ARGS;ENV;LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND ${T_BINARY} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # Sanitized binaries run several times slower (mds_namespace_test passes
  # in seconds in Release and ran past 300 s under ASan): the time limit
  # grows with them, so a timeout still means a hang, not instrumentation.
  # 8x, not the 4x of the waits inside a test (tests/common/time_scale.h):
  # under TSan at load 12-19, client_chain_failover_test's six cases took
  # 12-312 s each, every one passing, and the whole ran past 4x its 300 s.
  if(SURGE_SANITIZE OR SURGE_TSAN)
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 8")
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "SURGE_BUILD_DIR=${PROJECT_BINARY_DIR};SURGE_SOURCE_DIR=${PROJECT_SOURCE_DIR};${T_ENV}")
endfunction()
