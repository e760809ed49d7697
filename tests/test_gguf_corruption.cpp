// Thousands of broken variants of one valid file: truncations, random byte
// flips, and absurd values in every count, length, dimension, type id and
// offset. Each must parse or throw cortiq::Error; never crash, hang, throw
// anything else, or allocate without bound.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "gguf_test_files.hpp"
#include "test_support.hpp"

namespace cortiq::gguf {
namespace {

// A numeric field of the valid sample file, found by walking it.
struct Field {
  size_t offset;
  size_t width;  // 4 or 8
  std::string name;
};

// Walks a file known to be valid and lists where each structural number
// lives. Test-only: it trusts the bytes, unlike the reader.
class FieldWalker {
 public:
  explicit FieldWalker(std::span<const std::byte> bytes) : bytes_(bytes) {}

  std::vector<Field> walk() {
    skip(4);  // magic
    field(4, "version");
    const uint64_t n_tensors = field(8, "tensor count");
    const uint64_t n_kv = field(8, "metadata count");
    for (uint64_t i = 0; i < n_kv; ++i) {
      const uint64_t key_length = field(8, "key length");
      skip(key_length);
      value(static_cast<ValueType>(field(4, "value type")));
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      skip(field(8, "tensor name length"));
      const uint64_t n_dims = field(4, "n_dims");
      for (uint64_t d = 0; d < n_dims; ++d) field(8, "dimension");
      field(4, "tensor type");
      field(8, "tensor offset");
    }
    header_end_ = pos_;
    return std::move(fields_);
  }
  size_t header_end() const { return header_end_; }

 private:
  uint64_t field(size_t width, std::string name) {
    uint64_t v = 0;
    std::memcpy(&v, bytes_.data() + pos_, width);
    fields_.push_back({pos_, width, std::move(name)});
    pos_ += width;
    return v;
  }
  void skip(uint64_t n) { pos_ += n; }

  void value(ValueType type) {
    switch (type) {
      case ValueType::string:
        skip(field(8, "string length"));
        break;
      case ValueType::array:
        array();
        break;
      case ValueType::u8:
      case ValueType::i8:
      case ValueType::boolean:
        skip(1);
        break;
      case ValueType::u16:
      case ValueType::i16:
        skip(2);
        break;
      case ValueType::u32:
      case ValueType::i32:
      case ValueType::f32:
        skip(4);
        break;
      default:
        skip(8);
        break;
    }
  }
  void array() {
    const auto element = static_cast<ValueType>(field(4, "array element type"));
    const uint64_t count = field(8, "array length");
    for (uint64_t i = 0; i < count; ++i) {
      if (element == ValueType::array) {
        array();
      } else {
        value(element);
      }
    }
  }

  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
  size_t header_end_ = 0;
  std::vector<Field> fields_;
};

enum class Outcome { parsed, refused };

// Parses and checks the result is self-consistent; fails the test on any
// exception that is not a cortiq::Error.
Outcome parse_checked(std::span<const std::byte> bytes, const std::string& what) {
  try {
    const GgufFile file = GgufFile::parse(bytes, "corrupt.gguf");
    for (const TensorInfo& t : file.tensors()) {
      EXPECT_EQ(t.data.size(), t.n_bytes) << what;
      EXPECT_GE(t.data.data(), bytes.data()) << what;
      EXPECT_LE(t.data.data() + t.data.size(), bytes.data() + bytes.size()) << what;
    }
    return Outcome::parsed;
  } catch (const Error&) {
    return Outcome::refused;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": unexpected exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << ": unexpected non-std exception";
  }
  return Outcome::refused;
}

long max_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

class GgufCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    sample_ = test::make_sample_gguf();
    FieldWalker walker(sample_);
    fields_ = walker.walk();
    header_end_ = walker.header_end();
    data_offset_ = (header_end_ + 31) / 32 * 32;
    ASSERT_EQ(parse_checked(sample_, "sample"), Outcome::parsed);
    ASSERT_GT(fields_.size(), 60u);
  }

  std::vector<std::byte> sample_;
  std::vector<Field> fields_;
  size_t header_end_ = 0;
  size_t data_offset_ = 0;
};

