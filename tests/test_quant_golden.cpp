// Bit-exactness against the peer (llama.cpp's ggml): dequantize_row must
// give the very floats ggml's to_float gives, and quantize_row the very bytes
// ggml_quantize_chunk writes with no importance matrix. The goldens in
// tests/golden/quant/ come from tools/peer/make-quant-goldens.sh, whose
// generator documents the file layout.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/fp16.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

enum class SectionKind : uint32_t { kQuantize = 1, kDequantize = 2 };

struct GoldenSection {
  SectionKind kind;
  std::string label;
  std::vector<float> floats;     // quantize: input; dequantize: expected
  std::vector<std::byte> bytes;  // quantize: expected; dequantize: input
};

struct GoldenFile {
  uint32_t type_id = 0;
  std::vector<GoldenSection> sections;
};

// Sequential little-endian reads that fail loudly on a short file.
class Cursor {
 public:
  explicit Cursor(std::vector<uint8_t> data) : data_(std::move(data)) {}
  void read(void* out, size_t n) {
    if (n > data_.size() - pos_) throw std::runtime_error("golden file truncated");
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
  }
  uint32_t u32() {
    uint32_t v;
    read(&v, sizeof(v));
    return v;
  }
  bool at_end() const { return pos_ == data_.size(); }

 private:
  std::vector<uint8_t> data_;
  size_t pos_ = 0;
};

GoldenFile read_golden(const std::filesystem::path& path) {
  Cursor in(test::read_file_bytes(path));
  char magic[8];
  in.read(magic, sizeof(magic));
  if (std::memcmp(magic, "CQGOLD1", 8) != 0) throw std::runtime_error("bad magic");
  GoldenFile file;
  file.type_id = in.u32();
  const uint32_t n_sections = in.u32();
  for (uint32_t s = 0; s < n_sections; ++s) {
    GoldenSection section;
    section.kind = static_cast<SectionKind>(in.u32());
    const uint32_t n_elements = in.u32();
    const uint32_t n_bytes = in.u32();
    char label[24];
    in.read(label, sizeof(label));
    section.label.assign(label, std::find(label, label + sizeof(label), '\0'));
    section.floats.resize(n_elements);
    section.bytes.resize(n_bytes);
    if (section.kind == SectionKind::kQuantize) {
      in.read(section.floats.data(), 4 * size_t{n_elements});
      in.read(section.bytes.data(), n_bytes);
    } else {
      in.read(section.bytes.data(), n_bytes);
      in.read(section.floats.data(), 4 * size_t{n_elements});
    }
    file.sections.push_back(std::move(section));
  }
  if (!in.at_end()) throw std::runtime_error("trailing bytes in golden file");
  return file;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Every type we dequantize has a golden file.
const GgmlType kGoldenTypes[] = {
    GgmlType::F32,   GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,   GgmlType::Q4_1,
    GgmlType::Q5_0,  GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,
    GgmlType::Q4_K,  GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
    GgmlType::MXFP4, GgmlType::I8,   GgmlType::I16,  GgmlType::I32,
};

// The types we quantize: their goldens also hold the peer's quantizer output.
const GgmlType kQuantizedGoldenTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,   GgmlType::Q4_1,
    GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::MXFP4,
};

std::filesystem::path golden_path(GgmlType type) {
  // ggml names its types in lower case except the K suffix ("q4_K").
  std::string name = lower(ggml_type_name(type));
  if (name.ends_with("_k")) name.back() = 'K';
  return test::golden_dir() / "quant" / (name + ".qgold");
}

// "" when equal bit for bit, else where and how they first differ.
std::string first_float_difference(std::span<const float> expected, std::span<const float> actual) {
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto e = std::bit_cast<uint32_t>(expected[i]);
    const auto a = std::bit_cast<uint32_t>(actual[i]);
    if (e != a) {
      std::ostringstream out;
      out.precision(9);
      out << "first difference at element " << i << ": expected " << expected[i] << " (0x"
          << std::hex << e << "), got " << std::dec << actual[i] << " (0x" << std::hex << a << ")";
      return out.str();
    }
  }
  return "";
}

std::string first_byte_difference(std::span<const std::byte> expected,
                                  std::span<const std::byte> actual, size_t block_bytes) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != actual[i]) {
      std::ostringstream out;
      out << "first difference at byte " << i << " (block " << i / block_bytes << ", offset "
          << i % block_bytes << "): expected 0x" << std::hex << std::to_integer<int>(expected[i])
          << ", got 0x" << std::to_integer<int>(actual[i]);
      return out.str();
    }
  }
  return "";
}

GoldenFile load_golden(GgmlType type) {
  GoldenFile file = read_golden(golden_path(type));
  EXPECT_EQ(file.type_id, static_cast<uint32_t>(type)) << golden_path(type);
  return file;
}

std::string type_param_name(const testing::TestParamInfo<GgmlType>& info) {
  return std::string(ggml_type_name(info.param));
}

class QuantGoldenDequantizeTest : public testing::TestWithParam<GgmlType> {};

