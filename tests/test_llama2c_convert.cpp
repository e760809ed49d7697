// llama2.c checkpoints: reading both layouts, refusing bad files with a
// FormatError that names the field, and the GGUF that `cortiq convert
// llama2c` writes (names, shapes, types, values, metadata, CLI exit codes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "base/error.hpp"
#include "convert/llama2c/llama2c_checkpoint.hpp"
#include "convert/llama2c/llama2c_to_gguf.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq {
namespace {

using llama2c::Checkpoint;
using llama2c::Weight;

struct TinyConfig {
  int32_t dim = 32, hidden_dim = 48, n_layers = 2, n_heads = 4, n_kv_heads = 2, vocab_size = 40,
          seq_len = 8;
  bool shared = true;
  int version = 0;  // 0 legacy, 1 "ak42" v1
};

// A synthetic checkpoint with seeded values; `values` holds each array's
// floats (all layers) so that tests can compare.
struct TinyCheckpoint {
  std::vector<uint8_t> bytes;
  std::map<Weight, std::vector<float>> values;
};

bool per_layer(Weight w) {
  switch (w) {
    case Weight::token_embedding:
    case Weight::rms_final:
    case Weight::freq_cis_real:
    case Weight::freq_cis_imag:
    case Weight::wcls:
      return false;
    default:
      return true;
  }
}

void put_i32(std::vector<uint8_t>& out, int32_t v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  out.insert(out.end(), b, b + 4);
}

void put_f32(std::vector<uint8_t>& out, float v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  out.insert(out.end(), b, b + 4);
}

TinyCheckpoint make_checkpoint(const TinyConfig& c, uint64_t seed = 1) {
  const int64_t d = c.dim, h = c.hidden_dim, L = c.n_layers, V = c.vocab_size;
  const int64_t kv = c.n_kv_heads * (c.dim / c.n_heads), half = c.dim / c.n_heads / 2;
  TinyCheckpoint t;
  test::SplitMix64 rng(seed);
  const auto fill = [&](Weight w, int64_t n) {
    std::vector<float>& v = t.values[w];
    for (int64_t i = 0; i < n; ++i) {
      v.push_back(static_cast<float>(static_cast<double>(rng.next() >> 11) * 0x1p-53 - 0.5));
    }
  };
  fill(Weight::token_embedding, V * d);
  fill(Weight::rms_att, L * d);
  fill(Weight::wq, L * d * d);
  fill(Weight::wk, L * kv * d);
  fill(Weight::wv, L * kv * d);
  fill(Weight::wo, L * d * d);
  fill(Weight::rms_ffn, L * d);
  fill(Weight::w1, L * h * d);
  fill(Weight::w2, L * d * h);
  fill(Weight::w3, L * h * d);
  fill(Weight::rms_final, d);
  if (c.version == 0) {  // RoPE with base 10000, as llama2.c's model.py computes it
    for (int64_t pos = 0; pos < c.seq_len; ++pos) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle =
            static_cast<double>(pos) * std::pow(10000.0, -static_cast<double>(i) / half);
        t.values[Weight::freq_cis_real].push_back(static_cast<float>(std::cos(angle)));
        t.values[Weight::freq_cis_imag].push_back(static_cast<float>(std::sin(angle)));
      }
    }
  }
  if (!c.shared) fill(Weight::wcls, V * d);

  std::vector<Weight> order;
  if (c.version == 0) {
    for (int32_t v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                      c.shared ? c.vocab_size : -c.vocab_size, c.seq_len}) {
      put_i32(t.bytes, v);
    }
    order = {Weight::token_embedding,
             Weight::rms_att,
             Weight::wq,
             Weight::wk,
             Weight::wv,
             Weight::wo,
             Weight::rms_ffn,
             Weight::w1,
             Weight::w2,
             Weight::w3,
             Weight::rms_final,
             Weight::freq_cis_real,
             Weight::freq_cis_imag};
  } else {
    put_i32(t.bytes, static_cast<int32_t>(llama2c::kMagic));
    put_i32(t.bytes, c.version);
    for (int32_t v :
         {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len}) {
      put_i32(t.bytes, v);
    }
    t.bytes.push_back(c.shared ? 1 : 0);
    t.bytes.resize(256, 0);
    order = {Weight::rms_att, Weight::rms_ffn, Weight::rms_final, Weight::token_embedding,
             Weight::wq,      Weight::wk,      Weight::wv,        Weight::wo,
             Weight::w1,      Weight::w2,      Weight::w3};
  }
  if (!c.shared) order.push_back(Weight::wcls);
  for (const Weight w : order) {
    for (const float f : t.values.at(w)) put_f32(t.bytes, f);
  }
  return t;
}