TEST_F(GgufCorruption, EveryTruncationIsRefused) {
  int refused = 0;
  for (size_t length = 0; length < sample_.size(); ++length) {
    const auto prefix = std::span(sample_).first(length);
    const Outcome outcome = parse_checked(prefix, "truncated to " + std::to_string(length));
    // Up to the end of the last tensor's data every prefix lacks something;
    // only the last tensor's trailing padding may go.
    if (length < data_offset_) {
      EXPECT_EQ(outcome, Outcome::refused) << length;
    }
    refused += outcome == Outcome::refused;
  }
  EXPECT_GE(refused, static_cast<int>(data_offset_));
  // Truncated to the data section with an error that says where.
  try {
    GgufFile::parse(std::span(sample_).first(header_end_ - 3), "cut.gguf");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_EQ(e.file(), "cut.gguf");
    EXPECT_NE(e.field().find("tensor 3"), std::string::npos) << e.what();
  }
}

TEST_F(GgufCorruption, AbsurdValuesInEveryField) {
  const uint64_t size = sample_.size();
  const std::vector<uint64_t> values = {0,
                                        1,
                                        2,
                                        3,
                                        4,
                                        8,
                                        9,
                                        12,
                                        13,
                                        31,
                                        32,
                                        33,
                                        64,
                                        255,
                                        0x7FFFFFFFull,
                                        0x80000000ull,
                                        0xFFFFFFFFull,
                                        0x100000000ull,
                                        uint64_t{1} << 40,
                                        uint64_t{1} << 60,
                                        0x7FFFFFFFFFFFFFFFull,
                                        0x8000000000000000ull,
                                        0xFFFFFFFFFFFFFFFFull,
                                        0xFFFFFFFFFFFFFFFEull,
                                        size,
                                        size - 1,
                                        size + 1,
                                        size / 2};
  int cases = 0;
  int refused = 0;
  std::vector<std::byte> bytes;
  for (const Field& f : fields_) {
    uint64_t original = 0;
    std::memcpy(&original, sample_.data() + f.offset, f.width);
    std::vector<uint64_t> candidates = values;
    candidates.insert(candidates.end(), {original + 1, original - 1, original * 2, original << 32});
    for (const uint64_t v : candidates) {
      bytes = sample_;
      std::memcpy(bytes.data() + f.offset, &v, f.width);  // low bytes for 4-byte fields
      const std::string what =
          f.name + " at " + std::to_string(f.offset) + " = " + std::to_string(v);
      refused += parse_checked(bytes, what) == Outcome::refused;
      ++cases;
    }
  }
  EXPECT_GT(cases, 2000);
  EXPECT_GT(refused, cases / 2);
}

TEST_F(GgufCorruption, RandomByteFlipsInTheHeader) {
  test::SplitMix64 rng(0x6767'7566'2024ull);
  std::vector<std::byte> bytes;
  int refused = 0;
  constexpr int kCases = 12000;
  for (int i = 0; i < kCases; ++i) {
    bytes = sample_;
    const int n_flips = 1 + static_cast<int>(rng.next() % 4);
    for (int k = 0; k < n_flips; ++k) {
      const size_t at = rng.next() % header_end_;
      switch (rng.next() % 3) {
        case 0:
          bytes[at] ^= std::byte{static_cast<uint8_t>(1u << (rng.next() % 8))};
          break;
        case 1:
          bytes[at] = static_cast<std::byte>(rng.next() & 0xff);
          break;
        default:
          bytes[at] = std::byte{0xff};
          break;
      }
    }
    refused += parse_checked(bytes, "flip case " + std::to_string(i)) == Outcome::refused;
  }
  EXPECT_GT(refused, 0);
}

TEST_F(GgufCorruption, RandomTruncatedAndFlippedTogether) {
  test::SplitMix64 rng(42);
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::byte> bytes = sample_;
    bytes.resize(rng.next() % (sample_.size() + 1));
    if (!bytes.empty()) bytes[rng.next() % bytes.size()] = static_cast<std::byte>(rng.next());
    parse_checked(bytes, "cut+flip case " + std::to_string(i));
  }
}

// Runs after the others in this suite by name order is not guaranteed, so
// it measures its own loop: parsing broken files must not grow the process.
TEST_F(GgufCorruption, NoAllocationBlowUp) {
  const long before = max_rss_kib();
  test::SplitMix64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> bytes = sample_;
    const Field& f = fields_[rng.next() % fields_.size()];
    const uint64_t huge = (rng.next() | (uint64_t{1} << 40)) >> (rng.next() % 24);
    std::memcpy(bytes.data() + f.offset, &huge, f.width);
    parse_checked(bytes, "huge " + f.name);
  }
  EXPECT_LT(max_rss_kib() - before, 64 * 1024) << "parsing broken files grew the process by MiBs";
}

