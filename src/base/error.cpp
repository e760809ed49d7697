#include "base/error.hpp"

#include <new>

namespace cortiq {

namespace {
std::string format_error_message(std::string_view file, std::string_view field, uint64_t offset,
                                 std::string_view problem) {
  std::string m;
  m.append(file).append(": ").append(field).append(" at offset ");
  m.append(std::to_string(offset)).append(": ").append(problem);
  return m;
}
}  // namespace

FormatError::FormatError(std::string_view file, std::string_view field, uint64_t offset,
                         std::string_view problem)
    : Error(format_error_message(file, field, offset, problem)),
      file_(file),
      field_(field),
      offset_(offset),
      problem_(problem) {}

std::string describe(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return "out of memory";
  return e.what();
}

}  // namespace cortiq
