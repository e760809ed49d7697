// make_quant_goldens: writes the quantization goldens of tests/golden/quant/
// from the peer (llama.cpp's ggml-base). Built and run by
// make-quant-goldens.sh; never part of the CMake build, so the tests do not
// need the peer.
//
// For each type, one file <type>.qgold (type name in lower case) holding
// sections of two kinds:
//   quantize   - an f32 input row and the bytes ggml_quantize_chunk() writes
//                for it with no importance matrix;
//   dequantize - a row of encoded bytes and the floats the type's to_float
//                decodes it to. The bytes are the quantizer's output above
//                and random blocks (fp16 / float fields forced finite so NaN
//                payloads do not enter). ggml has no to_float for I8/I16/I32;
//                their expected floats are the plain C conversion.
//
// File layout, all little-endian:
//   header:  char magic[8] = "CQGOLD1\0"; u32 ggml type id; u32 section count
//   section: u32 kind (1 = quantize, 2 = dequantize); u32 n_elements;
//            u32 n_bytes; char label[24] (NUL-padded);
//            kind 1: f32 input[n_elements], then u8 expected[n_bytes]
//            kind 2: u8 input[n_bytes], then f32 expected[n_elements]
//
// Inputs are deterministic: SplitMix64 (Steele, Lea, Flood 2014; the
// generator of java.util.SplittableRandom) seeded per row, with
// Box-Muller for normal values.
//
//   make_quant_goldens OUT_DIR
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"

namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

constexpr int kRowElems = 512;

struct Row {
  std::string label;
  std::vector<float> values;
};

std::vector<float> normal_row(SplitMix64& rng, double scale) {
  std::vector<float> v(kRowElems);
  for (float& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

// Blocks of 32 with different characters: the per-block extremes and the
// super-block scale quantization both get exercised.
std::vector<float> mixed_row(SplitMix64& rng) {
  std::vector<float> v(kRowElems);
  for (int b = 0; b < kRowElems / 32; ++b) {
    float* x = v.data() + 32 * b;
    const double scale = std::exp2(rng.uniform() * 12.0 - 6.0);
    for (int j = 0; j < 32; ++j) {
      switch (b % 8) {
        case 0:
          x[j] = 0.0f;
          break;  // zero block
        case 1:
          x[j] = static_cast<float>(0.5 + rng.uniform());
          break;  // all positive
        case 2:
          x[j] = static_cast<float>(-0.5 - rng.uniform());
          break;  // all negative
        case 3:
          x[j] = (j == 5 || j == 20) ? static_cast<float>(rng.normal()) : 0.0f;
          break;  // sparse
        case 4:
          x[j] = static_cast<float>(static_cast<int>(rng.uniform() * 9.0) - 4) * 0.25f;
          break;  // ties
        default:
          x[j] = static_cast<float>(rng.normal() * scale);
          break;
      }
    }
  }
  return v;
}

std::vector<Row> input_rows() {
  std::vector<Row> rows;
  SplitMix64 rng(0x51A7F00Dull);
  rows.push_back({"normal", normal_row(rng, 1.0)});
  rows.push_back({"zeros", std::vector<float>(kRowElems, 0.0f)});
  rows.push_back({"constant", std::vector<float>(kRowElems, 0.3125f)});
  rows.push_back({"constant-negative", std::vector<float>(kRowElems, -1.7f)});
  {
    std::vector<float> v = normal_row(rng, 1.0);
    for (int i = 7; i < kRowElems; i += 61) v[i] *= 40.0f;
    rows.push_back({"outliers", v});
  }
  {
    // 1e-5: fp16 scales go subnormal; 1e-9: scales round to zero; 1e-20:
    // below the K-quants' all-zero threshold and x^2 underflows.
    std::vector<float> v = normal_row(rng, 1e-5);
    for (int i = 256; i < 384; ++i) v[i] = static_cast<float>(rng.normal() * 1e-9);
    for (int i = 384; i < kRowElems; ++i) v[i] = static_cast<float>(rng.normal() * 1e-20);
    rows.push_back({"tiny", v});
  }
  rows.push_back({"large", normal_row(rng, 3000.0)});
  rows.push_back({"mixed", mixed_row(rng)});
  return rows;
}

struct Writer {
  std::vector<uint8_t> out;
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void section(uint32_t kind, uint32_t n_elements, uint32_t n_bytes, const std::string& label) {
    u32(kind);
    u32(n_elements);
    u32(n_bytes);
    char name[24] = {};
    std::strncpy(name, label.c_str(), sizeof(name) - 1);
    bytes(name, sizeof(name));
  }
};

void to_float(ggml_type type, const std::vector<uint8_t>& src, std::vector<float>& dst) {
  const size_t n = dst.size();
  switch (type) {
    case GGML_TYPE_F32:
      std::memcpy(dst.data(), src.data(), 4 * n);
      return;
    case GGML_TYPE_I8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<int8_t>(src[i]));
      return;
    case GGML_TYPE_I16:
      for (size_t i = 0; i < n; ++i) {
        int16_t v;
        std::memcpy(&v, src.data() + 2 * i, 2);
        dst[i] = static_cast<float>(v);
      }
      return;
    case GGML_TYPE_I32:
      for (size_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, src.data() + 4 * i, 4);
        dst[i] = static_cast<float>(v);
      }
      return;
    default:
      ggml_get_type_traits(type)->to_float(src.data(), dst.data(), static_cast<int64_t>(n));
  }
}

