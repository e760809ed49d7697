#include "quant/ggml_type.hpp"

#include <array>
#include <cctype>
#include <string>

#include "base/error.hpp"

namespace cortiq {

namespace {

// Block geometry as the GGUF format defines it (ggml's type traits), and
// what this engine can compute with. Columns: type, name, elements per
// block, bytes per block, quantized, dequantizable, quantizable.
constexpr GgmlTypeTraits kTypes[] = {
    {GgmlType::F32, "F32", 1, 4, false, true, true},
    {GgmlType::F16, "F16", 1, 2, false, true, true},
    {GgmlType::Q4_0, "Q4_0", 32, 18, true, true, true},
    {GgmlType::Q4_1, "Q4_1", 32, 20, true, true, true},
    {GgmlType::Q5_0, "Q5_0", 32, 22, true, true, true},
    {GgmlType::Q5_1, "Q5_1", 32, 24, true, true, true},
    {GgmlType::Q8_0, "Q8_0", 32, 34, true, true, true},
    {GgmlType::Q8_1, "Q8_1", 32, 36, true, false, false},
    {GgmlType::Q2_K, "Q2_K", 256, 84, true, true, true},
    {GgmlType::Q3_K, "Q3_K", 256, 110, true, true, true},
    {GgmlType::Q4_K, "Q4_K", 256, 144, true, true, true},
    {GgmlType::Q5_K, "Q5_K", 256, 176, true, true, true},
    {GgmlType::Q6_K, "Q6_K", 256, 210, true, true, true},
    {GgmlType::Q8_K, "Q8_K", 256, 292, true, false, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, true, false, false},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, true, false, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, true, false, false},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50, true, false, false},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, true, true, true},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110, true, false, false},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, true, false, false},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, true, true, false},
    {GgmlType::I8, "I8", 1, 1, false, true, false},
    {GgmlType::I16, "I16", 1, 2, false, true, false},
    {GgmlType::I32, "I32", 1, 4, false, true, false},
    {GgmlType::I64, "I64", 1, 8, false, false, false},
    {GgmlType::F64, "F64", 1, 8, false, false, false},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56, true, false, false},
    {GgmlType::BF16, "BF16", 1, 2, false, true, true},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54, true, false, false},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, true, false, false},
    {GgmlType::MXFP4, "MXFP4", 32, 17, true, true, true},
    {GgmlType::NVFP4, "NVFP4", 64, 36, true, false, false},
    {GgmlType::Q1_0, "Q1_0", 128, 18, true, false, false},
    {GgmlType::Q2_0, "Q2_0", 64, 18, true, false, false},
};

constexpr uint32_t kMaxId = 42;

// id -> index into kTypes, -1 for ids the format does not define.
constexpr std::array<int8_t, kMaxId + 1> make_index() {
  std::array<int8_t, kMaxId + 1> index{};
  for (auto& i : index) i = -1;
  for (size_t i = 0; i < std::size(kTypes); ++i)
    index[static_cast<uint32_t>(kTypes[i].type)] = static_cast<int8_t>(i);
  return index;
}
constexpr auto kIndex = make_index();

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t id) {
  if (id > kMaxId || kIndex[id] < 0) return nullptr;
  return &kTypes[kIndex[id]];
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  if (t == nullptr)
    throw Error("invalid weight type id " + std::to_string(static_cast<uint32_t>(type)));
  return *t;
}

std::string_view ggml_type_name(GgmlType type) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  return t == nullptr ? std::string_view("?") : t->name;
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (equal_ignoring_case(t.name, name)) return t.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n_elements) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  if (t == nullptr || n_elements % t->block_elems != 0) return std::nullopt;
  const uint64_t blocks = n_elements / t->block_elems;
  if (blocks > UINT64_MAX / t->block_bytes) return std::nullopt;
  return blocks * t->block_bytes;
}

bool can_dequantize(GgmlType type) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  return t != nullptr && t->dequantizable;
}

bool can_quantize(GgmlType type) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  return t != nullptr && t->quantizable;
}

void require_supported_weight_type(GgmlType type, std::string_view tensor_name) {
  if (can_dequantize(type)) return;
  throw Error("unsupported weight type " + std::string(ggml_type_name(type)) + " in tensor " +
              std::string(tensor_name));
}

}  // namespace cortiq