std::span<const std::byte> as_bytes(const std::vector<uint8_t>& v) {
  return std::as_bytes(std::span(v));
}

// The FormatError message of parsing `bytes`, or "" when it parses.
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    Checkpoint::parse(as_bytes(bytes), "ckpt.bin");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> with_i32(std::vector<uint8_t> bytes, size_t offset, int32_t v) {
  std::memcpy(bytes.data() + offset, &v, 4);
  return bytes;
}

// llama2.c's tokenizer.bin for n tokens: <unk>, "\n<s>\n", "\n</s>\n",
// the 256 byte pieces, then " a", " b"...
std::vector<uint8_t> make_tokenizer(int n) {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256 && static_cast<int>(pieces.size()) < n; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    pieces.push_back(text);
  }
  for (int i = 0; static_cast<int>(pieces.size()) < n; ++i) {
    pieces.push_back(std::string(" ") + static_cast<char>('a' + i % 26) +
                     std::string(static_cast<size_t>(i / 26), 'z'));
  }
  std::vector<uint8_t> out;
  size_t longest = 0;
  for (const auto& p : pieces) longest = std::max(longest, p.size());
  put_i32(out, static_cast<int32_t>(longest));
  for (size_t i = 0; i < pieces.size(); ++i) {
    put_f32(out, i < 259 ? 0.0f : -static_cast<float>(i));
    put_i32(out, static_cast<int32_t>(pieces[i].size()));
    out.insert(out.end(), pieces[i].begin(), pieces[i].end());
  }
  return out;
}

// --- reading -------------------------------------------------------------

TEST(Llama2cCheckpoint, ReadsTheLegacyLayout) {
  const TinyConfig c;
  const TinyCheckpoint t = make_checkpoint(c);
  const Checkpoint ck = Checkpoint::parse(as_bytes(t.bytes), "tiny.bin");
  EXPECT_EQ(ck.version(), 0);
  EXPECT_EQ(ck.config().dim, 32);
  EXPECT_EQ(ck.config().hidden_dim, 48);
  EXPECT_EQ(ck.config().n_layers, 2);
  EXPECT_EQ(ck.config().n_heads, 4);
  EXPECT_EQ(ck.config().n_kv_heads, 2);
  EXPECT_EQ(ck.config().vocab_size, 40);
  EXPECT_EQ(ck.config().seq_len, 8);
  EXPECT_TRUE(ck.config().shared_classifier);
  EXPECT_EQ(ck.config().kv_dim(), 16);
  EXPECT_EQ(ck.find(Weight::wcls), nullptr);
  ASSERT_NE(ck.find(Weight::freq_cis_imag), nullptr);
  EXPECT_EQ(ck.find(Weight::token_embedding)->offset, 28u);
  EXPECT_EQ(ck.arrays().size(), 13u);
  for (const Weight w : {Weight::wq, Weight::wk, Weight::w2, Weight::rms_ffn}) {
    const std::vector<float>& all = t.values.at(w);
    const size_t per_layer = all.size() / 2;
    EXPECT_EQ(ck.item_floats(w, 1),
              std::vector<float>(all.begin() + static_cast<ptrdiff_t>(per_layer), all.end()))
        << llama2c::weight_name(w);
  }
  EXPECT_EQ(ck.item_floats(Weight::rms_final), t.values.at(Weight::rms_final));
  EXPECT_THROW(ck.item_bytes(Weight::wq, 2), Error);
  EXPECT_THROW(ck.item_bytes(Weight::wcls), Error);
}

