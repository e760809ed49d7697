# cmake -DINPUT=FILE -DOUTPUT=FILE.cpp -DNAME=function -P embed_file.cmake
# Writes a C++ source whose `std::string_view cortiq::server::NAME()` returns
# the bytes of INPUT: assets built into the binary, so that nothing is read
# from disk or fetched at run time.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" length)
math(EXPR bytes "${length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," chars "${hex}")
get_filename_component(input_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp" "// Generated from ${input_name} by cmake/embed_file.cmake: do not edit.
#include <string_view>

namespace cortiq::server {

std::string_view ${NAME}() {
  static constexpr char kBytes[] = {
  ${chars}'\\0'};
  return std::string_view(kBytes, ${bytes});
}

}  // namespace cortiq::server
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
