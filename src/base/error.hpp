// Error types. Everything the engine refuses goes through these, so the
// message always says what is wrong and, for file contents, where.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cortiq {

// A user-facing failure: bad input, an unsupported feature, an I/O problem.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A running call stopped because the caller asked it to (Session::cancel):
// not a failure of the input or the engine.
class Cancelled : public Error {
 public:
  using Error::Error;
};

// A defect inside a file: names the file, the field at fault and the byte
// offset where it was read, e.g.
//   model.gguf: tensor 3 (blk.0.attn_q.weight) type at offset 1234: unknown type id 99
class FormatError : public Error {
 public:
  FormatError(std::string_view file, std::string_view field, uint64_t offset,
              std::string_view problem);

  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }
  uint64_t offset() const { return offset_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string file_;
  std::string field_;
  uint64_t offset_;
  std::string problem_;
};

// What to tell a user about any exception: its message, but "out of
// memory" for std::bad_alloc (whose what() names only the type).
std::string describe(const std::exception& e);

}  // namespace cortiq
