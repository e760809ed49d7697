// Split models: NAME-0000i-of-0000N.gguf opened as one file from part 1.
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_split.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "gguf_test_files.hpp"
#include "test_support.hpp"

namespace cortiq::gguf {
namespace {

struct PartSpec {
  uint16_t split_no;
  uint16_t split_count;
  int32_t tensors_count;
  std::vector<std::string> tensor_names;
};

// Writes one part as the peer's gguf-split does: every part carries the
// split keys, the first one also the model's metadata.
void write_part(const std::filesystem::path& path, const PartSpec& spec, uint64_t alignment = 32) {
  GgufWriter w(alignment);
  if (spec.split_no == 0) w.set("general.architecture", std::string("llama"));
  w.set(std::string(kSplitNoKey), spec.split_no);
  w.set(std::string(kSplitCountKey), spec.split_count);
  w.set(std::string(kSplitTensorsCountKey), spec.tensors_count);
  for (const std::string& name : spec.tensor_names) w.add_tensor(name, GgmlType::F32, {8, 2});
  w.begin(path);
  for (size_t i = 0; i < spec.tensor_names.size(); ++i) {
    w.write_tensor_data(test::pattern_bytes(w.tensor_bytes(i), spec.split_no * 10u + i));
  }
  w.finish();
}

class GgufSplit : public ::testing::Test {
 protected:
  std::filesystem::path part(uint32_t number, uint32_t count = 3) const {
    return split_path((dir_.path() / "model").string(), number, count);
  }
  void write_three_parts() {
    write_part(part(1), {0, 3, 5, {"token_embd.weight", "blk.0.a"}});
    write_part(part(2), {1, 3, 5, {"blk.0.b"}}, 64);
    write_part(part(3), {2, 3, 5, {"blk.1.a", "output.weight"}});
  }

  test::TempDir dir_;
};

TEST_F(GgufSplit, FirstPartOpensAllParts) {
  write_three_parts();
  const GgufFile file = GgufFile::open(part(1));
  EXPECT_EQ(file.n_splits(), 3u);
  EXPECT_EQ(file.architecture(), "llama");
  EXPECT_EQ(file.get_uint("split.no"), 0u);  // metadata is the first part's
  EXPECT_EQ(file.file_size(), std::filesystem::file_size(part(1)) +
                                  std::filesystem::file_size(part(2)) +
                                  std::filesystem::file_size(part(3)));
  const std::vector<std::pair<std::string, uint32_t>> expected = {{"token_embd.weight", 0},
                                                                  {"blk.0.a", 0},
                                                                  {"blk.0.b", 1},
                                                                  {"blk.1.a", 2},
                                                                  {"output.weight", 2}};
  ASSERT_EQ(file.tensors().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const TensorInfo& t = file.tensors()[i];
    EXPECT_EQ(t.name, expected[i].first);
    EXPECT_EQ(t.split, expected[i].second);
    const uint32_t index_in_part = (i == 1 || i == 4) ? 1 : 0;
    const auto want = test::pattern_bytes(t.n_bytes, t.split * 10u + index_in_part);
    ASSERT_EQ(t.data.size(), want.size());
    EXPECT_EQ(std::memcmp(t.data.data(), want.data(), want.size()), 0) << t.name;
  }
  EXPECT_EQ(file.find_tensor("blk.1.a")->split, 2u);
}

TEST_F(GgufSplit, OpeningALaterPartIsRefused) {
  write_three_parts();
  try {
    GgufFile::open(part(2));
    FAIL() << "part 2 opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("open the first part"), std::string::npos) << e.what();
  }
}

TEST_F(GgufSplit, MissingPartIsNamed) {
  write_three_parts();
  std::filesystem::remove(part(3));
  try {
    GgufFile::open(part(1));
    FAIL() << "opened without part 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("part 3 of 3"), std::string::npos) << e.what();
  }
}

TEST_F(GgufSplit, PartNumbersMustAgree) {
  write_three_parts();
  write_part(part(2), {2, 3, 5, {"blk.0.b"}});  // says it is the third part
  EXPECT_THROW(GgufFile::open(part(1)), Error);
}

TEST_F(GgufSplit, SplitCountsMustAgree) {
  write_three_parts();
  write_part(part(3), {2, 4, 5, {"blk.1.a", "output.weight"}});
  EXPECT_THROW(GgufFile::open(part(1)), Error);
}

TEST_F(GgufSplit, TensorCountMustMatch) {
  write_part(part(1), {0, 3, 6, {"token_embd.weight", "blk.0.a"}});
  write_part(part(2), {1, 3, 6, {"blk.0.b"}});
  write_part(part(3), {2, 3, 6, {"blk.1.a", "output.weight"}});
  try {
    GgufFile::open(part(1));
    FAIL() << "tensor count mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("split.tensors.count is 6"), std::string::npos)
        << e.what();
  }
}

TEST_F(GgufSplit, TensorInTwoPartsIsAnError) {
  write_part(part(1), {0, 3, 5, {"token_embd.weight", "blk.0.a"}});
  write_part(part(2), {1, 3, 5, {"blk.0.a"}});
  write_part(part(3), {2, 3, 5, {"blk.1.a", "output.weight"}});
  EXPECT_THROW(GgufFile::open(part(1)), Error);
}

TEST_F(GgufSplit, NameMustFollowThePattern) {
  const auto odd_name = dir_.path() / "model.gguf";
  write_part(odd_name, {0, 3, 5, {"token_embd.weight"}});
  try {
    GgufFile::open(odd_name);
    FAIL() << "opened a split part with an odd name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NAME-00001-of-00003.gguf"), std::string::npos)
        << e.what();
  }
}

TEST_F(GgufSplit, SingleSplitIsAPlainFile) {
  write_part(part(1, 1), {0, 1, 1, {"w"}});
  const GgufFile file = GgufFile::open(part(1, 1));
  EXPECT_EQ(file.n_splits(), 1u);
  EXPECT_EQ(file.tensors().size(), 1u);
}

}  // namespace
}  // namespace cortiq::gguf
