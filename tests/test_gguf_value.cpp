#include <gtest/gtest.h>

#include <limits>

#include "formats/gguf/gguf_split.hpp"
#include "formats/gguf/gguf_value.hpp"

namespace cortiq::gguf {
namespace {

TEST(GgufValue, TypeFollowsTheStoredAlternative) {
  EXPECT_EQ(Value(uint8_t{1}).type(), ValueType::u8);
  EXPECT_EQ(Value(int16_t{1}).type(), ValueType::i16);
  EXPECT_EQ(Value(1.0f).type(), ValueType::f32);
  EXPECT_EQ(Value(1.0).type(), ValueType::f64);
  EXPECT_EQ(Value(true).type(), ValueType::boolean);
  EXPECT_EQ(Value("text").type(), ValueType::string);
  EXPECT_EQ(Value(Array::of(ValueType::i64)).type(), ValueType::array);
  EXPECT_EQ(Value(uint64_t{1}).type(), ValueType::u64);
}

TEST(GgufValue, IntegerAccessorsConvertOnlyWithoutLoss) {
  EXPECT_EQ(Value(uint16_t{7}).as_uint(), 7u);
  EXPECT_EQ(Value(int32_t{7}).as_uint(), 7u);
  EXPECT_EQ(Value(int32_t{-7}).as_uint(), std::nullopt);
  EXPECT_EQ(Value(int32_t{-7}).as_int(), -7);
  EXPECT_EQ(Value(std::numeric_limits<uint64_t>::max()).as_int(), std::nullopt);
  EXPECT_EQ(Value(uint64_t{1} << 62).as_int(), int64_t{1} << 62);
  EXPECT_EQ(Value(1.0f).as_uint(), std::nullopt);
  EXPECT_EQ(Value(true).as_uint(), std::nullopt);
  EXPECT_EQ(Value("5").as_int(), std::nullopt);
}

TEST(GgufValue, DoubleAndBoolAccessors) {
  EXPECT_EQ(Value(0.5f).as_double(), 0.5);
  EXPECT_EQ(Value(0.25).as_double(), 0.25);
  EXPECT_EQ(Value(uint32_t{10000}).as_double(), 10000.0);  // exact integers convert
  EXPECT_EQ(Value((uint64_t{1} << 53) + 1).as_double(), std::nullopt);
  EXPECT_EQ(Value(true).as_bool(), true);
  EXPECT_EQ(Value(uint8_t{1}).as_bool(), std::nullopt);
  EXPECT_EQ(*Value("abc").as_string(), "abc");
  EXPECT_EQ(Value(1).as_string(), nullptr);
}

TEST(GgufValue, ArrayOfMakesTheMatchingVector) {
  for (uint32_t id = 0; id <= 12; ++id) {
    const Array a = Array::of(static_cast<ValueType>(id));
    EXPECT_EQ(a.items.index(), id);
    EXPECT_EQ(a.size(), 0u);
  }
  Array a = Array::of(ValueType::string);
  ASSERT_NE(a.as<std::string>(), nullptr);
  EXPECT_EQ(a.as<float>(), nullptr);
}

TEST(GgufValue, TypeNamesAndValidity) {
  EXPECT_STREQ(value_type_name(ValueType::u32), "u32");
  EXPECT_STREQ(value_type_name(ValueType::string), "string");
  EXPECT_STREQ(value_type_name(ValueType::array), "array");
  EXPECT_STREQ(value_type_name(static_cast<ValueType>(13)), "?");
  EXPECT_TRUE(is_valid_value_type(12));
  EXPECT_FALSE(is_valid_value_type(13));
  EXPECT_FALSE(is_valid_value_type(0xFFFFFFFFu));
}

TEST(GgufValue, DisplayStrings) {
  EXPECT_EQ(Value(int8_t{-3}).to_display_string(), "-3");
  EXPECT_EQ(Value(uint8_t{200}).to_display_string(), "200");
  EXPECT_EQ(Value(true).to_display_string(), "true");
  EXPECT_EQ(Value(0.5f).to_display_string(), "0.5");
  EXPECT_EQ(Value(1e-5f).to_display_string(), "1e-05");  // shortest form that reads back
  EXPECT_EQ(Value(0.1).to_display_string(), "0.1");
  EXPECT_EQ(Value(1.0f / 3.0f).to_display_string(), "0.33333334");
  EXPECT_EQ(Value("a \"b\"\n").to_display_string(), "\"a \\\"b\\\"\\n\"");

  Array numbers = Array::of(ValueType::u32);
  std::get<std::vector<uint32_t>>(numbers.items) = {1, 2, 3, 4, 5};
  EXPECT_EQ(Value(numbers).to_display_string(3), "[1, 2, 3, ... (5 items)]");
  EXPECT_EQ(Value(numbers).to_display_string(), "[1, 2, 3, 4, 5]");
  EXPECT_EQ(Value(numbers).to_display_string(0), "[... (5 items)]");

  Array words = Array::of(ValueType::string);
  std::get<std::vector<std::string>>(words.items) = {"x", "y"};
  Array nested = Array::of(ValueType::array);
  std::get<std::vector<Array>>(nested.items) = {words, Array::of(ValueType::f32)};
  EXPECT_EQ(Value(nested).to_display_string(), "[[\"x\", \"y\"], []]");
}

TEST(GgufSplitPath, FormatsAndParsesThePeersNames) {
  EXPECT_EQ(split_path("/m/model", 2, 3), "/m/model-00002-of-00003.gguf");
  const auto parsed = parse_split_path("/m/model-q4-00001-of-00012.gguf");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->prefix, "/m/model-q4");
  EXPECT_EQ(parsed->number, 1u);
  EXPECT_EQ(parsed->count, 12u);
  EXPECT_FALSE(parse_split_path("model.gguf").has_value());
  EXPECT_FALSE(parse_split_path("model-1-of-3.gguf").has_value());  // not zero-padded
  EXPECT_FALSE(parse_split_path("model-00001-of-00003.bin").has_value());
}

}  // namespace
}  // namespace cortiq::gguf
