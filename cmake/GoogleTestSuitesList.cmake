# Run by linserve_add_gtest_suites after a build (cmake -P): lists the suites
# of EXECUTABLE and writes OUTPUT, the ctest file that registers each one.
# Input: EXECUTABLE, WORKING_DIRECTORY, OUTPUT, LABELS (comma-separated),
# TIMEOUT, EXCLUDE (a GoogleTest negative filter, may be empty), COST (may be
# empty).
# Without LeakSanitizer's scan at exit in an ASan build: listing runs no test,
# and the scan of LibTorch's heap took 3 of an e2e test program's 5.7 s.
set(ENV{ASAN_OPTIONS} "$ENV{ASAN_OPTIONS}:detect_leaks=0")
execute_process(COMMAND ${EXECUTABLE} --gtest_list_tests
  WORKING_DIRECTORY ${WORKING_DIRECTORY}
  OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE result
  TIMEOUT 60)
if(NOT result EQUAL 0)
  file(REMOVE ${OUTPUT})
  message(FATAL_ERROR "${EXECUTABLE} --gtest_list_tests failed (${result}):\n${listing}${errors}")
endif()

# The listing: a suite on a line of its own ("Suite." or "Prefix/Suite.  #
# TypeParam = ..."), then its tests indented.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.(  #.*)?$")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()

string(REPLACE "," ";" labels "${LABELS}")
set(filter_tail "")
if(EXCLUDE)
  set(filter_tail "-${EXCLUDE}")
endif()
# Each test is named <executable>/<suite>: two executables may hold suites of
# the same name.
get_filename_component(executable_name ${EXECUTABLE} NAME)
set(content "")
foreach(suite IN LISTS suites)
  set(name "${executable_name}/${suite}")
  string(APPEND content
    "add_test([==[${name}]==] [==[${EXECUTABLE}]==] [==[--gtest_filter=${suite}.*${filter_tail}]==])\n"
    "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==]"
    " TIMEOUT ${TIMEOUT}")
  if(labels)
    string(APPEND content " LABELS [==[${labels}]==]")
  endif()
  if(COST)
    string(APPEND content " COST ${COST}")
  endif()
  string(APPEND content ")\n")
endforeach()
file(WRITE ${OUTPUT} "${content}")
