#include "base/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/error.hpp"

namespace cortiq {

namespace {

// Closes a descriptor on every exit path of open().
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void throw_os_error(const std::string& path, const char* what) {
  throw Error(path + ": cannot " + what + ": " + std::strerror(errno));
}

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path) {
  MappedFile file;
  file.path_ = path.string();
  FdGuard guard{::open(file.path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (guard.fd < 0) throw_os_error(file.path_, "open");
  struct stat st {};
  if (::fstat(guard.fd, &st) != 0) throw_os_error(file.path_, "stat");
  if (!S_ISREG(st.st_mode)) throw Error(file.path_ + ": not a regular file");
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ == 0) return file;  // mmap of 0 bytes fails; an empty span is fine
  void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, guard.fd, 0);
  if (p == MAP_FAILED) throw_os_error(file.path_, "map");
  file.data_ = static_cast<const std::byte*>(p);
  return file;
}

void MappedFile::drop_pages(std::span<const std::byte> range) const {
  if (range.empty() || range.data() < data_ || range.data() + range.size() > data_ + size_) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(range.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(range.data()) + range.size()) / page * page;
  // Advice only: a failure leaves the pages resident, which is harmless.
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  release();
}

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace cortiq
