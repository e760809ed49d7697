# The version string: project version plus the git commit when available.
find_package(Git QUIET)
set(CORTIQ_GIT_COMMIT "unknown")
if(GIT_FOUND AND EXISTS "${CMAKE_SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE CORTIQ_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE git_result)
  if(NOT git_result EQUAL 0 OR CORTIQ_GIT_COMMIT STREQUAL "")
    set(CORTIQ_GIT_COMMIT "unknown")
  endif()
endif()
configure_file(${CMAKE_SOURCE_DIR}/src/base/version.hpp.in
               ${CMAKE_BINARY_DIR}/generated/base/version.hpp @ONLY)