TEST_P(QuantGoldenDequantizeTest, MatchesPeerBitForBit) {
  const GgmlType type = GetParam();
  int checked = 0;
  for (const GoldenSection& s : load_golden(type).sections) {
    if (s.kind != SectionKind::kDequantize) continue;
    std::vector<float> actual(s.floats.size());
    dequantize_row(type, s.bytes, actual);
    EXPECT_EQ(first_float_difference(s.floats, actual), "")
        << ggml_type_name(type) << " section '" << s.label << "'";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Quant, QuantGoldenDequantizeTest, testing::ValuesIn(kGoldenTypes),
                         type_param_name);

class QuantGoldenQuantizeTest : public testing::TestWithParam<GgmlType> {};

TEST_P(QuantGoldenQuantizeTest, MatchesPeerByteForByte) {
  const GgmlType type = GetParam();
  int checked = 0;
  for (const GoldenSection& s : load_golden(type).sections) {
    if (s.kind != SectionKind::kQuantize) continue;
    std::vector<std::byte> actual(s.bytes.size());
    quantize_row(type, s.floats, actual);
    EXPECT_EQ(first_byte_difference(s.bytes, actual, ggml_type_traits(type).block_bytes), "")
        << ggml_type_name(type) << " section '" << s.label << "'";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Quant, QuantGoldenQuantizeTest, testing::ValuesIn(kQuantizedGoldenTypes),
                         type_param_name);

// The activation quantizers (the left operand of every integer matmul)
// against ggml-cpu's from_float, the code the peer's CPU matmuls run on
// their inputs: Q8_0 (fp16 d, codes), Q8_1 (fp16 d, fp16 s, codes: what
// Q4_1/Q5_1 weights meet) and Q8_K (float d, codes, sums of 16), at the
// scalar and the dispatched SIMD level.
std::vector<std::byte> as_ggml_blocks(GgmlType type, std::span<const float> x,
                                      decltype(&kernels::scalar::quantize_q8_0) q8_0,
                                      decltype(&kernels::scalar::quantize_q8_k) q8_k) {
  std::vector<std::byte> out;
  const auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  };
  const auto n = static_cast<int64_t>(x.size());
  if (type == GgmlType::Q8_K) {
    std::vector<kernels::Q8BlockK> blocks(x.size() / 256);
    q8_k(x.data(), blocks.data(), n);
    for (const auto& b : blocks) {
      put(&b.d, 4);
      put(b.qs, sizeof(b.qs));
      put(b.bsums, sizeof(b.bsums));
    }
    return out;
  }
  std::vector<kernels::Q8Block32> blocks(x.size() / 32);
  q8_0(x.data(), blocks.data(), n);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const uint16_t d = fp32_to_fp16(blocks[i].d);
    put(&d, 2);
    if (type == GgmlType::Q8_1) {
      const uint16_t sum = fp32_to_fp16(kernels::q8_1_block_sum(x.data() + 32 * i, blocks[i].sum));
      put(&sum, 2);
    }
    put(blocks[i].qs, sizeof(blocks[i].qs));
  }
  return out;
}

TEST(QuantGolden, ActivationQuantizersWriteTheBytesOfGgmlCpu) {
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
    std::string name = lower(ggml_type_name(type));
    if (name.ends_with("_k")) name.back() = 'K';
    const GoldenFile file = read_golden(test::golden_dir() / "quant" / (name + ".act.qgold"));
    EXPECT_EQ(file.type_id, static_cast<uint32_t>(type));
    ASSERT_GE(file.sections.size(), 9u) << name;
    for (const GoldenSection& s : file.sections) {
      const size_t block_bytes = ggml_type_traits(type).block_bytes;
      EXPECT_EQ(first_byte_difference(s.bytes,
                                      as_ggml_blocks(type, s.floats, kernels::scalar::quantize_q8_0,
                                                     kernels::scalar::quantize_q8_k),
                                      block_bytes),
                "")
          << name << " (scalar) section '" << s.label << "'";
      EXPECT_EQ(first_byte_difference(
                    s.bytes,
                    as_ggml_blocks(type, s.floats, kernels::quantize_q8_0, kernels::quantize_q8_k),
                    block_bytes),
                "")
          << name << " (dispatched) section '" << s.label << "'";
    }
  }
}

// The goldens cover everything the engine claims to support.
TEST(QuantGolden, CoverEverySupportedType) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeTraits* traits = ggml_type_traits(id);
    if (traits == nullptr || !(can_dequantize(traits->type) || can_quantize(traits->type)))
      continue;
    EXPECT_TRUE(std::filesystem::exists(golden_path(traits->type)))
        << "no golden for " << traits->name << " at " << golden_path(traits->type);
    EXPECT_TRUE(std::ranges::find(kGoldenTypes, traits->type) != std::end(kGoldenTypes))
        << traits->name << " is not checked against its golden";
    if (can_quantize(traits->type)) {
      EXPECT_TRUE(std::ranges::find(kQuantizedGoldenTypes, traits->type) !=
                  std::end(kQuantizedGoldenTypes))
          << traits->name << " quantizer is not checked against its golden";
    }
  }
}

}  // namespace
}  // namespace cortiq
