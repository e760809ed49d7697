// The tensor element types a GGUF file can name, with the ids the format
// uses on disk and each type's block geometry. Every type the format
// defines is listed, so any file can be read and inspected; which ones we
// can compute with is a separate question (can_dequantize / can_quantize).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace cortiq {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // upper case as users write it: "Q4_K", "F16"
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
  bool quantized;         // a block format with scales
  bool dequantizable;     // dequantize_row decodes it
  bool quantizable;       // quantize_row encodes it (reference quantizer)
};

// Traits of a type id read from a file; nullptr for ids the format does not
// define (including the removed ones, 4, 5 and 31-33, 36-38).
const GgmlTypeTraits* ggml_type_traits(uint32_t id);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);

std::string_view ggml_type_name(GgmlType type);
// Case-insensitive: "q4_k", "Q4_K", "f32".
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of n elements of the type; nullopt when n is not a whole number of
// blocks or the size overflows 64 bits.
std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n_elements);

// What the engine can compute with. Dequantization covers F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4, I8, I16,
// I32; quantization (reference, row by row) covers F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, MXFP4.
bool can_dequantize(GgmlType type);
bool can_quantize(GgmlType type);

// Throws cortiq::Error "unsupported weight type T in tensor NAME" unless
// the type can be dequantized.
void require_supported_weight_type(GgmlType type, std::string_view tensor_name);

}  // namespace cortiq