TEST(Llama2cCheckpoint, NegativeVocabSizeMeansAClassifierAfterFreqCis) {
  TinyConfig c;
  c.shared = false;
  const TinyCheckpoint t = make_checkpoint(c);
  const Checkpoint ck = Checkpoint::parse(as_bytes(t.bytes));
  EXPECT_FALSE(ck.config().shared_classifier);
  EXPECT_EQ(ck.config().vocab_size, 40);
  ASSERT_NE(ck.find(Weight::wcls), nullptr);
  EXPECT_EQ(ck.arrays().back().weight, Weight::wcls);
  EXPECT_EQ(ck.item_floats(Weight::wcls), t.values.at(Weight::wcls));
  EXPECT_EQ(ck.find(Weight::wcls)->offset + 40 * 32 * 4, t.bytes.size());
}

TEST(Llama2cCheckpoint, ReadsVersion1) {
  for (const bool shared : {true, false}) {
    TinyConfig c;
    c.version = 1;
    c.shared = shared;
    const TinyCheckpoint t = make_checkpoint(c);
    const Checkpoint ck = Checkpoint::parse(as_bytes(t.bytes));
    EXPECT_EQ(ck.version(), 1);
    EXPECT_EQ(ck.config().shared_classifier, shared);
    EXPECT_EQ(ck.find(Weight::freq_cis_real), nullptr);
    EXPECT_EQ(ck.find(Weight::rms_att)->offset, 256u);
    EXPECT_EQ(ck.item_floats(Weight::token_embedding), t.values.at(Weight::token_embedding));
    EXPECT_EQ(ck.item_floats(Weight::w3, 0),
              std::vector<float>(t.values.at(Weight::w3).begin(),
                                 t.values.at(Weight::w3).begin() + 48 * 32));
    EXPECT_EQ(ck.find(Weight::wcls) != nullptr, !shared);
  }
}

