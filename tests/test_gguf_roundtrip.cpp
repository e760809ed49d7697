// Writer -> reader round trips, and the writer's refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "gguf_test_files.hpp"
#include "test_support.hpp"

namespace cortiq::gguf {
namespace {

using test::make_sample_gguf;
using test::pattern_bytes;

template <class T>
const std::vector<T>& items_of(const GgufFile& file, std::string_view key) {
  const Array* array = file.get_array(key);
  EXPECT_NE(array, nullptr) << key;
  const std::vector<T>* items = array->as<T>();
  EXPECT_NE(items, nullptr) << key;
  return *items;
}

TEST(GgufRoundTrip, EveryScalarType) {
  const auto bytes = make_sample_gguf();
  const GgufFile file = GgufFile::parse(bytes);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.architecture(), "llama");
  EXPECT_EQ(file.get_uint("test.u8"), 200u);
  EXPECT_EQ(file.get_int("test.i8"), -100);
  EXPECT_EQ(file.get_uint("test.u16"), 60000u);
  EXPECT_EQ(file.get_int("test.i16"), -30000);
  EXPECT_EQ(file.get_uint("test.u32"), 4000000000u);
  EXPECT_EQ(file.get_int("test.i32"), -2000000000);
  EXPECT_EQ(file.get_float("test.f32"), 1.5);
  EXPECT_EQ(file.get_bool("test.bool"), true);
  EXPECT_EQ(file.get_string("test.string"), "h\xc3\xa9llo \"world\"\n");
  EXPECT_EQ(file.get_uint("test.u64"), 18000000000000000000ull);
  EXPECT_EQ(file.get_int("test.i64"), -9000000000000000000ll);
  EXPECT_EQ(file.get_float("test.f64"), 2.25);
  // Each keeps its on-disk type.
  EXPECT_EQ(file.find("test.i16")->type(), ValueType::i16);
  EXPECT_EQ(file.find("test.f64")->type(), ValueType::f64);
  EXPECT_EQ(file.find("missing"), nullptr);
  EXPECT_EQ(file.get_uint("missing"), std::nullopt);
}

TEST(GgufRoundTrip, ArraysIncludingStringsAndNested) {
  const auto bytes = make_sample_gguf();
  const GgufFile file = GgufFile::parse(bytes);
  EXPECT_EQ(items_of<std::string>(file, "tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<s>", "</s>", "", "\xe2\x96\x81the", "a"}));
  EXPECT_EQ(items_of<float>(file, "tokenizer.ggml.scores"),
            (std::vector<float>{0.0f, -1.0f, 2.5f}));
  EXPECT_EQ(items_of<bool>(file, "test.bools"), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(file.get_array("test.empty")->element_type, ValueType::u16);
  EXPECT_EQ(file.get_array("test.empty")->size(), 0u);

  const auto& nested = items_of<Array>(file, "test.nested");
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(*nested[0].as<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(*nested[1].as<std::string>(), (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(nested[2].element_type, ValueType::u64);
  EXPECT_EQ(nested[2].size(), 0u);
}

TEST(GgufRoundTrip, MetadataKeepsInsertionOrderAndReplacesInPlace) {
  GgufWriter w;
  w.set("b", uint32_t{1});
  w.set("a", uint32_t{2});
  w.set("c", uint32_t{3});
  w.set("a", std::string("replaced"));
  w.remove("c");
  w.begin_in_memory();
  const auto bytes = w.finish_in_memory();
  const GgufFile file = GgufFile::parse(bytes);
  ASSERT_EQ(file.metadata().size(), 2u);
  EXPECT_EQ(file.metadata()[0].key, "b");
  EXPECT_EQ(file.metadata()[1].key, "a");
  EXPECT_EQ(file.get_string("a"), "replaced");
  EXPECT_TRUE(file.tensors().empty());
}

TEST(GgufRoundTrip, TensorViewsPointAtTheirBytes) {
  const auto bytes = make_sample_gguf();
  const GgufFile file = GgufFile::parse(bytes);
  ASSERT_EQ(file.tensors().size(), 4u);
  const uint64_t expected_bytes[] = {4 * 3 * 4, 2 * 34, 8 * 2, 8 * 4};
  for (size_t i = 0; i < 4; ++i) {
    const TensorInfo& t = file.tensors()[i];
    EXPECT_EQ(t.n_bytes, expected_bytes[i]) << t.name;
    ASSERT_EQ(t.data.size(), t.n_bytes) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    EXPECT_EQ(static_cast<uint64_t>(t.data.data() - bytes.data()) % 32, 0u);
    EXPECT_GE(t.data.data(), bytes.data());  // a view, not a copy
    EXPECT_LE(t.data.data() + t.data.size(), bytes.data() + bytes.size());
    const auto want = pattern_bytes(t.n_bytes, static_cast<uint32_t>(i));
    EXPECT_EQ(std::memcmp(t.data.data(), want.data(), want.size()), 0) << t.name;
    EXPECT_EQ(t.split, 0u);
  }
  const TensorInfo* q = file.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::Q8_0);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(q->n_elements(), 64);
  EXPECT_EQ(q->row_length(), 32);
  EXPECT_EQ(q->n_rows(), 2);
  EXPECT_EQ(file.find_tensor("blk.0.cube")->n_rows(), 4);
  EXPECT_EQ(file.find_tensor("nope"), nullptr);
}

class GgufAlignment : public ::testing::TestWithParam<uint64_t> {};

TEST_P(GgufAlignment, DataStartsAtTheAlignment) {
  const uint64_t alignment = GetParam();
  const auto bytes = make_sample_gguf(alignment);
  const GgufFile file = GgufFile::parse(bytes);
  EXPECT_EQ(file.alignment(), alignment);
  if (alignment == 32) {
    EXPECT_EQ(file.find("general.alignment"), nullptr);
  } else {
    ASSERT_NE(file.find("general.alignment"), nullptr);
    EXPECT_EQ(file.find("general.alignment")->type(), ValueType::u32);
  }
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const TensorInfo& t = file.tensors()[i];
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(static_cast<uint64_t>(t.data.data() - bytes.data()) % alignment, 0u);
    const auto want = pattern_bytes(t.n_bytes, static_cast<uint32_t>(i));
    EXPECT_EQ(std::memcmp(t.data.data(), want.data(), want.size()), 0);
  }
}

// 1 is a power of two and the peer accepts it (no padding at all).
INSTANTIATE_TEST_SUITE_P(Gguf, GgufAlignment, ::testing::Values(1, 8, 32, 64, 4096));

TEST(GgufRoundTrip, SettingAlignmentKeyChangesTheAlignment) {
  GgufWriter w;
  w.set("general.alignment", uint64_t{64});  // copied from another file as u64
  EXPECT_EQ(w.alignment(), 64u);
  EXPECT_EQ(w.find("general.alignment")->type(), ValueType::u32);
  EXPECT_THROW(w.set("general.alignment", uint32_t{48}), Error);
  EXPECT_THROW(w.set("general.alignment", int32_t{64}), Error);
  w.remove("general.alignment");
  EXPECT_EQ(w.alignment(), 32u);
  EXPECT_THROW(GgufWriter(0), Error);
  EXPECT_THROW(GgufWriter(24), Error);
}

TEST(GgufRoundTrip, FileIsRenamedIntoPlaceOnlyWhenComplete) {
  test::TempDir dir;
  const auto path = dir / "model.gguf";
  {
    GgufWriter w;
    test::add_sample_contents(w);
    w.begin(path);
    w.write_tensor_data(pattern_bytes(w.tensor_bytes(0), 0));
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::exists(path.string() + ".tmp"));
    EXPECT_THROW(w.finish(), Error);  // three tensors still missing
  }
  // Abandoned: no file and no temp file left behind.
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));

  GgufWriter w;
  test::add_sample_contents(w);
  w.begin(path);
  test::write_pattern_data(w);
  w.finish();
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  const GgufFile file = GgufFile::open(path);
  EXPECT_EQ(file.path(), path.string());
  EXPECT_EQ(file.n_splits(), 1u);
  EXPECT_EQ(file.file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(file.tensors().size(), 4u);
  // The file holds exactly what the in-memory writer makes.
  const auto on_disk = test::read_file_bytes(path);
  const auto in_memory = make_sample_gguf();
  ASSERT_EQ(on_disk.size(), in_memory.size());
  EXPECT_EQ(std::memcmp(on_disk.data(), in_memory.data(), on_disk.size()), 0);
}

