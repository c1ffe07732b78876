# linserve_add_gtest_suites(<target> [LABELS label...] [TIMEOUT seconds] [COST seconds])
#
# Registers each GoogleTest suite of <target> as one ctest test, named after
# the suite and running `<target> --gtest_filter=<suite>.*`. A process per
# test (gtest_discover_tests) starts LibTorch once per test, about a second
# of CPU each here, which over some 640 tests was minutes of every run; a
# process per suite keeps ctest's parallelism and its selection by name
# (-R) and label (-L), and the output still names each failing test.
#
# The suites are listed after each build of <target> (POST_BUILD), as
# gtest_discover_tests does, into a file ctest includes; a target this build
# did not make appears as <target>_NOT_BUILT. LINSERVE_GTEST_EXCLUDE, a
# GoogleTest filter of test names (A.b:C.d), leaves those tests out of every
# suite (the sanitizer builds set it). COST, about a suite's seconds, has
# ctest start the long ones first, so that none is left running alone at the
# end of a parallel run.
set(LINSERVE_GTEST_EXCLUDE "" CACHE STRING
  "GoogleTest filter of tests to leave out of every registered suite")
set(LINSERVE_GTEST_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/GoogleTestSuitesList.cmake)

function(linserve_add_gtest_suites target)
  cmake_parse_arguments(arg "" "TIMEOUT;COST" "LABELS" ${ARGN})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 1500)
  endif()
  set(listed ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake)
  # Labels travel as one argument, separated by commas.
  string(REPLACE ";" "," labels "${arg_LABELS}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND}
      -D EXECUTABLE=$<TARGET_FILE:${target}>
      -D WORKING_DIRECTORY=${CMAKE_CURRENT_BINARY_DIR}
      -D OUTPUT=${listed}
      -D LABELS=${labels}
      -D TIMEOUT=${arg_TIMEOUT}
      -D EXCLUDE=${LINSERVE_GTEST_EXCLUDE}
      -D COST=${arg_COST}
      -P ${LINSERVE_GTEST_SUITES_SCRIPT}
    BYPRODUCTS ${listed}
    VERBATIM)
  file(WRITE ${include_file}
    "if(EXISTS \"${listed}\")\n"
    "  include(\"${listed}\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