// Every level of nested arrays may claim (almost) all the bytes left, so a
// reader that reserved each level's count up front would hold 16 such
// reservations at once: about 75 times the file size before it reaches the
// defect. The child refuses the file within a budget of a few times its size.
TEST(GgufNesting, NestedCountsDoNotEachReserveTheWholeFile) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "needs an address-space limit";
  constexpr size_t kFileBytes = size_t{16} << 20;
  test::RawGguf f;
  f.header(3, 0, 1).str("nested").u32(static_cast<uint32_t>(ValueType::array));
  for (int depth = 1; depth <= 16; ++depth) {
    const bool innermost = depth == 16;  // strings: the largest std:: item per byte
    f.u32(static_cast<uint32_t>(innermost ? ValueType::string : ValueType::array));
    f.u64((kFileBytes - f.bytes.size()) / (innermost ? 8 : 12) - 2);
  }
  f.fill(kFileBytes - f.bytes.size(), 0xff);  // the first string length is absurd
  EXPECT_EXIT(
      {
        test::limit_address_space(kFileBytes * 12);
        try {
          GgufFile::parse(f.bytes, "nested.gguf");
        } catch (const FormatError&) {
          std::_Exit(0);
        } catch (const std::bad_alloc&) {
          std::_Exit(3);
        }
        std::_Exit(4);
      },
      ::testing::ExitedWithCode(0), "");
}

// The same corruptions through Model::load, on a real (tiny) model file:
// absurd values in every structural field, random flips in the header
// (metadata values included: head counts, lengths, rope settings) and
// truncations. Each variant must load or throw cortiq::Error — never
// crash or throw anything else — and a variant that loads must forward a
// few tokens or refuse them with cortiq::Error.
TEST(GgufCorruptionModelLoad, EveryVariantLoadsOrIsRefused) {
  test::TestModelSpec spec;
  spec.n_embd = 32;
  spec.n_ff = 64;
  spec.n_layer = 1;
  const auto path = test::test_model_path(spec);
  const std::vector<uint8_t> file = test::read_file_bytes(path);
  std::vector<std::byte> valid(file.size());
  std::memcpy(valid.data(), file.data(), file.size());
  FieldWalker walker(valid);
  const std::vector<Field> fields = walker.walk();
  const size_t header_end = walker.header_end();
  test::TempDir dir;
  const auto variant = dir / "variant.gguf";
  int loaded = 0, refused = 0, cases = 0;
  const auto try_load = [&](const std::vector<std::byte>& bytes, const std::string& what) {
    // Built by conversion, not memcpy: the truncated-to-zero variant has no data pointer.
    std::vector<uint8_t> out;
    out.reserve(bytes.size());
    for (const std::byte b : bytes) out.push_back(static_cast<uint8_t>(b));
    test::write_file_bytes(variant, out);
    ++cases;
    try {
      LoadOptions options;
      options.threads = 1;
      options.context = 64;
      const auto model = Model::load(variant, options);
      ++loaded;
      try {
        Session session(model);
        const std::vector<TokenId> ids = {1, 2, 3};
        session.evaluate(ids);
      } catch (const Error&) {
      }
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": unexpected exception: " << e.what();
    } catch (...) {
      ADD_FAILURE() << what << ": unexpected non-std exception";
    }
  };
  std::vector<std::byte> bytes;
  for (const Field& f : fields) {
    for (const uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{0xFFFFFFFF},
                             uint64_t{1} << 40, ~uint64_t{0}}) {
      bytes = valid;
      std::memcpy(bytes.data() + f.offset, &v, f.width);
      try_load(bytes, f.name + " at " + std::to_string(f.offset) + " = " + std::to_string(v));
    }
  }
  test::SplitMix64 rng(0x6c6f6164);
  for (int i = 0; i < 400; ++i) {
    bytes = valid;
    const size_t at = rng.next() % header_end;
    bytes[at] = static_cast<std::byte>(rng.next() & 0xff);
    try_load(bytes, "flip at " + std::to_string(at));
  }
  for (const size_t length :
       {size_t{0}, size_t{8}, header_end / 2, header_end, valid.size() / 2, valid.size() - 1}) {
    try_load(std::vector<std::byte>(valid.begin(), valid.begin() + length),
             "truncated to " + std::to_string(length));
  }
  std::printf("[ corrupt  ] %d variants through Model::load: %d refused, %d loaded\n", cases,
              refused, loaded);
  EXPECT_GT(cases, 1000);
  EXPECT_GT(refused, cases / 2);
  EXPECT_GT(loaded, 0);  // flips in values that change nothing checked
}

}  // namespace
}  // namespace cortiq::gguf