// A random finite fp16 in roughly [-256, 256], subnormals included.
uint16_t random_half(SplitMix64& rng) {
  const uint64_t r = rng.next();
  const uint16_t sign = static_cast<uint16_t>((r & 1) << 15);
  const uint16_t exponent = static_cast<uint16_t>((r >> 1) % 23);
  const uint16_t mantissa = static_cast<uint16_t>((r >> 8) & 0x3FF);
  return static_cast<uint16_t>(sign | (exponent << 10) | mantissa);
}

// Byte offsets of the fp16 fields within one block.
std::vector<size_t> half_fields(ggml_type type) {
  switch (type) {
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_IQ4_XS:
      return {0};
    case GGML_TYPE_Q3_K:
      return {108};
    case GGML_TYPE_Q6_K:
      return {208};
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
      return {0, 2};
    case GGML_TYPE_Q2_K:
      return {80, 82};
    default:
      return {};
  }
}

std::vector<uint8_t> random_row_bytes(ggml_type type, SplitMix64& rng, size_t n_bytes) {
  std::vector<uint8_t> b(n_bytes);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng.next());
  auto put_half = [&](size_t at, uint16_t h) { std::memcpy(b.data() + at, &h, 2); };
  if (type == GGML_TYPE_F16) {
    for (size_t at = 0; at < n_bytes; at += 2) {
      uint16_t h;
      std::memcpy(&h, b.data() + at, 2);
      if ((h & 0x7C00) == 0x7C00) put_half(at, static_cast<uint16_t>(h & ~0x0400));  // no inf/NaN
    }
  } else if (type == GGML_TYPE_BF16) {
    for (size_t at = 0; at < n_bytes; at += 2) {
      uint16_t h;
      std::memcpy(&h, b.data() + at, 2);
      if ((h & 0x7F80) == 0x7F80) put_half(at, static_cast<uint16_t>(h & ~0x0080));
    }
  } else if (type == GGML_TYPE_F32) {
    for (size_t at = 0; at < n_bytes; at += 4) {
      uint32_t w;
      std::memcpy(&w, b.data() + at, 4);
      if ((w & 0x7F800000u) == 0x7F800000u) w &= ~0x00800000u;
      std::memcpy(b.data() + at, &w, 4);
    }
  } else {
    const size_t block = ggml_type_size(type);
    for (size_t at = 0; at < n_bytes; at += block) {
      for (size_t field : half_fields(type)) put_half(at + field, random_half(rng));
    }
  }
  return b;
}

bool write_file(const std::string& path, const std::vector<uint8_t>& data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

struct TypeSpec {
  ggml_type type;
  bool quantize;  // the engine quantizes it: write quantize sections
  int random_rows;
};

}  // namespace