TEST(Llama2cCheckpoint, EveryTruncationIsAFormatError) {
  for (const int version : {0, 1}) {
    TinyConfig c;
    c.version = version;
    c.shared = false;
    const TinyCheckpoint t = make_checkpoint(c);
    for (size_t n = 0; n < t.bytes.size(); n += (n < 300 ? 1 : 97)) {
      const std::vector<uint8_t> cut(t.bytes.begin(), t.bytes.begin() + static_cast<ptrdiff_t>(n));
      EXPECT_NE(parse_error(cut), "") << "version " << version << ", " << n << " bytes";
    }
  }
  // The message names the array that does not fit.
  const TinyCheckpoint t = make_checkpoint(TinyConfig{});
  const Checkpoint ck = Checkpoint::parse(as_bytes(t.bytes));
  const std::vector<uint8_t> cut(
      t.bytes.begin(), t.bytes.begin() + static_cast<ptrdiff_t>(ck.find(Weight::wv)->offset + 10));
  const std::string message = parse_error(cut);
  EXPECT_NE(message.find("ckpt.bin: wv [2][16][32] at offset"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(parse_error({}).find("shorter than the 28-byte llama2.c header"), std::string::npos);
}

TEST(Llama2cCheckpoint, AbsurdHeadersNameTheField) {
  const std::vector<uint8_t> good = make_checkpoint(TinyConfig{}).bytes;
  ASSERT_EQ(parse_error(good), "");
  const auto expect = [&](const std::vector<uint8_t>& bytes, const std::string& part) {
    const std::string message = parse_error(bytes);
    EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
  };
  expect(with_i32(good, 0, 0), "dim at offset 0: 0: must be positive");
  expect(with_i32(good, 8, -3), "n_layers at offset 8: -3: must be positive");
  expect(with_i32(good, 20, 0), "vocab_size at offset 20");
  expect(with_i32(good, 20, INT32_MIN), "vocab_size at offset 20");
  expect(with_i32(good, 24, -1), "seq_len at offset 24");
  expect(with_i32(good, 12, 5), "n_heads at offset 12: dim 32 is not a multiple of n_heads 5");
  expect(with_i32(good, 12, 32), "head size dim / n_heads = 1 is odd");
  expect(with_i32(good, 16, 3), "n_kv_heads at offset 16: 3 KV heads do not divide 4");
  expect(with_i32(good, 16, 8), "n_kv_heads at offset 16");
  // Sizes far beyond the file, and beyond 64 bits.
  expect(with_i32(good, 0, 1 << 30), "token_embedding [40][1073741824] at offset 28: needs");
  std::vector<uint8_t> huge = good;
  for (const auto& [at, v] : {std::pair{0, 1 << 30},
                              {4, INT32_MAX},
                              {8, INT32_MAX},
                              {12, 1 << 29},
                              {16, 1},
                              {20, INT32_MAX},
                              {24, INT32_MAX}}) {
    huge = with_i32(huge, static_cast<size_t>(at), v);
  }
  expect(huge, "token_embedding [2147483647][1073741824] at offset 28: needs 9223372032559808512");
  expect(with_i32(good, 8, INT32_MAX), "rms_att [2147483647][32] at offset 5148: needs");
  // Bytes after the last array; exactly a classifier's worth gets a hint.
  std::vector<uint8_t> padded = good;
  padded.push_back(0);
  expect(padded, "end of file at offset");
  std::vector<uint8_t> classifier = good;
  classifier.resize(good.size() + 40 * 32 * 4);
  expect(classifier, "a separate classifier needs a negative vocab_size");
}

TEST(Llama2cCheckpoint, VersionedHeaderChecks) {
  TinyConfig c;
  c.version = 1;
  const std::vector<uint8_t> good = make_checkpoint(c).bytes;
  ASSERT_EQ(parse_error(good), "");
  const auto expect = [&](const std::vector<uint8_t>& bytes, const std::string& part) {
    const std::string message = parse_error(bytes);
    EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
  };
  expect(with_i32(good, 4, 2), "version at offset 4: version 2 (int8 Q8_0 groups)");
  expect(with_i32(good, 4, 7), "unknown llama2.c checkpoint version 7");
  std::vector<uint8_t> bad_flag = good;
  bad_flag[36] = 7;
  expect(bad_flag, "shared_classifier at offset 36");
  expect(with_i32(good, 8 + 5 * 4, -40), "vocab_size at offset 28");
  expect(std::vector<uint8_t>(good.begin(), good.begin() + 100), "shorter than the 256-byte");
}

TEST(Llama2cTokenizer, ReadsExactlyTheModelsTokens) {
  const std::vector<uint8_t> bytes = make_tokenizer(300);
  const llama2c::TokenizerFile t = llama2c::parse_tokenizer(as_bytes(bytes), 300, "tok.bin");
  ASSERT_EQ(t.pieces.size(), 300u);
  EXPECT_EQ(t.pieces[1], "\n<s>\n");
  EXPECT_EQ(t.pieces[3], "<0x00>");
  EXPECT_EQ(t.pieces[259], " a");
  EXPECT_EQ(t.scores[299], -299.0f);
  EXPECT_EQ(t.max_token_length, 6u);

  const auto error = [&](const std::vector<uint8_t>& b, int64_t n) -> std::string {
    try {
      llama2c::parse_tokenizer(as_bytes(b), n, "tok.bin");
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(bytes, 301).find("tok.bin: token 300 score and length"), std::string::npos);
  EXPECT_NE(error(bytes, 299).find("more tokens than the model's vocab_size 299"),
            std::string::npos);
  for (size_t n = 0; n < bytes.size(); n += 7) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_NE(error(cut, 300), "") << n;
  }
  EXPECT_NE(error(with_i32(bytes, 8, -5), 300).find("token 0 length at offset 8: -5"),
            std::string::npos);
  EXPECT_NE(error(with_i32(bytes, 8, INT32_MAX), 300).find("token 0 bytes"), std::string::npos);
}

// --- converting -----------------------------------------------------------

TEST(Llama2cConvert, F32TensorsAreTheCheckpointsFloats) {
  test::TempDir dir;
  TinyConfig c;
  c.shared = false;
  const TinyCheckpoint t = make_checkpoint(c);
  test::write_file_bytes(dir / "tiny.bin", t.bytes);
  const Checkpoint ck = Checkpoint::open(dir / "tiny.bin");
  const llama2c::ConvertSummary s = llama2c::convert_to_gguf(ck, dir / "tiny.gguf", {});
  EXPECT_EQ(s.n_tensors, 3u + 2 * 9);
  EXPECT_EQ(s.n_fallbacks, 0u);

  const gguf::GgufFile f = gguf::GgufFile::open(dir / "tiny.gguf");
  std::vector<std::string> names;
  for (const auto& info : f.tensors()) names.push_back(info.name);
  const std::vector<std::string> expected_start = {
      "token_embd.weight",      "output_norm.weight",       "output.weight",
      "blk.0.attn_norm.weight", "blk.0.attn_q.weight",      "blk.0.attn_k.weight",
      "blk.0.attn_v.weight",    "blk.0.attn_output.weight", "blk.0.ffn_norm.weight",
      "blk.0.ffn_gate.weight",  "blk.0.ffn_up.weight",      "blk.0.ffn_down.weight"};
  ASSERT_GE(names.size(), expected_start.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 12), expected_start);

  const auto check = [&](const std::string& name, std::vector<int64_t> shape, Weight w, int layer) {
    const gguf::TensorInfo* info = f.find_tensor(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->type, GgmlType::F32) << name;
    EXPECT_EQ(info->shape, shape) << name;
    const std::vector<float>& all = t.values.at(w);
    const size_t per_item = all.size() / (per_layer(w) ? 2 : 1);
    const std::vector<float> want(all.begin() + static_cast<ptrdiff_t>(layer * per_item),
                                  all.begin() + static_cast<ptrdiff_t>((layer + 1) * per_item));
    ASSERT_EQ(info->data.size(), want.size() * 4) << name;
    EXPECT_EQ(std::memcmp(info->data.data(), want.data(), info->data.size()), 0) << name;
  };
  check("token_embd.weight", {32, 40}, Weight::token_embedding, 0);
  check("output.weight", {32, 40}, Weight::wcls, 0);
  check("output_norm.weight", {32}, Weight::rms_final, 0);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    check(p + "attn_norm.weight", {32}, Weight::rms_att, l);
    check(p + "attn_q.weight", {32, 32}, Weight::wq, l);
    check(p + "attn_k.weight", {32, 16}, Weight::wk, l);
    check(p + "attn_v.weight", {32, 16}, Weight::wv, l);
    check(p + "attn_output.weight", {32, 32}, Weight::wo, l);
    check(p + "ffn_norm.weight", {32}, Weight::rms_ffn, l);
    check(p + "ffn_gate.weight", {32, 48}, Weight::w1, l);
    check(p + "ffn_down.weight", {48, 32}, Weight::w2, l);
    check(p + "ffn_up.weight", {32, 48}, Weight::w3, l);
  }

  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.metadata().front().key, "general.architecture");
  EXPECT_EQ(f.get_string("general.name"), "tiny");
  EXPECT_EQ(f.get_uint("general.file_type"), 0u);
  EXPECT_EQ(f.get_uint("llama.vocab_size"), 40u);
  EXPECT_EQ(f.get_uint("llama.context_length"), 8u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 32u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 48u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_uint("llama.rope.dimension_count"), 8u);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.rope.freq_base")), 10000.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(f.find("llama.attention.key_length"), nullptr);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "no_vocab");
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens"), nullptr);
  // An ids-only vocabulary of the model's size.
  const Vocab vocab = Vocab::from_gguf(f);
  EXPECT_EQ(vocab.kind, TokenizerKind::none);
  EXPECT_EQ(vocab.size(), 40u);
}

