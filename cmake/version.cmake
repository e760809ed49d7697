# The version string: project version plus the git commit. The header is
# rewritten at every build (only when its content changes), so the commit
# in `cortiq --version` is never stale in an incremental build.
set(CORTIQ_VERSION_HEADER ${CMAKE_BINARY_DIR}/generated/base/version.hpp)
add_custom_target(cortiq_version
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${CORTIQ_VERSION_HEADER}
          -DPROJECT_VERSION=${PROJECT_VERSION} -P ${CMAKE_SOURCE_DIR}/cmake/write_version.cmake
  BYPRODUCTS ${CORTIQ_VERSION_HEADER}
  COMMENT "Checking the version header"
  VERBATIM)
