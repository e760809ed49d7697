// Reading hand-made files: other versions, byte order, and the defects the
// reader must name.
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "gguf_test_files.hpp"

namespace cortiq::gguf {
namespace {

using test::RawGguf;

// Runs parse and returns the FormatError's message ("" if it parsed).
std::string parse_error(const std::vector<std::byte>& bytes) {
  try {
    GgufFile::parse(bytes, "t.gguf");
  } catch (const FormatError& e) {
    EXPECT_EQ(e.file(), "t.gguf");
    return e.what();
  }
  return "";
}

void expect_error(const std::vector<std::byte>& bytes, const std::string& fragment) {
  const std::string message = parse_error(bytes);
  EXPECT_NE(message.find(fragment), std::string::npos)
      << "expected an error containing '" << fragment << "', got '" << message << "'";
}

// A one-tensor file: an f32 [2] tensor "w" with its 8 data bytes.
std::vector<std::byte> one_tensor_file(uint32_t version) {
  RawGguf f;
  f.header(version, 1, 2);
  f.str("general.architecture").u32(8).str("llama");
  f.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(2).str("a").str("bc");
  f.str("w").u32(1).i64(2).u32(0).u64(0);
  f.pad_to(32);
  f.put(1.0f).put(2.0f);
  return f.bytes;
}

TEST(GgufReader, ReadsVersion2) {
  const auto bytes = one_tensor_file(2);
  const GgufFile file = GgufFile::parse(bytes);
  EXPECT_EQ(file.version(), 2u);
  EXPECT_EQ(file.architecture(), "llama");
  EXPECT_EQ(file.get_array("tokenizer.ggml.tokens")->size(), 2u);
  ASSERT_EQ(file.tensors().size(), 1u);
  float values[2];
  ASSERT_EQ(file.tensors()[0].data.size(), sizeof(values));
  std::memcpy(values, file.tensors()[0].data.data(), sizeof(values));
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], 2.0f);
}

TEST(GgufReader, RefusesBigEndianFiles) {
  auto bytes = one_tensor_file(3);
  const uint32_t swapped = 0x03000000;  // version 3 written big-endian
  std::memcpy(bytes.data() + 4, &swapped, 4);
  expect_error(bytes, "big-endian GGUF files are not supported");
  const uint32_t swapped_v2 = 0x02000000;
  std::memcpy(bytes.data() + 4, &swapped_v2, 4);
  expect_error(bytes, "big-endian GGUF files are not supported");
}

TEST(GgufReader, RefusesOtherVersions) {
  expect_error(one_tensor_file(1), "GGUF version 1 is not supported");
  expect_error(one_tensor_file(4), "unsupported GGUF version 4");
  expect_error(one_tensor_file(0), "unsupported GGUF version 0");
}

TEST(GgufReader, RefusesOtherMagicAndEmptyInput) {
  auto bytes = one_tensor_file(3);
  bytes[0] = std::byte{'X'};
  expect_error(bytes, "not a GGUF file");
  expect_error({}, "magic");
}

TEST(GgufReader, ErrorNamesFieldAndOffset) {
  RawGguf f;
  f.header(3, 0, 1).str("general.name").u32(13);  // value type 13 does not exist
  try {
    GgufFile::parse(f.bytes, "m.gguf");
    FAIL() << "accepted";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.file(), "m.gguf");
    EXPECT_EQ(e.field(), "metadata key 0 (general.name) type");
    EXPECT_EQ(e.offset(), 24u + 8 + 12);
    EXPECT_NE(e.problem().find("unknown value type id 13"), std::string::npos);
  }
}

TEST(GgufReader, DuplicatesAreErrors) {
  RawGguf keys;
  keys.header(3, 0, 2).str("a").u32(4).u32(1).str("a").u32(4).u32(2);
  expect_error(keys.bytes, "duplicate key 'a'");

  RawGguf tensors;
  tensors.header(3, 2, 0);
  tensors.str("w").u32(1).i64(1).u32(0).u64(0);
  tensors.str("w").u32(1).i64(1).u32(0).u64(32);
  tensors.pad_to(32).fill(64, 0);
  expect_error(tensors.bytes, "duplicate tensor name 'w'");
}