TEST(Llama2cConvert, SharedClassifierWritesNoOutputMatrix) {
  test::TempDir dir;
  TinyConfig c;
  c.version = 1;
  test::write_file_bytes(dir / "v1.bin", make_checkpoint(c).bytes);
  llama2c::ConvertOptions options;
  options.name = "shared";
  llama2c::convert_to_gguf(Checkpoint::open(dir / "v1.bin"), dir / "v1.gguf", options);
  const gguf::GgufFile f = gguf::GgufFile::open(dir / "v1.gguf");
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.tensors().size(), 2u + 2 * 9);
  EXPECT_EQ(f.get_string("general.name"), "shared");
}

TEST(Llama2cConvert, Version1AndLegacyGiveTheSameFile) {
  test::TempDir dir;
  for (const bool shared : {true, false}) {
    TinyConfig c;
    c.shared = shared;
    test::write_file_bytes(dir / "legacy.bin", make_checkpoint(c).bytes);
    c.version = 1;
    test::write_file_bytes(dir / "v1.bin", make_checkpoint(c).bytes);
    llama2c::ConvertOptions options;
    options.name = "same";
    options.recipe = find_quant_recipe("Q8_0");
    llama2c::convert_to_gguf(Checkpoint::open(dir / "legacy.bin"), dir / "a.gguf", options);
    llama2c::convert_to_gguf(Checkpoint::open(dir / "v1.bin"), dir / "b.gguf", options);
    EXPECT_EQ(test::read_file_bytes(dir / "a.gguf"), test::read_file_bytes(dir / "b.gguf"))
        << "shared " << shared;
  }
}