TEST(GgufWriterErrors, WrongDataSizeAndOrder) {
  GgufWriter w;
  w.add_tensor("a", GgmlType::F32, {4});
  w.begin_in_memory();
  try {
    w.write_tensor_data(pattern_bytes(15, 0));
    FAIL() << "short data accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'a' got 15 bytes of data, expected 16"),
              std::string::npos)
        << e.what();
  }
  w.write_tensor_data(pattern_bytes(16, 0));
  EXPECT_THROW(w.write_tensor_data(pattern_bytes(16, 0)), Error);  // no tensor left
  EXPECT_THROW(w.set("late", 1), Error);                           // metadata is fixed
  EXPECT_THROW(w.add_tensor("late", GgmlType::F32, {1}), Error);
  EXPECT_THROW(w.finish(), Error);  // in-memory writes end with finish_in_memory()
  EXPECT_FALSE(w.finish_in_memory().empty());
}

TEST(GgufWriterErrors, BadTensorDeclarations) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("q", GgmlType::Q4_0, {31, 2}), Error);  // not whole blocks
  EXPECT_THROW(w.add_tensor("n", GgmlType::F32, {-1}), Error);
  EXPECT_THROW(w.add_tensor("d", GgmlType::F32, {1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(w.add_tensor("o", GgmlType::F32, {int64_t{1} << 62, 8}), Error);
  // The reader refuses this (rows overflow behind the zero), so must the writer.
  EXPECT_THROW(w.add_tensor("z", GgmlType::F32, {0, int64_t{1} << 40, int64_t{1} << 40}), Error);
  EXPECT_THROW(w.add_tensor("", GgmlType::F32, {1}), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'x'), GgmlType::F32, {1}), Error);
  EXPECT_THROW(w.add_tensor("t", static_cast<GgmlType>(4), {1}), Error);
  w.add_tensor("ok", GgmlType::Q4_K, {256, 2});
  EXPECT_THROW(w.add_tensor("ok", GgmlType::F32, {1}), Error);  // duplicate
  EXPECT_EQ(w.n_tensors(), 1u);
  EXPECT_EQ(w.tensor_bytes(0), 2u * 144u);
  EXPECT_THROW(w.tensor_bytes(1), Error);
  EXPECT_THROW(w.set("", 1), Error);
  Array broken = Array::of(ValueType::u8);
  broken.element_type = ValueType::f32;  // disagrees with its items
  EXPECT_THROW(w.set("broken", broken), Error);
}

