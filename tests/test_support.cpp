#include "test_support.hpp"

#include <algorithm>
#include <cmath>

#include "base/random.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

namespace cortiq::test {

std::filesystem::path shared_data_dir() {
  if (const char* env = std::getenv("CORTIQ_SHARED_DATA"); env != nullptr && *env != '\0') {
    return std::filesystem::is_directory(env) ? std::filesystem::path(env)
                                              : std::filesystem::path();
  }
  const std::filesystem::path dir = CORTIQ_DEFAULT_SHARED_DATA;
  return std::filesystem::is_directory(dir) ? dir : std::filesystem::path();
}

std::filesystem::path golden_dir() {
  return CORTIQ_GOLDEN_DIR;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "cortiq-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void limit_address_space(uint64_t headroom) {
  // The first field of /proc/self/statm is the mapped size in pages.
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  if (!(statm >> pages)) throw std::runtime_error("cannot read /proc/self/statm");
  const uint64_t limit = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + headroom;
  const rlimit rl{limit, limit};
  if (::setrlimit(RLIMIT_AS, &rl) != 0) throw std::runtime_error("setrlimit(RLIMIT_AS) failed");
}

std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

int run_cli(const std::string& args, std::string* output) {
  std::string command = CORTIQ_CLI_PATH;
  command += ' ';
  command += args;
  command += " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::string text;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) text.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  if (output != nullptr) *output = std::move(text);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string sample_text(size_t min_bytes, uint64_t seed) {
  static constexpr std::array<const char*, 24> kWords = {
      "the",    "a",    "model", "reads", "every", "token", "and",    "then",
      "writes", "one",  "more",  "story", "about", "small", "cats",   "who",
      "like",   "warm", "bread", "in",    "the",   "old",   "garden", "today"};
  SplitMix64 bits(seed);
  std::string text;
  while (text.size() < min_bytes) {
    text += kWords[bits.next() % kWords.size()];
    text += bits.next() % 9 == 0 ? ". " : " ";
  }
  return text;
}

std::vector<float> normal_values(uint64_t seed, size_t n, double scale) {
  NormalSampler normal(seed);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(normal.next() * scale);
  return x;
}

double relative_l2(std::span<const float> got, std::span<const float> want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace cortiq::test