TEST(Llama2cConvert, QuantizedMatricesFallBackWhereRowsDoNotFit) {
  test::TempDir dir;
  TinyConfig c;
  c.dim = 64;
  c.hidden_dim = 40;  // ffn_down rows of 40: not whole Q8_0 blocks
  const TinyCheckpoint t = make_checkpoint(c);
  test::write_file_bytes(dir / "q.bin", t.bytes);
  llama2c::ConvertOptions options;
  options.recipe = find_quant_recipe("Q8_0");
  options.n_threads = 2;
  size_t progress_calls = 0;
  options.on_progress = [&](const llama2c::ConvertProgress& p) {
    ++progress_calls;
    EXPECT_LE(p.bytes_done, p.bytes_total);
  };
  const llama2c::ConvertSummary s =
      llama2c::convert_to_gguf(Checkpoint::open(dir / "q.bin"), dir / "q.gguf", options);
  EXPECT_EQ(progress_calls, s.n_tensors);
  EXPECT_EQ(s.n_fallbacks, 2u);  // blk.0/1.ffn_down
  const gguf::GgufFile f = gguf::GgufFile::open(dir / "q.gguf");
  EXPECT_EQ(f.get_uint("general.file_type"), 7u);
  EXPECT_EQ(f.find_tensor("blk.1.attn_q.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_down.weight")->type, GgmlType::F16);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_norm.weight")->type, GgmlType::F32);
  // The values survive quantization closely.
  const gguf::TensorInfo* q = f.find_tensor("blk.1.attn_k.weight");
  std::vector<float> decoded(static_cast<size_t>(q->n_elements()));
  dequantize_row(q->type, q->data, decoded);
  const std::vector<float>& all = t.values.at(Weight::wk);
  for (size_t i = 0; i < decoded.size(); ++i) {
    ASSERT_NEAR(decoded[i], all[decoded.size() + i], 0.5f / 127 * 1.01f) << i;
  }
}