// Copying a file's metadata sets one key at a time (cortiq quantize does); a
// crafted input holds a million keys in a few MiB, so set() must not scan
// all keys before it. 100k keys took half a minute with a linear search.
TEST(GgufWriter, SettingManyKeysIsNotQuadratic) {
  constexpr int kKeys = 100000;
  GgufWriter w;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kKeys; ++i) w.set("k." + std::to_string(i), uint8_t{1});
  w.set("k.5", uint8_t{2});  // replaces in place
  w.remove("k.7");
  w.set("k.7", uint8_t{3});  // back, now at the end
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  ASSERT_NE(w.find("k.5"), nullptr);
  EXPECT_EQ(w.find("k.5")->as_uint(), 2u);
  EXPECT_EQ(w.find("k.7")->as_uint(), 3u);
  EXPECT_EQ(w.find("k.99999")->as_uint(), 1u);
  EXPECT_EQ(w.find("k.100000"), nullptr);
  w.begin_in_memory();
  const std::vector<std::byte> bytes = w.finish_in_memory();
  const GgufFile file = GgufFile::parse(bytes);
  ASSERT_EQ(file.metadata().size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(file.metadata()[6].key, "k.6");
  EXPECT_EQ(file.metadata()[7].key, "k.8");
  EXPECT_EQ(file.metadata().back().key, "k.7");
}

TEST(GgufWriterErrors, BeginFailsForAnUnwritableDirectory) {
  GgufWriter w;
  EXPECT_THROW(w.begin("/nonexistent-dir/model.gguf"), Error);
}

}  // namespace
}  // namespace cortiq::gguf