TEST(GgufReader, EmptyKeyIsAnError) {
  RawGguf f;
  f.header(3, 0, 1).str("").u32(0).put(uint8_t{1});
  expect_error(f.bytes, "key is empty");
}

TEST(GgufReader, AlignmentKeyAcceptsUnsignedTypesThatArePowersOfTwo) {
  auto file_with_alignment = [](uint32_t type, uint64_t value, size_t width) {
    RawGguf f;
    f.header(3, 1, 1).str("general.alignment").u32(type);
    f.bytes.resize(f.bytes.size() + width);
    std::memcpy(f.bytes.data() + f.bytes.size() - width, &value, width);
    f.str("w").u32(1).i64(4).u32(0).u64(0);
    f.pad_to(value == 0 || value > 4096 ? 1 : value).fill(16, 0);
    return f.bytes;
  };
  EXPECT_EQ(GgufFile::parse(file_with_alignment(4, 64, 4)).alignment(), 64u);   // u32
  EXPECT_EQ(GgufFile::parse(file_with_alignment(10, 16, 8)).alignment(), 16u);  // u64
  EXPECT_EQ(GgufFile::parse(file_with_alignment(2, 8, 2)).alignment(), 8u);     // u16
  EXPECT_EQ(GgufFile::parse(file_with_alignment(0, 1, 1)).alignment(), 1u);     // u8
  expect_error(file_with_alignment(4, 0, 4), "not a power of two");
  expect_error(file_with_alignment(4, 48, 4), "not a power of two");
  expect_error(file_with_alignment(10, uint64_t{1} << 40, 8), "not a power of two");
  expect_error(file_with_alignment(5, 32, 4), "must be an unsigned integer");  // i32
}

TEST(GgufReader, TensorInfoChecks) {
  auto tensor_file = [](uint32_t n_dims, std::vector<int64_t> dims, uint32_t type, uint64_t offset,
                        size_t data_bytes) {
    RawGguf f;
    f.header(3, 1, 0).str("t").u32(n_dims);
    for (const int64_t d : dims) f.i64(d);
    f.u32(type).u64(offset).pad_to(32).fill(data_bytes, 0x5a);
    return f.bytes;
  };
  EXPECT_NO_THROW(GgufFile::parse(tensor_file(2, {32, 2}, 8, 0, 68)));  // Q8_0
  expect_error(tensor_file(5, {1, 1, 1, 1, 1}, 0, 0, 4), "5 dimensions, at most 4");
  expect_error(tensor_file(1, {-1}, 0, 0, 4), "negative size -1");
  expect_error(tensor_file(2, {int64_t{1} << 32, int64_t{1} << 32}, 0, 0, 4),
               "element count overflows");
  expect_error(tensor_file(1, {int64_t{1} << 62}, 0, 0, 4), "size in bytes overflows");
  expect_error(tensor_file(1, {4}, 99, 0, 16), "unknown tensor type id 99");
  expect_error(tensor_file(1, {4}, 4, 0, 16), "unknown tensor type id 4");  // removed Q4_2
  expect_error(tensor_file(1, {16}, 8, 0, 34), "not a multiple of the Q8_0 block size 32");
  expect_error(tensor_file(1, {4}, 0, 16, 32), "not a multiple of the alignment 32");
  expect_error(tensor_file(1, {4}, 0, 32, 40), "outside the data section");
  expect_error(tensor_file(1, {4}, 0, 0, 15), "outside the data section");
  // A zero-element tensor needs no bytes.
  EXPECT_NO_THROW(GgufFile::parse(tensor_file(2, {0, 5}, 0, 0, 0)));
  // A zero dimension makes the element count 0, but n_rows() and code
  // that walks rows still multiply the other dimensions: 2^80 must not pass.
  expect_error(tensor_file(3, {0, int64_t{1} << 40, int64_t{1} << 40}, 0, 0, 0),
               "element count overflows");
  expect_error(tensor_file(3, {int64_t{1} << 40, 0, int64_t{1} << 40}, 0, 0, 0),
               "element count overflows");
}

