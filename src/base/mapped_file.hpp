// Read-only memory mapping of a whole file. Tensor views point into it, so a
// model's weights are paged in on demand and never copied.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace cortiq {

class MappedFile {
 public:
  // Throws cortiq::Error naming the path and the OS reason on failure.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // Gives the whole pages inside `range` back to the OS (their contents are
  // read from the file again if touched); a range outside the mapping is
  // ignored. For data the engine keeps a copy of, e.g. packed weights.
  void drop_pages(std::span<const std::byte> range) const;
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace cortiq
