# Script mode (cmake -P): writes OUTPUT from src/base/version.hpp.in with the
# current git commit; configure_file leaves the file alone when unchanged.
set(CORTIQ_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE git_result)
  if(git_result EQUAL 0 AND NOT commit STREQUAL "")
    set(CORTIQ_GIT_COMMIT ${commit})
  endif()
endif()
configure_file(${SOURCE_DIR}/src/base/version.hpp.in ${OUTPUT} @ONLY)
