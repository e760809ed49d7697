// The base layer: error messages, logging levels, string helpers, mmap.
#include <fstream>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/mapped_file.hpp"
#include "base/strings.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

TEST(Base, FormatErrorNamesFileFieldAndOffset) {
  const FormatError e("model.gguf", "tensor 3 (blk.0.attn_q.weight) type", 1234,
                      "unknown type id 99");
  EXPECT_STREQ(
      e.what(),
      "model.gguf: tensor 3 (blk.0.attn_q.weight) type at offset 1234: unknown type id 99");
  EXPECT_EQ(e.file(), "model.gguf");
  EXPECT_EQ(e.offset(), 1234u);
}

TEST(Base, LogLevelsParse) {
  LogLevel level = LogLevel::info;
  EXPECT_TRUE(parse_log_level("debug", level));
  EXPECT_EQ(level, LogLevel::debug);
  EXPECT_TRUE(parse_log_level("warning", level));
  EXPECT_EQ(level, LogLevel::warn);
  EXPECT_FALSE(parse_log_level("loud", level));
  const LogLevel saved = log_level();
  set_log_level(LogLevel::error);
  EXPECT_EQ(log_level(), LogLevel::error);
  set_log_level(saved);
}

TEST(Base, StringHelpers) {
  EXPECT_EQ(strfmt("%d-%s", 7, "x"), "7-x");
  EXPECT_EQ(with_commas(1234567), "1,234,567");
  EXPECT_EQ(with_commas(999), "999");
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(3 * 1024 * 1024 / 2), "1.50 MiB");
  int64_t v = 0;
  EXPECT_TRUE(parse_int64("-42", v));
  EXPECT_EQ(v, -42);
  EXPECT_FALSE(parse_int64("12x", v));
  EXPECT_FALSE(parse_int64("99999999999999999999", v));
  const auto parts = split("a,,b", ',');
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2], "b");
}

TEST(Base, MappedFileReadsAndReportsErrors) {
  test::TempDir dir;
  const auto path = dir / "data.bin";
  test::write_file_bytes(path, {1, 2, 3, 4, 5});
  MappedFile f = MappedFile::open(path);
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(static_cast<int>(f.bytes()[4]), 5);
  MappedFile moved = std::move(f);
  EXPECT_EQ(moved.size(), 5u);
  EXPECT_EQ(f.size(), 0u);

  test::write_file_bytes(dir / "empty.bin", {});
  EXPECT_EQ(MappedFile::open(dir / "empty.bin").size(), 0u);
  try {
    MappedFile::open(dir / "missing.bin");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.bin"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
  EXPECT_THROW(MappedFile::open(dir.path()), Error) << "a directory is not a regular file";
}

}  // namespace
}  // namespace cortiq