// Activation quantizers: what ggml-cpu's from_float writes for each row
// (the code the peer's CPU matmuls run on their inputs, SIMD included, as
// built here): <type>.act.qgold for Q8_0, Q8_1 and Q8_K, quantize sections
// only. Besides the rows above, one of exact ties (x / d = k + 1/2), where
// rounding half to even and half away from zero part.
size_t write_activation_goldens(const std::string& out_dir, std::vector<Row> rows) {
  std::vector<float> ties(kRowElems);
  for (int i = 0; i < kRowElems; ++i) {
    ties[i] = i % 32 == 0 ? 127.0f : static_cast<float>(i % 100 - 50) + 0.5f;
  }
  rows.push_back({"ties", ties});
  ggml_cpu_init();
  size_t total = 0;
  for (const ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K}) {
    const size_t row_bytes = ggml_row_size(type, kRowElems);
    Writer w;
    w.bytes("CQGOLD1", 8);
    w.u32(static_cast<uint32_t>(type));
    w.u32(static_cast<uint32_t>(rows.size()));
    for (const Row& row : rows) {
      std::vector<uint8_t> bytes(row_bytes);
      ggml_get_type_traits_cpu(type)->from_float(row.values.data(), bytes.data(), kRowElems);
      w.section(1, kRowElems, static_cast<uint32_t>(row_bytes), row.label);
      w.bytes(row.values.data(), 4 * kRowElems);
      w.bytes(bytes.data(), row_bytes);
    }
    const std::string path = out_dir + "/" + ggml_type_name(type) + ".act.qgold";
    if (!write_file(path, w.out)) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      std::exit(1);
    }
    std::printf("%-8s %3zu sections %7zu bytes  %s\n", ggml_type_name(type), rows.size(),
                w.out.size(), path.c_str());
    total += w.out.size();
  }
  return total;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_quant_goldens OUT_DIR\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  const TypeSpec specs[] = {
      {GGML_TYPE_F32, true, 2},     {GGML_TYPE_F16, true, 2},    {GGML_TYPE_BF16, true, 2},
      {GGML_TYPE_Q4_0, true, 4},    {GGML_TYPE_Q4_1, true, 4},   {GGML_TYPE_Q5_0, true, 4},
      {GGML_TYPE_Q5_1, true, 4},    {GGML_TYPE_Q8_0, true, 4},   {GGML_TYPE_Q2_K, true, 4},
      {GGML_TYPE_Q3_K, true, 4},    {GGML_TYPE_Q4_K, true, 4},   {GGML_TYPE_Q5_K, true, 4},
      {GGML_TYPE_Q6_K, true, 4},    {GGML_TYPE_IQ4_NL, true, 4}, {GGML_TYPE_MXFP4, true, 4},
      {GGML_TYPE_IQ4_XS, false, 4}, {GGML_TYPE_I8, false, 2},    {GGML_TYPE_I16, false, 2},
      {GGML_TYPE_I32, false, 2},
  };
  const std::vector<Row> rows = input_rows();
  size_t total = 0;
  for (const TypeSpec& spec : specs) {
    const size_t row_bytes = ggml_row_size(spec.type, kRowElems);
    Writer w;
    w.bytes("CQGOLD1", 8);
    w.u32(static_cast<uint32_t>(spec.type));
    const bool has_quantizer =
        spec.type != GGML_TYPE_I8 && spec.type != GGML_TYPE_I16 && spec.type != GGML_TYPE_I32;
    const uint32_t n_sections = static_cast<uint32_t>(
        (spec.quantize ? rows.size() : 0) + (has_quantizer ? rows.size() : 0) + spec.random_rows);
    w.u32(n_sections);

    std::vector<std::vector<uint8_t>> encoded;
    if (has_quantizer) {
      for (const Row& row : rows) {
        std::vector<uint8_t> bytes(row_bytes);
        ggml_quantize_chunk(spec.type, row.values.data(), bytes.data(), 0, 1, kRowElems, nullptr);
        encoded.push_back(bytes);
      }
    }
    if (spec.quantize) {
      for (size_t r = 0; r < rows.size(); ++r) {
        w.section(1, kRowElems, static_cast<uint32_t>(row_bytes), rows[r].label);
        w.bytes(rows[r].values.data(), 4 * kRowElems);
        w.bytes(encoded[r].data(), row_bytes);
      }
    }
    std::vector<float> decoded(kRowElems);
    auto dequantize_section = [&](const std::vector<uint8_t>& bytes, const std::string& label) {
      to_float(spec.type, bytes, decoded);
      w.section(2, kRowElems, static_cast<uint32_t>(row_bytes), label);
      w.bytes(bytes.data(), row_bytes);
      w.bytes(decoded.data(), 4 * kRowElems);
    };
    for (size_t r = 0; r < encoded.size(); ++r) dequantize_section(encoded[r], rows[r].label);
    SplitMix64 rng(0xB10C5EEDull + static_cast<uint64_t>(spec.type));
    for (int r = 0; r < spec.random_rows; ++r) {
      dequantize_section(random_row_bytes(spec.type, rng, row_bytes),
                         "random-" + std::to_string(r));
    }

    const std::string path = out_dir + "/" + ggml_type_name(spec.type) + ".qgold";
    if (!write_file(path, w.out)) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    total += w.out.size();
    std::printf("%-8s %3u sections %7zu bytes  %s\n", ggml_type_name(spec.type), n_sections,
                w.out.size(), path.c_str());
  }
  total += write_activation_goldens(out_dir, rows);
  std::printf("total %zu bytes\n", total);
  return 0;
}
