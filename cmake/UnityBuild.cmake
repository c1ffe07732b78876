# Unity builds: -DCMAKE_UNITY_BUILD=ON compiles each target's sources up to
# eight to a unit (CMake's UNITY_BUILD). The sanitizer builds use it
# (scripts/test-sanitized, scripts/fuzz): CI compiles them from nothing
# whenever a header most units include changes, and most of a unit's time
# goes to the code of the inline functions it uses from LibTorch, nlohmann
# json or gRPC, generated once per unit. The engine's two libraries under
# ASan, from nothing, the precompiled headers made beforehand: 191 s wall
# (369 s CPU) in unity units against 301 s (595 s CPU) one file a unit, on
# 2 cores (tests/RELIABILITY.md, "fifth pass"). The normal build
# (scripts/build) keeps one unit per file: an edit there recompiles one
# file, not eight.
#
# Which files stay units of their own:
# - sources with options of their own (the kernels built for other
#   instruction sets): CMake leaves them out by itself;
# - a file with a name of its own (anonymous namespace, static) that another
#   file of its target also defines (two files' kPanel, Invalid, Json...) or
#   that a project header declares (it could hide that name from the files
#   after it): found when the tree is configured (cmake/unity_own_units.py),
#   so a new file needs no list;
# - a file that the scan misses says so itself:
#
#   linserve_own_unit(<target> <file>...)
#
# A unity build failing with "redefinition of" or "is ambiguous" names such
# a file.
function(linserve_own_unit target)
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target}
    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# _linserve_targets_under(<dir> <out>): every target defined in <dir> and
# the folders below it.
function(_linserve_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    _linserve_targets_under(${subdirectory} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# linserve_unity_own_units(): after every target is defined (the end of the
# top CMakeLists.txt); does nothing unless CMAKE_UNITY_BUILD is on.
function(linserve_unity_own_units)
  if(NOT CMAKE_UNITY_BUILD)
    return()
  endif()
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  _linserve_targets_under(${PROJECT_SOURCE_DIR} targets)
  set(listing "")
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(unity ${target} UNITY_BUILD)
    if(NOT unity OR type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    foreach(source IN LISTS sources)
      if(source MATCHES "^\\$<")
        continue()
      endif()
      get_filename_component(path ${source} ABSOLUTE BASE_DIR ${source_dir})
      if(EXISTS ${path})
        string(APPEND listing "${target}\t${path}\n")
      endif()
    endforeach()
  endforeach()
  set(listing_file ${CMAKE_BINARY_DIR}/unity_sources.txt)
  file(WRITE ${listing_file} "${listing}")
  execute_process(COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/cmake/unity_own_units.py
    INPUT_FILE ${listing_file} OUTPUT_VARIABLE own_units COMMAND_ERROR_IS_FATAL ANY)
  string(REPLACE "\n" ";" own_units "${own_units}")
  set(count 0)
  foreach(line IN LISTS own_units)
    if(line MATCHES "^([^\t]+)\t(.+)$")
      linserve_own_unit(${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
  message(STATUS "Unity build: ${count} files are units of their own (names they share)")
endfunction()