TEST(GgufReader, KnownButUnsupportedTypesStillLoad) {
  RawGguf f;
  f.header(3, 1, 0).str("iq").u32(1).i64(256).u32(16).u64(0).pad_to(32).fill(66, 0);
  const GgufFile file = GgufFile::parse(f.bytes);
  EXPECT_EQ(file.tensors()[0].type, GgmlType::IQ2_XXS);
  EXPECT_EQ(file.tensors()[0].n_bytes, 66u);
}

TEST(GgufReader, AbsurdLengthsAreRefusedBeforeAllocating) {
  RawGguf string_len;
  string_len.header(3, 0, 1).u64(uint64_t{1} << 60).fill(64, 0);
  expect_error(string_len.bytes, "string length 1152921504606846976 exceeds");

  RawGguf array_len;
  array_len.header(3, 0, 1).str("a").u32(9).u32(8).u64(uint64_t{1} << 40).fill(64, 0);
  expect_error(array_len.bytes, "count 1099511627776 needs at least 8 bytes per item");

  RawGguf nested_len;  // each nested array needs at least 12 bytes
  nested_len.header(3, 0, 1).str("a").u32(9).u32(9).u64(10).fill(119, 0);
  expect_error(nested_len.bytes, "needs at least 12 bytes per item");

  RawGguf counts;
  counts.header(3, uint64_t{1} << 32, 0);
  expect_error(counts.bytes, "tensor count");
  RawGguf negative;
  negative.header(3, 0, ~uint64_t{0});
  expect_error(negative.bytes, "count is negative");
}

TEST(GgufReader, NestingDepthIsLimited) {
  auto nested = [](int depth) {
    RawGguf f;
    f.header(3, 0, 1).str("deep").u32(9);
    for (int i = 1; i < depth; ++i) f.u32(9).u64(1);
    f.u32(0).u64(1).put(uint8_t{7});
    return f.bytes;
  };
  EXPECT_NO_THROW(GgufFile::parse(nested(16)));
  expect_error(nested(17), "arrays nested more than 16 deep");
  // Deep nesting in a big file must not exhaust the stack.
  expect_error(nested(100000), "arrays nested more than 16 deep");
}

TEST(GgufReader, TypedGettersNameTheKeyOnMismatch) {
  const auto bytes = test::make_sample_gguf();
  const GgufFile file = GgufFile::parse(bytes, "s.gguf");
  EXPECT_THROW(file.get_string("test.u32"), FormatError);
  EXPECT_THROW(file.get_uint("test.i32"), FormatError);  // negative
  EXPECT_THROW(file.get_bool("test.u8"), FormatError);
  EXPECT_THROW(file.get_array("test.string"), FormatError);
  EXPECT_THROW(file.get_float("test.string"), FormatError);
  try {
    file.get_int("test.u64");  // 1.8e19 does not fit in int64
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_EQ(e.field(), "test.u64");
    EXPECT_NE(e.problem().find("expected an integer, found u64"), std::string::npos);
  }
  EXPECT_EQ(file.get_int("test.u32"), 4000000000);
}

TEST(GgufReader, FileWithoutTensorsMayEndAfterTheHeader) {
  RawGguf f;
  f.header(3, 0, 1).str("k").u32(0).put(uint8_t{1});
  const GgufFile file = GgufFile::parse(f.bytes);
  EXPECT_EQ(file.get_uint("k"), 1u);
  EXPECT_TRUE(file.tensors().empty());
}

}  // namespace
}  // namespace cortiq::gguf