TEST(Llama2cConvert, TokenizerBinGivesASentencePieceVocabulary) {
  test::TempDir dir;
  TinyConfig c;
  c.vocab_size = 300;
  test::write_file_bytes(dir / "m.bin", make_checkpoint(c).bytes);
  test::write_file_bytes(dir / "tok.bin", make_tokenizer(300));
  llama2c::ConvertOptions options;
  options.tokenizer = dir / "tok.bin";
  const llama2c::ConvertSummary s =
      llama2c::convert_to_gguf(Checkpoint::open(dir / "m.bin"), dir / "m.gguf", options);
  EXPECT_TRUE(s.has_vocab);
  const gguf::GgufFile f = gguf::GgufFile::open(dir / "m.gguf");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  const Vocab vocab = Vocab::from_gguf(f);
  ASSERT_EQ(vocab.size(), 300u);
  EXPECT_EQ(vocab.kind, TokenizerKind::spm);
  EXPECT_EQ(vocab.tokens[0], "<unk>");
  EXPECT_EQ(vocab.tokens[1], "<s>");
  EXPECT_EQ(vocab.tokens[2], "</s>");
  EXPECT_EQ(vocab.tokens[3 + 0x41], "<0x41>");
  EXPECT_EQ(vocab.tokens[259],
            "\xE2\x96\x81"
            "a");
  EXPECT_EQ(vocab.type(1), TokenType::control);
  EXPECT_EQ(vocab.type(0), TokenType::unknown);
  EXPECT_EQ(vocab.type(10), TokenType::byte);
  EXPECT_EQ(vocab.type(259), TokenType::normal);
  EXPECT_EQ(vocab.bos, 1);
  EXPECT_EQ(vocab.eos, 2);
  const Tokenizer tokenizer(vocab);
  const std::vector<TokenId> ids = tokenizer.encode("a b");
  EXPECT_EQ(ids, (std::vector<TokenId>{1, 259, 260}));

  // Duplicate tokens (the peer aborts on them) are refused, naming both ids;
  // empty pieces become "[EMPTY_<id>]" as in the peer, so several are fine.
  llama2c::TokenizerFile dup = llama2c::parse_tokenizer(as_bytes(make_tokenizer(300)), 300);
  dup.pieces[299] = " b";
  dup.pieces[297] = dup.pieces[298] = "";
  try {
    llama2c::spm_vocabulary(dup, "tok.bin");
    ADD_FAILURE() << "duplicate accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tok.bin: tokens 260 and 299 are both \"\xE2\x96\x81"
                                         "b\""),
              std::string::npos)
        << e.what();
  }
  dup.pieces[299] = "<s>";
  EXPECT_THROW(llama2c::spm_vocabulary(dup), Error);
  dup.pieces[299] = "";
  EXPECT_EQ(llama2c::spm_vocabulary(dup).tokens[299], "");

  // A tokenizer of another size is refused before anything is written.
  test::write_file_bytes(dir / "small.bin", make_tokenizer(299));
  options.tokenizer = dir / "small.bin";
  EXPECT_THROW(llama2c::convert_to_gguf(Checkpoint::open(dir / "m.bin"), dir / "x.gguf", options),
               FormatError);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.gguf"));
}

TEST(Llama2cConvert, LlamaNamesMapBackToCheckpointArrays) {
  EXPECT_EQ(llama2c::source_of("blk.12.ffn_gate.weight")->weight, Weight::w1);
  EXPECT_EQ(llama2c::source_of("blk.12.ffn_gate.weight")->layer, 12);
  EXPECT_EQ(llama2c::source_of("blk.3.ffn_down.weight")->weight, Weight::w2);
  EXPECT_EQ(llama2c::source_of("blk.3.ffn_up.weight")->weight, Weight::w3);
  EXPECT_EQ(llama2c::source_of("output.weight")->weight, Weight::wcls);
  EXPECT_FALSE(llama2c::source_of("blk.x.ffn_up.weight"));
  EXPECT_FALSE(llama2c::source_of("blk.1"));
  EXPECT_FALSE(llama2c::source_of("rope_freqs.weight"));
}

// --- the command line -------------------------------------------------------

TEST(Llama2cCli, ExitCodes) {
  test::TempDir dir;
  TinyConfig c;
  c.dim = 64;
  const std::vector<uint8_t> bytes = make_checkpoint(c).bytes;
  test::write_file_bytes(dir / "m.bin", bytes);
  const std::string in = (dir / "m.bin").string(), out = (dir / "m.gguf").string();
  std::string text;
  EXPECT_EQ(test::run_cli("convert llama2c " + in + " " + out + " --type q8_0 --name tiny", &text),
            0)
      << text;
  EXPECT_NE(text.find("wrote " + out + ": llama, 20 tensors"), std::string::npos) << text;
  EXPECT_EQ(gguf::GgufFile::open(out).get_string("general.name"), "tiny");
  EXPECT_EQ(text.find("freq_cis"), std::string::npos) << text;
  EXPECT_EQ(test::run_cli("convert --help", &text), 0);
  EXPECT_NE(text.find("llama2c"), std::string::npos);
  EXPECT_EQ(test::run_cli("convert llama2c " + in, &text), 2) << text;
  EXPECT_EQ(test::run_cli("convert safetensors " + in + " " + out, &text), 2) << text;
  EXPECT_NE(text.find("unknown source format 'safetensors'"), std::string::npos) << text;
  EXPECT_EQ(test::run_cli("convert llama2c " + in + " " + out + " --type Q9_9", &text), 2) << text;

  // A RoPE table of another base converts, with a warning.
  std::vector<uint8_t> other_base = bytes;
  const Checkpoint ck = Checkpoint::parse(as_bytes(bytes));
  const uint64_t pos1 = ck.find(Weight::freq_cis_real)->offset + 8 * 4 + 4;  // position 1, pair 1
  other_base[pos1 + 3] ^= 0x80;  // the sign of cos(10000^(-1/8))
  test::write_file_bytes(dir / "base.bin", other_base);
  EXPECT_EQ(test::run_cli("convert llama2c " + (dir / "base.bin").string() + " " + out, &text), 0)
      << text;
  EXPECT_NE(text.find("freq_cis is not RoPE with base 10000"), std::string::npos) << text;

  // A broken input: exit 1, the field in the message, no output file.
  std::filesystem::remove(out);
  test::write_file_bytes(dir / "cut.bin",
                         std::vector<uint8_t>(bytes.begin(), bytes.begin() + 1000));
  EXPECT_EQ(test::run_cli("convert llama2c " + (dir / "cut.bin").string() + " " + out, &text), 1);
  EXPECT_NE(text.find("cortiq convert: error: "), std::string::npos) << text;
  EXPECT_NE(text.find("token_embedding [40][64] at offset 28"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(test::run_cli("convert llama2c " + (dir / "absent.bin").string() + " " + out, &text),
            1);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The real model of shared/data: its floats reach the GGUF unchanged.
TEST(Llama2cCli, ConvertsStories260K) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto in = test::shared_data_dir() / "models" / "stories260K.bin";
  if (!std::filesystem::exists(in)) GTEST_SKIP() << in << " not found";
  test::TempDir dir;
  std::string text;
  ASSERT_EQ(
      test::run_cli("convert llama2c " + in.string() + " " + (dir / "s.gguf").string(), &text), 0)
      << text;
  const gguf::GgufFile f = gguf::GgufFile::open(dir / "s.gguf");
  EXPECT_EQ(f.get_string("general.name"), "stories260K");
  EXPECT_EQ(f.tensors().size(), 2u + 5 * 9);  // tied: no output.weight
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 5u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 8u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f.get_uint("llama.vocab_size"), 512u);
  EXPECT_EQ(f.get_uint("llama.context_length"), 512u);
  EXPECT_EQ(f.find_tensor("blk.4.ffn_down.weight")->shape, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(f.find_tensor("blk.4.attn_k.weight")->shape, (std::vector<int64_t>{64, 32}));
  const std::vector<uint8_t> raw = test::read_file_bytes(in);
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_EQ(embd->data.size(), 512u * 64 * 4);
  EXPECT_EQ(std::memcmp(embd->data.data(), raw.data() + 28, embd->data.size()), 0);
  // rms_final sits after the 5 layers' arrays.
  const uint64_t rms_final_at =
      28 + 4 * (512 * 64 + 5 * (64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 64 + 3 * 172 * 64));
  const gguf::TensorInfo* norm = f.find_tensor("output_norm.weight");
  EXPECT_EQ(std::memcmp(norm->data.data(), raw.data() + rms_final_at, 64 * 4), 0);

  ASSERT_EQ(test::run_cli(
                "convert llama2c " + in.string() + " " + (dir / "q.gguf").string() + " --type Q8_0",
                &text),
            0)
      << text;
  EXPECT_EQ(gguf::GgufFile::open(dir / "q.gguf").find_tensor("blk.0.ffn_gate.weight")->type,
            GgmlType::Q8_0);
}

}  // namespace
}  // namespace cortiq
