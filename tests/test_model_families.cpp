// The family table and the loader's contract: a file is run completely or
// refused, naming the tensor (unknown, missing, misshapen, or one the family
// does not read); every family writes what it reads (gen-model) and reads it
// back; per-layer descriptions (sliding windows, RoPE tables) come from the
// file; and every family keeps batch invariance across its window edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "base/thread_pool.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "gguf_test_files.hpp"
#include "kv/kv_cache.hpp"
#include "model/arch/recurrent_layers.hpp"
#include "model/blocks/classifier.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/family.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/gen_model/random_model.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {
namespace {

RandomModelOptions small_model(std::string_view arch,
                               OptionalTensors optional = OptionalTensors::converted) {
  RandomModelOptions o;
  o.family = find_family(arch);
  o.geometry.n_embd = 64;
  o.geometry.n_layer = 2;
  o.geometry.n_head = 4;
  o.geometry.n_head_kv = 2;
  o.geometry.n_ff = 96;
  o.geometry.n_ctx = 128;
  o.optional = optional;
  return o;
}

// A tensor added to a copy: its name, shape and f32 values.
struct ExtraTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values = {};  // empty: all 1
};

// Copies `from` into `to`, leaving out the tensor named `drop`, giving
// `reshape` (if any) the shape of `extra`, and adding `extra` (if named).
void rewrite(const std::filesystem::path& from, const std::filesystem::path& to,
             const std::string& drop, const ExtraTensor& extra = {},
             const std::function<void(gguf::GgufWriter&)>& edit_metadata = {}) {
  const gguf::GgufFile file = gguf::GgufFile::open(from);
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  if (edit_metadata) edit_metadata(writer);
  std::vector<const gguf::TensorInfo*> kept;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name == drop) continue;
    writer.add_tensor(t.name, t.type, t.shape);
    kept.push_back(&t);
  }
  int64_t extra_elements = 1;
  for (const int64_t d : extra.shape) extra_elements *= d;
  if (!extra.name.empty()) writer.add_tensor(extra.name, GgmlType::F32, extra.shape);
  writer.begin(to);
  for (const gguf::TensorInfo* t : kept) writer.write_tensor_data(t->data);
  if (!extra.name.empty()) {
    std::vector<float> values = extra.values;
    if (values.empty()) values.assign(static_cast<size_t>(extra_elements), 1.0f);
    writer.write_tensor_data(std::as_bytes(std::span(values)));
  }
  writer.finish();
}

// An edit for rewrite(): metadata `key` set to these u32 values.
std::function<void(gguf::GgufWriter&)> set_u32_array(std::string key,
                                                     std::vector<uint32_t> values) {
  return [key = std::move(key), values = std::move(values)](gguf::GgufWriter& w) {
    gguf::Array array = gguf::Array::of(gguf::ValueType::u32);
    std::get<std::vector<uint32_t>>(array.items) = values;
    w.set(key, gguf::Value(array));
  };
}

std::string load_error(const std::filesystem::path& path) {
  try {
    Model::load(path, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// 64 ids walking over the test models' vocabulary.
std::vector<TokenId> walk_ids() {
  std::vector<TokenId> ids(64);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<TokenId>(3 + (i * 37) % 600);
  return ids;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(FamilyTable, NamesEveryArchitectureOnceAndFindsThem) {
  std::vector<std::string_view> names;
  for (const Family* family : families()) {
    EXPECT_EQ(find_family(family->arch), family);
    EXPECT_EQ(std::count(names.begin(), names.end(), family->arch), 0) << family->arch;
    names.push_back(family->arch);
    EXPECT_NE(family->make, nullptr);
    EXPECT_NE(family->tensors, nullptr);
  }
  EXPECT_EQ(find_family("no-such-arch"), nullptr);
  EXPECT_NE(supported_architecture_list().find("gemma2"), std::string::npos);
}

// The README's Architectures table names every family as `name`, and its
// status paragraph counts them ("(98 names; ..."): a family added without
// its row, or a count left stale, fails here.
TEST(FamilyTable, TheReadmeNamesEveryFamilyAndCountsThem) {
  const auto bytes = test::read_file_bytes(test::golden_dir() / ".." / ".." / "README.md");
  const std::string readme(bytes.begin(), bytes.end());
  for (const Family* family : families()) {
    EXPECT_NE(readme.find("`" + std::string(family->arch) + "`"), std::string::npos)
        << family->arch << " has no row in README.md's Architectures table";
  }
  const std::string count = "(" + std::to_string(families().size()) + " names;";
  EXPECT_NE(readme.find(count), std::string::npos) << "README.md should say " << count;
}

// Every family's random model with every optional tensor loads: the loader
// binds everything gen-model writes, and the logits are finite.
TEST(FamilyTable, EveryFamilyReadsWhatItWrites) {
  test::TempDir dir;
  for (const Family* family : families()) {
    for (const OptionalTensors optional : {OptionalTensors::converted, OptionalTensors::all}) {
      SCOPED_TRACE(std::string(family->arch) +
                   (optional == OptionalTensors::all ? " (all tensors)" : ""));
      const auto path = dir / (std::string(family->arch) + ".gguf");
      write_random_model(small_model(family->arch, optional), path);
      LoadOptions load;
      load.kv_type = KvType::f32;
      const auto model = Model::load(path, load);
      Session session(model);
      const std::vector<TokenId> ids = {1, 5, 9, 13, 17};
      const auto out = family->encoder ? session.embeddings(ids, 2) : session.evaluate(ids, 2);
      for (const float v : out) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

// What an encoder file may not say, each refused by name: bidirectional
// attention in a decoder family, nomic-bert's MoE layers, no token type
// count, and a reranker's classification head (not run).
TEST(ModelLoad, EncoderMetadataOutsideWhatRunsIsRefused) {
  test::TempDir dir;
  write_random_model(small_model("llama"), dir / "llama.gguf");
  rewrite(dir / "llama.gguf", dir / "a.gguf", "", {},
          [](gguf::GgufWriter& w) { w.set("llama.attention.causal", gguf::Value(false)); });
  EXPECT_NE(load_error(dir / "a.gguf").find("attention.causal = false"), std::string::npos);
  write_random_model(small_model("nomic-bert"), dir / "nomic.gguf");
  rewrite(dir / "nomic.gguf", dir / "b.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("nomic-bert.moe_every_n_layers", gguf::Value(uint32_t{2}));
  });
  EXPECT_NE(load_error(dir / "b.gguf").find("moe_every_n_layers"), std::string::npos);
  write_random_model(small_model("bert"), dir / "bert.gguf");
  rewrite(dir / "bert.gguf", dir / "c.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("tokenizer.ggml.token_type_count", gguf::Value(uint32_t{0}));
  });
  EXPECT_NE(load_error(dir / "c.gguf").find("token_type_count"), std::string::npos);
  rewrite(dir / "bert.gguf", dir / "d.gguf", "", {"cls.output.weight", {48, 1}});
  EXPECT_NE(load_error(dir / "d.gguf").find("cls.output.weight"), std::string::npos);
}

TEST(ModelLoad, AnUnusedTensorIsRefusedByName) {
  test::TempDir dir;
  write_random_model(small_model("llama"), dir / "a.gguf");
  // llama.cpp's llama reads no Q/K norms: a file with one is refused.
  rewrite(dir / "a.gguf", dir / "b.gguf", "", {"blk.0.attn_q_norm.weight", {16}});
  const std::string error = load_error(dir / "b.gguf");
  EXPECT_NE(error.find("tensor blk.0.attn_q_norm.weight is not used by architecture llama"),
            std::string::npos)
      << error;
  // A name no family knows.
  rewrite(dir / "a.gguf", dir / "c.gguf", "", {"mystery.weight", {4}});
  EXPECT_NE(load_error(dir / "c.gguf").find("mystery.weight"), std::string::npos);
}

// Copies `from` into `to` with each layer's attn_{q,k,v}.weight (and their
// biases, when there) concatenated into attn_qkv.weight (.bias), as a
// converter that fuses them writes it: rows Q, then K, then V.
void fuse_qkv(const std::filesystem::path& from, const std::filesystem::path& to) {
  const gguf::GgufFile file = gguf::GgufFile::open(from);
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  std::vector<std::vector<std::byte>> data;
  const auto part = [&](const std::string& prefix, std::string_view m, const char* suffix) {
    return file.find_tensor(prefix + std::string(m) + suffix);
  };
  for (const gguf::TensorInfo& t : file.tensors()) {
    const auto dot = t.name.find(".attn_");
    const bool qkv_part =
        t.name.starts_with("blk.") && dot != std::string::npos &&
        (t.name.ends_with(".weight") || t.name.ends_with(".bias")) &&
        (t.name.substr(dot, 8) == ".attn_q." || t.name.substr(dot, 8) == ".attn_k." ||
         t.name.substr(dot, 8) == ".attn_v.");
    if (!qkv_part) {
      writer.add_tensor(t.name, t.type, t.shape);
      data.emplace_back(t.data.begin(), t.data.end());
      continue;
    }
    if (t.name.substr(dot, 8) != ".attn_q.") continue;  // written with Q
    const std::string prefix = t.name.substr(0, dot + 1);
    const char* suffix = t.name.ends_with(".weight") ? ".weight" : ".bias";
    std::vector<int64_t> shape = t.shape;
    std::vector<std::byte> bytes;
    for (const std::string_view m : {"attn_q", "attn_k", "attn_v"}) {
      const gguf::TensorInfo* p = part(prefix, m, suffix);
      EXPECT_NE(p, nullptr);
      if (m != "attn_q") shape.back() += p->shape.back();
      bytes.insert(bytes.end(), p->data.begin(), p->data.end());
    }
    writer.add_tensor(prefix + "attn_qkv" + suffix, t.type, shape);
    data.push_back(std::move(bytes));
  }
  writer.begin(to);
  for (const auto& d : data) writer.write_tensor_data(d);
  writer.finish();
}

// llama.cpp's create_tensor_qkv / build_qkv: a file with attn_qkv.weight
// (and bias) instead of Q/K/V gives the logits of the same weights split.
TEST(ModelLoad, FusedQkvGivesTheLogitsOfSplitQkv) {
  test::TempDir dir;
  for (const std::string_view arch : {"llama", "qwen2"}) {
    SCOPED_TRACE(std::string(arch));
    RandomModelOptions o = small_model(arch);
    for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
      o.weight_type = type;
      write_random_model(o, dir / "split.gguf");
      fuse_qkv(dir / "split.gguf", dir / "fused.gguf");
      ASSERT_NE(gguf::GgufFile::open(dir / "fused.gguf").find_tensor("blk.1.attn_qkv.weight"),
                nullptr);
      EXPECT_EQ(gguf::GgufFile::open(dir / "fused.gguf").find_tensor("blk.1.attn_k.weight"),
                nullptr);
      if (arch == "qwen2") {
        EXPECT_NE(gguf::GgufFile::open(dir / "fused.gguf").find_tensor("blk.0.attn_qkv.bias"),
                  nullptr);
      }
      LoadOptions load;
      load.kv_type = KvType::f32;
      const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25};
      Session split(Model::load(dir / "split.gguf", load));
      Session fused(Model::load(dir / "fused.gguf", load));
      const auto a = split.evaluate(ids, 3);
      const auto b = fused.evaluate(ids, 3);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << i;
    }
  }
  // With the fused projection, the split ones' scales are not read (llama.cpp
  // reads attn_q.scale only for attn_q.weight): such a file is refused.
  write_random_model(small_model("llama"), dir / "split.gguf");
  fuse_qkv(dir / "split.gguf", dir / "fused.gguf");
  rewrite(dir / "fused.gguf", dir / "extra.gguf", "", {"blk.0.attn_q.scale", {1}});
  EXPECT_NE(load_error(dir / "extra.gguf").find("blk.0.attn_q.scale"), std::string::npos);
  // Its own scale multiplies the product.
  rewrite(dir / "fused.gguf", dir / "scaled.gguf", "", {"blk.0.attn_qkv.scale", {1}, {1.5f}});
  LoadOptions load;
  load.kv_type = KvType::f32;
  const std::vector<TokenId> ids = {1, 5, 9};
  Session plain(Model::load(dir / "fused.gguf", load));
  Session scaled(Model::load(dir / "scaled.gguf", load));
  EXPECT_NE(plain.evaluate(ids, 3), scaled.evaluate(ids, 3));
}

TEST(ModelLoad, AMissingTensorIsNamed) {
  test::TempDir dir;
  write_random_model(small_model("gemma2"), dir / "a.gguf");
  rewrite(dir / "a.gguf", dir / "b.gguf", "blk.1.post_ffw_norm.weight");
  EXPECT_NE(load_error(dir / "b.gguf").find("missing tensor blk.1.post_ffw_norm.weight"),
            std::string::npos);
}

// A weight in a type the engine cannot compute with (Q8_1 is only ever an
// activation format; no kernel reads it as a weight) is refused at load,
// named, not at the first forward pass.
TEST(ModelLoad, AnUnsupportedWeightTypeIsNamed) {
  test::TempDir dir;
  write_random_model(small_model("llama"), dir / "a.gguf");
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "a.gguf");
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  for (const gguf::TensorInfo& t : file.tensors()) {
    writer.add_tensor(t.name, t.name == "blk.1.attn_q.weight" ? GgmlType::Q8_1 : t.type, t.shape);
  }
  writer.begin(dir / "b.gguf");
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const gguf::TensorInfo& t = file.tensors()[i];
    if (t.name == "blk.1.attn_q.weight") {
      writer.write_tensor_data(std::vector<std::byte>(writer.tensor_bytes(i)));
    } else {
      writer.write_tensor_data(t.data);
    }
  }
  writer.finish();
  const std::string error = load_error(dir / "b.gguf");
  EXPECT_NE(error.find("unsupported weight type Q8_1 in tensor blk.1.attn_q.weight"),
            std::string::npos)
      << error;
}

TEST(ModelLoad, AMisshapenTensorIsNamed) {
  test::TempDir dir;
  write_random_model(small_model("qwen3"), dir / "a.gguf");
  // The K norm as wide as a whole row instead of one head.
  rewrite(dir / "a.gguf", dir / "b.gguf", "blk.0.attn_k_norm.weight",
          {"blk.0.attn_k_norm.weight", {32}});
  const std::string error = load_error(dir / "b.gguf");
  EXPECT_NE(error.find("tensor blk.0.attn_k_norm.weight has shape [32], expected [16]"),
            std::string::npos)
      << error;
}

TEST(ModelLoad, GemmaAndGemma2NeverReadAnOutputMatrix) {
  test::TempDir dir;
  for (const char* arch : {"gemma", "gemma2"}) {
    write_random_model(small_model(arch), dir / "a.gguf");
    rewrite(dir / "a.gguf", dir / "b.gguf", "", {"output.weight", {64, 612}});
    EXPECT_NE(load_error(dir / "b.gguf").find("tensor output.weight is not used"),
              std::string::npos)
        << arch;
  }
}

TEST(ModelLoad, AnUnknownArchitectureListsTheSupportedOnes) {
  test::TempDir dir;
  write_random_model(small_model("llama"), dir / "a.gguf");
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "a.gguf");
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  writer.set("general.architecture", gguf::Value(std::string("mamba9")));
  writer.begin(dir / "b.gguf");
  writer.finish();
  const std::string error = load_error(dir / "b.gguf");
  EXPECT_NE(
      error.find("unsupported architecture \"mamba9\" (supported: llama, qwen2, qwen3, gemma"),
      std::string::npos)
      << error;
}

// A Qwen3 reranker's head: one row per classifier label, scores =
// softmax(head · last token's final-normed hidden state) as llama.cpp's rank
// pooling computes them.
TEST(Classifier, Qwen3RerankerScoresTheLastToken) {
  test::TempDir dir;
  write_random_model(small_model("qwen3"), dir / "a.gguf");
  std::vector<float> head(2 * 64);
  for (size_t i = 0; i < head.size(); ++i) head[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  rewrite(dir / "a.gguf", dir / "b.gguf", "", {"cls.output.weight", {64, 2}, head},
          [](gguf::GgufWriter& w) {
            gguf::Array labels = gguf::Array::of(gguf::ValueType::string);
            labels.items = std::vector<std::string>{"yes", "no"};
            w.set("qwen3.classifier.output_labels", gguf::Value(labels));
          });
  LoadOptions load;
  load.kv_type = KvType::f32;
  const auto model = Model::load(dir / "b.gguf", load);
  const ClassifierHead* classifier = model->decoder().classifier();
  ASSERT_NE(classifier, nullptr);
  Session session(model);
  const std::vector<TokenId> ids = {4, 8, 15, 16, 23, 42};
  const auto hidden = session.embeddings(ids);
  const auto last = std::span(hidden).subspan(hidden.size() - 64, 64);
  const auto scores = classifier->scores(last, model->pool());
  ASSERT_EQ(scores.size(), 2u);
  double logit[2] = {0, 0};
  for (size_t r = 0; r < 2; ++r) {
    for (size_t i = 0; i < 64; ++i) logit[r] += static_cast<double>(head[r * 64 + i]) * last[i];
  }
  const double p_yes = 1.0 / (1.0 + std::exp(logit[1] - logit[0]));
  EXPECT_NEAR(scores[0], p_yes, 1e-5);
  EXPECT_NEAR(scores[0] + scores[1], 1.0, 1e-6);
  // Without the head there is nothing to rank with.
  write_random_model(small_model("llama"), dir / "c.gguf");
  EXPECT_EQ(Model::load(dir / "c.gguf", {})->decoder().classifier(), nullptr);
}

TEST(LayerSpecs, SlidingWindowsAndRopeTablesComeFromTheFile) {
  test::TempDir dir;
  write_random_model(small_model("gemma2"), dir / "g2.gguf");
  const auto g2 = Model::load(dir / "g2.gguf", {});
  const ModelHParams& h2 = g2->hparams();
  ASSERT_EQ(h2.layers.size(), 2u);
  EXPECT_EQ(h2.layers[0].window, 16);  // gen-model's window; pattern 2: local, global
  EXPECT_EQ(h2.layers[0].rope, RopeSlot::local);
  EXPECT_EQ(h2.layers[1].window, 0);
  EXPECT_EQ(h2.layers[1].rope, RopeSlot::global);
  EXPECT_FLOAT_EQ(h2.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(h2.final_softcap, 30.0f);
  EXPECT_TRUE(h2.scale_queries);

  write_random_model(small_model("gemma3"), dir / "g3.gguf");
  const auto g3 = Model::load(dir / "g3.gguf", {});
  const ModelHParams& h3 = g3->hparams();
  EXPECT_EQ(h3.layers[0].window, 16);
  EXPECT_FLOAT_EQ(h3.rope_local.freq_base, 10000.0f);
  EXPECT_FLOAT_EQ(h3.rope_local.freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(h3.final_softcap, 0.0f);

  write_random_model(small_model("llama"), dir / "l.gguf");
  const auto l = Model::load(dir / "l.gguf", {});
  for (const LayerSpec& layer : l->hparams().layers) {
    EXPECT_EQ(layer.window, 0);
    EXPECT_EQ(layer.rope, RopeSlot::global);
    EXPECT_EQ(layer.n_head, 4);
    EXPECT_EQ(layer.head_dim_k, 16);
  }
}

TEST(LayerSpecs, PerLayerHeadCountsAndWidthsSizeTheCache) {
  test::TempDir dir;
  write_random_model(small_model("llama"), dir / "a.gguf");
  // The same file with per-layer KV head counts [2, 1]: layer 1 has no
  // tensors of that shape, so loading names its K projection.
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "a.gguf");
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  gguf::Array kv_heads = gguf::Array::of(gguf::ValueType::u32);
  kv_heads.items = std::vector<uint32_t>{2, 1};
  writer.set("llama.attention.head_count_kv", gguf::Value(kv_heads));
  for (const gguf::TensorInfo& t : file.tensors()) writer.add_tensor(t.name, t.type, t.shape);
  writer.begin(dir / "b.gguf");
  for (const gguf::TensorInfo& t : file.tensors()) writer.write_tensor_data(t.data);
  writer.finish();
  EXPECT_NE(load_error(dir / "b.gguf")
                .find("tensor blk.1.attn_k.weight has shape [64, 32], "
                      "expected [64, 16]"),
            std::string::npos);

  // The cache takes each layer's widths.
  const auto model = Model::load(dir / "a.gguf", {});
  const KvCacheShape shape = model->decoder().kv_cache_shape(32, 1, KvType::f32);
  ASSERT_EQ(shape.n_layer(), 2);
  EXPECT_EQ(shape.layers[1].k_width, 32);
  EXPECT_EQ(shape.layers[1].v_width, 32);
}

// Copies a file under another architecture name (every ARCH.* key renamed),
// with the Q/K norm weights set to 1 when `unit_qk_norms`.
void copy_as(const std::filesystem::path& from, const std::filesystem::path& to,
             const std::string& arch, bool unit_qk_norms) {
  const gguf::GgufFile file = gguf::GgufFile::open(from);
  const std::string old_prefix = file.architecture() + ".";
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) {
    if (kv.key == "general.architecture") {
      writer.set(kv.key, gguf::Value(arch));
    } else if (kv.key.starts_with(old_prefix)) {
      writer.set(arch + "." + kv.key.substr(old_prefix.size()), kv.value);
    } else {
      writer.set(kv.key, kv.value);
    }
  }
  std::vector<std::vector<std::byte>> data;
  for (const gguf::TensorInfo& t : file.tensors()) {
    writer.add_tensor(t.name, t.type, t.shape);
    data.emplace_back(t.data.begin(), t.data.end());
    if (unit_qk_norms &&
        (t.name.ends_with("attn_q_norm.weight") || t.name.ends_with("attn_k_norm.weight"))) {
      ASSERT_EQ(t.type, GgmlType::F32);
      const std::vector<float> ones(data.back().size() / sizeof(float), 1.0f);
      std::memcpy(data.back().data(), ones.data(), data.back().size());
    }
  }
  writer.begin(to);
  for (const auto& d : data) writer.write_tensor_data(d);
  writer.finish();
}

// Q/K norms after RoPE (Hunyuan, Maincoder) against before (Qwen3), on the
// same weights: RoPE turns each pair, so an RMS norm whose weight is 1
// commutes with it and the order changes the last bits only; learned
// weights scale single dimensions, which RoPE then mixes, so it matters.
TEST(ModelLoad, QkNormsAfterRopeNormTheRotatedHeads) {
  test::TempDir dir;
  RandomModelOptions o = small_model("qwen3");
  write_random_model(o, dir / "qwen3.gguf");
  LoadOptions load;
  load.kv_type = KvType::f32;
  const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25};
  const auto logits = [&](const std::filesystem::path& path) {
    Session s(Model::load(path, load));
    return s.evaluate(ids, 7);
  };
  for (const bool unit : {true, false}) {
    SCOPED_TRACE(unit ? "unit norm weights" : "learned norm weights");
    copy_as(dir / "qwen3.gguf", dir / "before.gguf", "qwen3", unit);
    copy_as(dir / "qwen3.gguf", dir / "after.gguf", "hunyuan-dense", unit);
    const auto before = logits(dir / "before.gguf");
    const auto after = logits(dir / "after.gguf");
    ASSERT_EQ(before.size(), after.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      diff += (before[i] - after[i]) * (before[i] - after[i]);
      norm += before[i] * before[i];
    }
    if (unit) {
      EXPECT_LT(std::sqrt(diff / norm), 1e-5);
    } else {
      EXPECT_GT(std::sqrt(diff / norm), 1e-3);
    }
  }
}

// DeciLM's layers without attention, or with a linear map in its place,
// keep nothing in the cache; the others their own widths.
TEST(LayerSpecs, LayersWithoutAttentionKeepNoCache) {
  test::TempDir dir;
  RandomModelOptions o = small_model("deci");
  o.geometry.n_layer = 4;  // attention, linear, none, attention without FFN
  write_random_model(o, dir / "deci.gguf");
  const auto model = Model::load(dir / "deci.gguf", {});
  const KvCacheShape shape = model->decoder().kv_cache_shape(32, 1, KvType::f32);
  ASSERT_EQ(shape.n_layer(), 4);
  const int64_t widths[] = {32, 0, 0, 32};
  for (size_t il = 0; il < 4; ++il) {
    EXPECT_EQ(shape.layers[il].k_width, widths[il]) << il;
    EXPECT_EQ(shape.layers[il].v_width, widths[il]) << il;
  }
  Session session(model);
  const std::vector<TokenId> ids = {1, 5, 9};
  const auto logits = session.evaluate(ids, 3);
  for (const float v : logits) ASSERT_TRUE(std::isfinite(v));
  // llama.cpp skips a layer without FFN whole (its graph continues before
  // the layer's output): other attention weights there change nothing.
  rewrite(dir / "deci.gguf", dir / "other.gguf", "blk.3.attn_q.weight",
          {"blk.3.attn_q.weight", {64, 64}});
  Session other(Model::load(dir / "other.gguf", {}));
  EXPECT_EQ(other.evaluate(ids, 3), logits);
}

// MiniCPM3's latent attention caches each head's full key (nope and rope
// parts: attention.key_length) and value, not the compressed latent.
TEST(LayerSpecs, LatentAttentionCachesEveryHeadsKeyAndValue) {
  test::TempDir dir;
  write_random_model(small_model("minicpm3"), dir / "m.gguf");
  const auto model = Model::load(dir / "m.gguf", {});
  const ModelHParams& hp = model->decoder().hparams();
  EXPECT_EQ(hp.head_dim_k, 24);  // 16 nope + 8 rope
  EXPECT_EQ(hp.rope.n_dims, 8);
  const KvCacheShape shape = model->decoder().kv_cache_shape(32, 1, KvType::f32);
  for (const KvLayerShape& layer : shape.layers) {
    EXPECT_EQ(layer.k_width, 4 * 24);
    EXPECT_EQ(layer.v_width, 4 * 16);
  }
}

// Copies a deepseek2 file in latent attention's absorbed form (attn_k_b,
// attn_v_b; key_length_mla) into the form converters wrote before the split:
// one attn_kv_b per layer whose head h holds k_b[h] transposed (nope rows of
// kv_lora_rank) then v_b[h] (v rows), every head its own KV head.
void expand_latent_attention(const std::filesystem::path& from, const std::filesystem::path& to) {
  const gguf::GgufFile file = gguf::GgufFile::open(from);
  const ModelHParams hp = ModelHParams::from_gguf(file);
  const int64_t n_head = hp.n_head, kv_rank = hp.kv_lora_rank;
  const int64_t nope = hp.mla_head_dim_k - hp.rope.n_dims, dv = hp.mla_head_dim_v;
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  writer.remove("deepseek2.attention.key_length_mla");
  writer.remove("deepseek2.attention.value_length_mla");
  writer.set("deepseek2.attention.key_length", u32_value(hp.mla_head_dim_k));
  writer.set("deepseek2.attention.value_length", u32_value(dv));
  writer.set("deepseek2.attention.head_count_kv", u32_value(n_head));
  std::vector<std::vector<std::byte>> data;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.ends_with("attn_v_b.weight")) continue;  // written with k_b
    if (!t.name.ends_with("attn_k_b.weight")) {
      writer.add_tensor(t.name, t.type, t.shape);
      data.emplace_back(t.data.begin(), t.data.end());
      continue;
    }
    const std::string prefix = t.name.substr(0, t.name.size() - std::string("k_b.weight").size());
    const auto* k_b = reinterpret_cast<const float*>(t.data.data());
    const auto* v_b =
        reinterpret_cast<const float*>(file.find_tensor(prefix + "v_b.weight")->data.data());
    std::vector<float> kv_b;
    for (int64_t h = 0; h < n_head; ++h) {
      for (int64_t j = 0; j < nope; ++j) {
        for (int64_t i = 0; i < kv_rank; ++i) kv_b.push_back(k_b[(h * kv_rank + i) * nope + j]);
      }
      for (int64_t o = 0; o < dv; ++o) {
        for (int64_t i = 0; i < kv_rank; ++i) kv_b.push_back(v_b[(h * dv + o) * kv_rank + i]);
      }
    }
    writer.add_tensor(prefix + "kv_b.weight", GgmlType::F32, {kv_rank, n_head * (nope + dv)});
    const auto bytes = std::as_bytes(std::span(kv_b));
    data.emplace_back(bytes.begin(), bytes.end());
  }
  writer.begin(to);
  for (const auto& d : data) writer.write_tensor_data(d);
  writer.finish();
}

// DeepSeek's latent attention in the absorbed form caches one latent and
// rope key per token and layer (kv_lora_rank + rope values), where the
// expanded form caches every head's key and value; both give the same
// logits (the same weights, multiplied in another order).
TEST(LayerSpecs, AbsorbedLatentAttentionCachesOneLatentPerToken) {
  test::TempDir dir;
  write_random_model(small_model("deepseek2"), dir / "absorbed.gguf");
  expand_latent_attention(dir / "absorbed.gguf", dir / "expanded.gguf");
  LoadOptions load;
  load.kv_type = KvType::f32;
  const auto absorbed = Model::load(dir / "absorbed.gguf", load);
  const auto expanded = Model::load(dir / "expanded.gguf", load);
  const ModelHParams& hp = absorbed->decoder().hparams();
  EXPECT_EQ(hp.kv_lora_rank, 16);  // n_embd / 4
  EXPECT_EQ(hp.rope.n_dims, 8);
  EXPECT_EQ(hp.mla_head_dim_k, 24);  // 16 nope + 8 rope
  EXPECT_EQ(hp.mla_head_dim_v, 16);
  const KvCacheShape latent = absorbed->decoder().kv_cache_shape(32, 1, KvType::f16);
  for (const KvLayerShape& layer : latent.layers) {
    EXPECT_EQ(layer.k_width, 16 + 8);
    EXPECT_EQ(layer.v_width, 0);
    EXPECT_TRUE(layer.values_in_keys);
  }
  // 2 layers x 32 positions x 24 values x 2 bytes, against 4 heads' keys
  // (24) and values (16) per position and layer.
  EXPECT_EQ(KvCache::bytes_needed(latent), 2u * 32 * 24 * 2);
  EXPECT_EQ(KvCache::bytes_needed(expanded->decoder().kv_cache_shape(32, 1, KvType::f16)),
            2u * 32 * 4 * (24 + 16) * 2);

  const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25, 29};
  const auto a = Session(absorbed).evaluate(ids, 3);
  const auto b = Session(expanded).evaluate(ids, 3);
  ASSERT_EQ(a.size(), b.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 1e-5);
}

// Mistral Large 3's attention temperature multiplies the queries of every
// layer: latent attention's absorbed and expanded forms give the same
// logits with it, and positions before its first step (temperature 1) give
// bit for bit those of the file without it.
TEST(LayerSpecs, LatentAttentionTemperatureInBothForms) {
  test::TempDir dir;
  write_random_model(small_model("deepseek2"), dir / "plain.gguf");
  test::rewrite_metadata(dir / "plain.gguf", dir / "absorbed.gguf", [](gguf::GgufWriter& w) {
    w.set("deepseek2.attention.temperature_scale", gguf::Value(0.5f));
    w.set("deepseek2.attention.temperature_length", u32_value(3));
  });
  expand_latent_attention(dir / "absorbed.gguf", dir / "expanded.gguf");
  LoadOptions load;
  load.kv_type = KvType::f32;
  const auto plain = Model::load(dir / "plain.gguf", load);
  const auto absorbed = Model::load(dir / "absorbed.gguf", load);
  const auto expanded = Model::load(dir / "expanded.gguf", load);
  EXPECT_EQ(absorbed->decoder().hparams().attn_temperature.floor_scale, 3);

  const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25, 29};
  const auto p = Session(plain).evaluate(ids, 3);
  const auto a = Session(absorbed).evaluate(ids, 3);
  const auto b = Session(expanded).evaluate(ids, 3);
  ASSERT_EQ(a.size(), b.size());
  const size_t n_vocab = a.size() / ids.size();
  // Positions 0-2: temperature 1.
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 3 * n_vocab, p.begin()));
  EXPECT_FALSE(std::equal(a.begin() + 3 * n_vocab, a.end(), p.begin() + 3 * n_vocab));
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 1e-5);
}

// Copies `from` into `to` with each layer's ffn_gate_exps and ffn_up_exps
// stacked into ffn_gate_up_exps: per expert its gate rows, then its up rows.
void fuse_gate_up_experts(const std::filesystem::path& from, const std::filesystem::path& to) {
  const gguf::GgufFile file = gguf::GgufFile::open(from);
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  std::vector<std::vector<std::byte>> data;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.ends_with("ffn_up_exps.weight")) continue;  // written with the gate
    if (!t.name.ends_with("ffn_gate_exps.weight")) {
      writer.add_tensor(t.name, t.type, t.shape);
      data.emplace_back(t.data.begin(), t.data.end());
      continue;
    }
    const std::string prefix = t.name.substr(0, t.name.find("ffn_gate_exps"));
    const gguf::TensorInfo* up = file.find_tensor(prefix + "ffn_up_exps.weight");
    const auto n_expert = static_cast<size_t>(t.shape[2]);
    const size_t expert_bytes = t.data.size() / n_expert;
    std::vector<std::byte> bytes;
    for (size_t e = 0; e < n_expert; ++e) {
      for (const gguf::TensorInfo* part : {&t, up}) {
        const auto first = part->data.begin() + static_cast<std::ptrdiff_t>(e * expert_bytes);
        bytes.insert(bytes.end(), first, first + static_cast<std::ptrdiff_t>(expert_bytes));
      }
    }
    writer.add_tensor(prefix + "ffn_gate_up_exps.weight", t.type,
                      {t.shape[0], 2 * t.shape[1], t.shape[2]});
    data.push_back(std::move(bytes));
  }
  writer.begin(to);
  for (const auto& d : data) writer.write_tensor_data(d);
  writer.finish();
}

// llama.cpp's create_tensor_gate_up_exps: a deepseek2 file with the experts'
// gate and up in one stack gives the bits of the same weights apart; a
// family whose llama.cpp loader never reads the fused stack refuses it.
TEST(ModelLoad, FusedGateUpExpertsGiveTheLogitsOfSeparateOnes) {
  test::TempDir dir;
  RandomModelOptions o = small_model("deepseek2");
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    SCOPED_TRACE(ggml_type_name(type));
    o.weight_type = type;
    write_random_model(o, dir / "split.gguf");
    fuse_gate_up_experts(dir / "split.gguf", dir / "fused.gguf");
    ASSERT_NE(gguf::GgufFile::open(dir / "fused.gguf").find_tensor("blk.1.ffn_gate_up_exps.weight"),
              nullptr);
    const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25};
    const auto split = Session(Model::load(dir / "split.gguf", {})).evaluate(ids, 3);
    const auto fused = Session(Model::load(dir / "fused.gguf", {})).evaluate(ids, 3);
    EXPECT_EQ(split, fused);
  }
  write_random_model(small_model("qwen3moe"), dir / "qwen3moe.gguf");
  fuse_gate_up_experts(dir / "qwen3moe.gguf", dir / "qwen3moe-fused.gguf");
  const std::string error = load_error(dir / "qwen3moe-fused.gguf");
  EXPECT_NE(error.find("missing tensor blk.0.ffn_gate_exps.weight"), std::string::npos) << error;
}

// Multi-token-prediction layers (GLM-4.5): block_count counts them after
// the trunk; their tensors are bound and checked, never run and never
// cached, so a file without them gives the same bits. llama.cpp reads no
// scales for them (a file with one is refused), and the families without
// such layers refuse nextn_predict_layers.
TEST(ModelLoad, MtpLayersAreCheckedNotRun) {
  test::TempDir dir;
  write_random_model(small_model("glm4moe"), dir / "mtp.gguf");
  const auto with_mtp = Model::load(dir / "mtp.gguf", {});
  const ModelHParams& hp = with_mtp->decoder().hparams();
  EXPECT_EQ(hp.n_layer, 2);
  ASSERT_EQ(hp.mtp_layers.size(), 1u);
  EXPECT_EQ(with_mtp->decoder().kv_cache_shape(16, 1, KvType::f16).layers.size(), 2u);
  std::string out;
  ASSERT_EQ(test::run_cli("inspect " + (dir / "mtp.gguf").string(), &out), 0) << out;
  EXPECT_NE(out.find("model       glm4moe, 2 layers"), std::string::npos) << out;
  EXPECT_NE(out.find("mtp            1 multi-token-prediction layer(s) after the trunk: checked, "
                     "not run"),
            std::string::npos)
      << out;

  const gguf::GgufFile file = gguf::GgufFile::open(dir / "mtp.gguf");
  ASSERT_NE(file.find_tensor("blk.2.nextn.eh_proj.weight"), nullptr);
  ASSERT_NE(file.find_tensor("blk.2.ffn_gate_exps.weight"), nullptr);
  gguf::GgufWriter trunk;
  for (const gguf::KeyValue& kv : file.metadata()) trunk.set(kv.key, kv.value);
  std::vector<const gguf::TensorInfo*> kept;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.starts_with("blk.2.")) continue;
    trunk.add_tensor(t.name, t.type, t.shape);
    kept.push_back(&t);
  }
  trunk.begin(dir / "trunk.gguf");
  for (const gguf::TensorInfo* t : kept) trunk.write_tensor_data(t->data);
  trunk.finish();
  const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25};
  EXPECT_EQ(Session(with_mtp).evaluate(ids, 3),
            Session(Model::load(dir / "trunk.gguf", {})).evaluate(ids, 3));

  rewrite(dir / "mtp.gguf", dir / "scaled.gguf", "", {"blk.2.attn_q.scale", {1}});
  std::string error = load_error(dir / "scaled.gguf");
  EXPECT_NE(error.find("tensor blk.2.attn_q.scale is not used"), std::string::npos) << error;

  write_random_model(small_model("qwen3moe"), dir / "qwen3moe.gguf");
  rewrite(dir / "qwen3moe.gguf", dir / "nextn.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("qwen3moe.nextn_predict_layers", gguf::Value(uint32_t{1}));
  });
  error = load_error(dir / "nextn.gguf");
  EXPECT_NE(error.find("qwen3moe.nextn_predict_layers 1: multi-token-prediction layers are not "
                       "supported for qwen3moe"),
            std::string::npos)
      << error;
}

// SmallThinker's layers as llama.cpp's loader lays them out: with a window
// key, every layer but the first of each period sees 4096 positions
// (whatever the key says) with the local base, and every 4th layer from the
// first has no RoPE, whatever the period; without one, all full and rotated.
TEST(LayerSpecs, SmallThinkerWindowsAndUnrotatedLayers) {
  test::TempDir dir;
  RandomModelOptions o = small_model("smallthinker");
  o.geometry.n_layer = 8;
  write_random_model(o, dir / "st.gguf");
  const auto layers_of = [&](const std::filesystem::path& path) {
    std::string out;
    const ModelHParams hp = ModelHParams::from_gguf(gguf::GgufFile::open(path));
    for (const LayerSpec& l : hp.layers) {
      out += l.window == 4096 ? 'w' : l.window == 0 ? 'f' : '?';
      out += l.rope == RopeSlot::none ? '-' : l.rope == RopeSlot::local ? 'l' : 'g';
      out += ' ';
    }
    return out;
  };
  EXPECT_EQ(layers_of(dir / "st.gguf"), "f- wl wl wl f- wl wl wl ");
  rewrite(dir / "st.gguf", dir / "period3.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("smallthinker.attention.sliding_window", gguf::Value(uint32_t{16}));
    w.set("smallthinker.attention.sliding_window_pattern", gguf::Value(uint32_t{3}));
  });
  EXPECT_EQ(layers_of(dir / "period3.gguf"), "f- wl wl fg w- wl fg wl ");
  rewrite(dir / "st.gguf", dir / "full.gguf", "", {},
          [](gguf::GgufWriter& w) { w.remove("smallthinker.attention.sliding_window"); });
  EXPECT_EQ(layers_of(dir / "full.gguf"), "fg fg fg fg fg fg fg fg ");
}

// Llama 4's layers as llama.cpp's loader lays them out: chunked attention
// (8192) with the local base in all but the last layer of each period,
// no RoPE in every 4th layer whatever the period, experts every
// interleave_moe_layer_step-th layer; a window of 0 is refused.
TEST(LayerSpecs, Llama4ChunksUnrotatedLayersAndExperts) {
  test::TempDir dir;
  RandomModelOptions o = small_model("llama4");
  o.geometry.n_layer = 8;
  write_random_model(o, dir / "l4.gguf");
  const auto layers_of = [&](const std::filesystem::path& path) {
    std::string out;
    const ModelHParams hp = ModelHParams::from_gguf(gguf::GgufFile::open(path));
    for (const LayerSpec& l : hp.layers) {
      out += l.chunk == 8192 ? 'c' : l.chunk == 0 ? 'f' : '?';
      out += l.rope == RopeSlot::none ? '-' : l.rope == RopeSlot::local ? 'l' : 'g';
      out += ' ';
    }
    return out;
  };
  EXPECT_EQ(layers_of(dir / "l4.gguf"), "cl cl cl f- cl cl cl f- ");
  rewrite(dir / "l4.gguf", dir / "period3.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("llama4.attention.sliding_window_pattern", gguf::Value(uint32_t{3}));
  });
  EXPECT_EQ(layers_of(dir / "period3.gguf"), "cl cl fg c- cl fg cl c- ");
  const auto model = Model::load(dir / "l4.gguf", {});
  EXPECT_EQ(model->decoder().hparams().n_moe_layer_step, 2);
  rewrite(dir / "l4.gguf", dir / "nowindow.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("llama4.attention.sliding_window", gguf::Value(uint32_t{0}));
  });
  const std::string error = load_error(dir / "nowindow.gguf");
  EXPECT_NE(error.find("llama4.attention.sliding_window 0"), std::string::npos) << error;
}

// HY V3's layers as llama.cpp's loader sees them: every FFN tensor
// optional, experts where the router is. The leading routerless layers
// are dense; a dense FFN beside a layer's experts is loaded and never run
// (the same logits); a routerless layer after the experts is refused.
TEST(ModelLoad, HyV3DenseLayersAreTheLeadingRouterlessOnes) {
  test::TempDir dir;
  write_random_model(small_model("hy_v3"), dir / "hy.gguf");
  const auto model = Model::load(dir / "hy.gguf", {});
  EXPECT_EQ(model->decoder().hparams().n_layer_dense_lead, 1);
  const std::vector<TokenId> ids = {1, 5, 9, 13, 17};
  const auto reference = Session(model).evaluate(ids, 2);

  // blk.1 (experts) gains an ffn_up.weight, ffn_gate and ffn_down: copy
  // blk.0's dense matrices under blk.1's names.
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "hy.gguf");
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  std::vector<std::span<const std::byte>> data;
  for (const gguf::TensorInfo& t : file.tensors()) {
    writer.add_tensor(t.name, t.type, t.shape);
    data.push_back(t.data);
  }
  for (const char* matrix : {"ffn_gate", "ffn_up", "ffn_down"}) {
    const gguf::TensorInfo* t = file.find_tensor(std::string("blk.0.") + matrix + ".weight");
    ASSERT_NE(t, nullptr);
    writer.add_tensor(std::string("blk.1.") + matrix + ".weight", t->type, t->shape);
    data.push_back(t->data);
  }
  writer.begin(dir / "beside.gguf");
  for (const auto& d : data) writer.write_tensor_data(d);
  writer.finish();
  EXPECT_EQ(Session(Model::load(dir / "beside.gguf", {})).evaluate(ids, 2), reference);

  RandomModelOptions three = small_model("hy_v3");
  three.geometry.n_layer = 3;
  write_random_model(three, dir / "hy3.gguf");
  rewrite(dir / "hy3.gguf", dir / "late.gguf", "blk.2.ffn_gate_inp.weight");
  const std::string error = load_error(dir / "late.gguf");
  EXPECT_NE(error.find("layer 2 has no experts after layer 1 had them"), std::string::npos)
      << error;
}

// MiMo V2's layers as its converter writes them: sliding-window layers
// with their own KV heads and RoPE base, values half as wide as keys, the
// attention's output scaled, the routerless first layer dense, and an MTP
// layer after the trunk. The converter's sliding_window_pattern has one
// entry per block, MTP layers included, a length llama.cpp's loader refuses
// (it wants the trunk's); Cortiq reads the trunk's part of it. The fused
// Q/K/V of MiMo-V2.5 gives the logits of the split one.
TEST(ModelLoad, Mimo2LayersAsItsConverterWritesThem) {
  test::TempDir dir;
  RandomModelOptions o = small_model("mimo2");
  o.geometry.n_layer = 3;
  write_random_model(o, dir / "m.gguf");
  LoadOptions load;
  load.kv_type = KvType::f32;
  const auto model = Model::load(dir / "m.gguf", load);
  const ModelHParams& hp = model->decoder().hparams();
  EXPECT_EQ(hp.n_layer_dense_lead, 1);
  EXPECT_EQ(hp.mtp_layers.size(), 1u);
  for (const int64_t il : {0, 1}) {
    EXPECT_EQ(hp.layer(il).window, 16) << il;
    EXPECT_EQ(hp.layer(il).rope, RopeSlot::local) << il;
    EXPECT_EQ(hp.layer(il).n_head_kv, 2) << il;
  }
  EXPECT_EQ(hp.layer(2).window, 0);
  EXPECT_EQ(hp.layer(2).rope, RopeSlot::global);
  EXPECT_EQ(hp.layer(2).n_head_kv, 1);
  EXPECT_EQ(hp.layer(0).head_dim_k, 16);
  EXPECT_EQ(hp.layer(0).head_dim_v, 8);
  EXPECT_FLOAT_EQ(hp.attn_output_scale, 0.707f);
  EXPECT_FLOAT_EQ(hp.rope_local.freq_base, 1000.0f);
  const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25};
  const auto reference = Session(model).evaluate(ids, 3);

  const auto with_pattern = [](std::vector<uint32_t> pattern) {
    return set_u32_array("mimo2.attention.sliding_window_pattern", std::move(pattern));
  };
  rewrite(dir / "m.gguf", dir / "per_block.gguf", "", {}, with_pattern({1, 1, 0, 1}));
  EXPECT_EQ(Session(Model::load(dir / "per_block.gguf", load)).evaluate(ids, 3), reference);
  rewrite(dir / "m.gguf", dir / "short.gguf", "", {}, with_pattern({1, 0}));
  std::string error = load_error(dir / "short.gguf");
  EXPECT_NE(error.find("mimo2.attention.sliding_window_pattern has 2 values for 3 layers"),
            std::string::npos)
      << error;

  fuse_qkv(dir / "m.gguf", dir / "fused.gguf");
  ASSERT_NE(gguf::GgufFile::open(dir / "fused.gguf").find_tensor("blk.0.attn_qkv.weight"), nullptr);
  const auto fused = Session(Model::load(dir / "fused.gguf", load)).evaluate(ids, 3);
  ASSERT_EQ(fused.size(), reference.size());
  for (size_t i = 0; i < fused.size(); ++i) ASSERT_NEAR(fused[i], reference[i], 1e-6) << i;

  rewrite(dir / "m.gguf", dir / "late.gguf", "blk.2.ffn_gate_inp.weight");
  error = load_error(dir / "late.gguf");
  EXPECT_NE(error.find("layer 2 has no experts after layer 1 had them"), std::string::npos)
      << error;
}

// Laguna's layers: the first of each sliding_window_pattern period full,
// the others sliding with their own heads and plain RoPE over the whole
// head; the attention gate one value per head or per element as its shape
// says (gen-model writes the per-element form on full layers), any other
// width refused by name, as is a pattern given per layer.
TEST(ModelLoad, LagunaSlidingLayersAndAttentionGates) {
  test::TempDir dir;
  RandomModelOptions o = small_model("laguna");
  o.geometry.n_layer = 3;
  write_random_model(o, dir / "l.gguf");
  const auto model = Model::load(dir / "l.gguf", {});
  const ModelHParams& hp = model->decoder().hparams();
  EXPECT_EQ(hp.layer(0).window, 0);
  EXPECT_EQ(hp.layer(1).window, 16);
  EXPECT_EQ(hp.layer(2).window, 0);
  EXPECT_EQ(hp.layer(1).rope, RopeSlot::local);
  EXPECT_EQ(hp.layer(0).n_head, 4);
  EXPECT_EQ(hp.layer(1).n_head, 6);
  EXPECT_EQ(hp.rope.n_dims, 8);
  EXPECT_EQ(hp.rope_local.n_dims, 16);
  EXPECT_EQ(hp.rope.scaling, RopeScalingType::yarn);
  EXPECT_EQ(hp.rope_local.ext_factor, 0.0f);
  EXPECT_EQ(hp.n_ff_shared_expert, 48);
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "l.gguf");
  EXPECT_EQ(file.find_tensor("blk.0.attn_gate.weight")->shape[1], 4 * 16);  // per element
  EXPECT_EQ(file.find_tensor("blk.1.attn_gate.weight")->shape[1], 6);       // per head

  rewrite(dir / "l.gguf", dir / "odd.gguf", "blk.1.attn_gate.weight",
          {"blk.1.attn_gate.weight", {64, 5}});
  std::string error = load_error(dir / "odd.gguf");
  EXPECT_NE(error.find("blk.1.attn_gate.weight"), std::string::npos) << error;
  rewrite(dir / "l.gguf", dir / "array.gguf", "", {},
          set_u32_array("laguna.attention.sliding_window_pattern", {0, 1, 0}));
  error = load_error(dir / "array.gguf");
  EXPECT_NE(error.find("sliding_window_pattern must be one number"), std::string::npos) << error;
}

// Nemotron-H's layers are each one block, chosen by the per-layer head and
// FFN counts: Mamba-2 (state, no KV), an FFN (neither), attention (KV).
// Experts route alike in every layer: a per-layer top-k that varies
// (Nemotron 3 Puzzle) is refused, a uniform one read; a gate on the
// squared-ReLU experts is a tensor the family does not use. Nemotron 3's
// multi-token-prediction block is bound and checked.
TEST(ModelLoad, NemotronHLayerKindsAndExperts) {
  test::TempDir dir;
  RandomModelOptions o = small_model("nemotron_h_moe");
  o.geometry.n_layer = 3;
  write_random_model(o, dir / "n.gguf");
  const auto model = Model::load(dir / "n.gguf", {});
  const ModelHParams& hp = model->decoder().hparams();
  EXPECT_GT(hp.layer(0).state_width, 0);
  EXPECT_EQ(hp.layer(0).n_head_kv, 0);
  EXPECT_EQ(hp.layer(1).state_width, 0);
  EXPECT_EQ(hp.layer(1).n_head_kv, 0);
  EXPECT_GT(hp.layer(1).n_ff, 0);
  EXPECT_GT(hp.layer(2).n_head_kv, 0);
  EXPECT_EQ(hp.layer(2).rope, RopeSlot::none);
  EXPECT_EQ(hp.router.gating, RouterGating::sigmoid);
  EXPECT_EQ(hp.moe_latent_size, hp.n_embd / 2);
  // Nemotron 3's MTP block, bound and checked: attention and latent-wide
  // experts without projections of their own.
  ASSERT_EQ(hp.mtp_layers.size(), 1u);
  EXPECT_GT(hp.mtp_layers[0].n_head_kv, 0);

  const auto per_layer_used = [](std::vector<uint32_t> used) {
    return set_u32_array("nemotron_h_moe.expert_used_count", std::move(used));
  };
  // One value per block: the three layers and the MTP layer.
  rewrite(dir / "n.gguf", dir / "uniform.gguf", "", {}, per_layer_used({0, 2, 0, 2}));
  EXPECT_EQ(load_error(dir / "uniform.gguf"), "");
  rewrite(dir / "n.gguf", dir / "puzzle.gguf", "", {}, per_layer_used({2, 3, 2, 2}));
  std::string error = load_error(dir / "puzzle.gguf");
  EXPECT_NE(error.find("expert_used_count differs between layers"), std::string::npos) << error;
  rewrite(dir / "n.gguf", dir / "gated.gguf", "",
          {"blk.1.ffn_gate_exps.weight", {o.geometry.n_embd / 2, o.geometry.n_ff, 4}});
  error = load_error(dir / "gated.gguf");
  EXPECT_NE(error.find("blk.1.ffn_gate_exps.weight"), std::string::npos) << error;
  rewrite(dir / "n.gguf", dir / "no_latent_up.gguf", "blk.1.ffn_latent_up.weight");
  error = load_error(dir / "no_latent_up.gguf");
  EXPECT_NE(error.find("blk.1.ffn_latent_up.weight"), std::string::npos) << error;
}

// Which layers are recurrent: attention.recurrent_layers when the file has
// it (one value per layer), else all but each full_attention_interval-th,
// with the family's default interval (MiniMax-01 8, the Qwen hybrids 4).
TEST(HParams, RecurrentLayersByArrayOrInterval) {
  const auto layers = [](const std::function<void(gguf::GgufWriter&)>& edit, int64_t fallback) {
    gguf::GgufWriter w;
    w.set("general.architecture", std::string("minimax-01"));
    if (edit) edit(w);
    w.begin_in_memory();
    const auto bytes = w.finish_in_memory();
    const gguf::GgufFile file = gguf::GgufFile::parse(bytes, "r.gguf");
    return recurrent_layers(HParamReader(file, "minimax-01"), 8, 8, fallback);
  };
  const std::vector<bool> every_eighth = {true, true, true, true, true, true, true, false};
  EXPECT_EQ(layers({}, 8), every_eighth);
  EXPECT_EQ(layers({}, 4), (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_EQ(layers(
                [](gguf::GgufWriter& w) {
                  w.set("minimax-01.full_attention_interval", gguf::Value(uint32_t{2}));
                },
                8),
            (std::vector<bool>{true, false, true, false, true, false, true, false}));
  EXPECT_EQ(
      layers(set_u32_array("minimax-01.attention.recurrent_layers", {0, 1, 1, 0, 1, 1, 1, 1}), 8),
      (std::vector<bool>{false, true, true, false, true, true, true, true}));
  try {
    layers(set_u32_array("minimax-01.attention.recurrent_layers", {1, 0}), 8);
    ADD_FAILURE() << "a short recurrent_layers was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must have one value per layer"), std::string::npos)
        << e.what();
  }
}

// MiniMax-01: the layers attention.recurrent_layers marks are lightning
// attention (its heads' matrices as state, no KV rows), full_attention_interval
// (default 8) decides when the key is absent; residual_scale is required;
// one layer is refused (its decays divide by block_count - 1).
TEST(ModelLoad, Minimax01LayersAndResidualScale) {
  test::TempDir dir;
  RandomModelOptions o = small_model("minimax-01");
  o.geometry.n_layer = 3;
  write_random_model(o, dir / "m.gguf");
  const auto model = Model::load(dir / "m.gguf", {});
  const ModelHParams& hp = model->decoder().hparams();
  for (const int64_t il : {0, 1}) {
    EXPECT_EQ(hp.layer(il).state_width, hp.n_head * hp.head_dim_k * hp.head_dim_k) << il;
    EXPECT_EQ(hp.layer(il).n_head_kv, 0) << il;
    EXPECT_EQ(hp.layer(il).recurrent, RecurrentKind::lightning_attention) << il;
  }
  EXPECT_EQ(hp.layer(2).state_width, 0);
  EXPECT_GT(hp.layer(2).n_head_kv, 0);
  EXPECT_FLOAT_EQ(hp.residual_scale, 3.5565588f);

  // No recurrent_layers: every layer but each eighth is recurrent.
  rewrite(dir / "m.gguf", dir / "interval.gguf", "", {},
          [](gguf::GgufWriter& w) { w.remove("minimax-01.attention.recurrent_layers"); });
  std::string error = load_error(dir / "interval.gguf");
  EXPECT_NE(error.find("blk.2.attn_norm_2.weight"), std::string::npos) << error;
  rewrite(dir / "m.gguf", dir / "no_scale.gguf", "", {},
          [](gguf::GgufWriter& w) { w.remove("minimax-01.residual_scale"); });
  error = load_error(dir / "no_scale.gguf");
  EXPECT_NE(error.find("minimax-01.residual_scale"), std::string::npos) << error;
  rewrite(dir / "m.gguf", dir / "one.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("minimax-01.block_count", gguf::Value(uint32_t{1}));
    gguf::Array array = gguf::Array::of(gguf::ValueType::u32);
    std::get<std::vector<uint32_t>>(array.items) = {1};
    w.set("minimax-01.attention.recurrent_layers", gguf::Value(array));
  });
  error = load_error(dir / "one.gguf");
  EXPECT_NE(error.find("at least two layers"), std::string::npos) << error;
}

// Kimi Linear: the layers with no KV heads are Kimi Delta Attention (three
// convolutions' inputs and a d x d matrix per head as state), the others
// latent attention with one unrotated latent row per position. The
// converter's [taps, 1, channels, 1] convolutions and [1, H] ssm_a read the
// same with the dimensions of one dropped, bit for bit, and value_length
// (which its converter sets to the head_dim) changes nothing; any other
// shape is refused naming the tensor, as is a file without key_length_mla.
TEST(ModelLoad, KimiLinearLayersAndSqueezedConvolutions) {
  test::TempDir dir;
  RandomModelOptions o = small_model("kimi-linear");
  o.geometry.n_layer = 3;
  write_random_model(o, dir / "k.gguf");
  const auto model = Model::load(dir / "k.gguf", {});
  const ModelHParams& hp = model->decoder().hparams();
  const int64_t d = hp.ssm.d_state, width = hp.ssm.n_head * d;
  ASSERT_EQ(hp.ssm.n_head, o.geometry.n_head);
  for (const int64_t il : {0, 1}) {
    EXPECT_EQ(hp.layer(il).recurrent, RecurrentKind::kimi_delta_attention) << il;
    EXPECT_EQ(hp.layer(il).n_head_kv, 0) << il;
    EXPECT_EQ(hp.layer(il).state_width, 3 * 3 * width + hp.ssm.n_head * d * d) << il;
  }
  EXPECT_EQ(hp.layer(2).state_width, 0);
  EXPECT_EQ(hp.layer(2).n_head_kv, 1);
  EXPECT_EQ(hp.layer(2).rope, RopeSlot::none);
  EXPECT_TRUE(hp.layer(2).values_in_keys);
  EXPECT_EQ(hp.layer(2).head_dim_k, hp.kv_lora_rank + hp.rope.n_dims);
  EXPECT_FLOAT_EQ(hp.attention_scale, 1.0f / std::sqrt(static_cast<float>(hp.mla_head_dim_k)));

  // Every convolution [taps, channels] and ssm_a [H]: the same values.
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "k.gguf");
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  for (const gguf::TensorInfo& t : file.tensors()) {
    std::vector<int64_t> shape;
    for (const int64_t dim : t.shape) {
      if (dim != 1) shape.push_back(dim);
    }
    const bool squeeze =
        t.name.find("ssm_conv1d_") != std::string::npos || t.name.ends_with(".ssm_a");
    writer.add_tensor(t.name, t.type, squeeze ? shape : t.shape);
  }
  writer.begin(dir / "squeezed.gguf");
  for (const gguf::TensorInfo& t : file.tensors()) writer.write_tensor_data(t.data);
  writer.finish();
  const auto squeezed = Model::load(dir / "squeezed.gguf", {});
  const std::vector<TokenId> ids = {5, 9, 14, 3, 27, 8, 11, 40, 2, 19};
  Session a(model), b(squeezed);
  EXPECT_TRUE(bitwise_equal(a.evaluate(ids), b.evaluate(ids)));

  // llama.cpp's converter writes the model's head_dim as value_length (72
  // for Kimi-Linear-48B), which neither engine reads: the same model.
  rewrite(dir / "k.gguf", dir / "value_length.gguf", "", {}, [](gguf::GgufWriter& w) {
    w.set("kimi-linear.attention.value_length", gguf::Value(uint32_t{72}));
  });
  Session fresh(model), value_length(Model::load(dir / "value_length.gguf", {}));
  EXPECT_TRUE(bitwise_equal(fresh.evaluate(ids), value_length.evaluate(ids)));

  const std::string conv = "blk.1.ssm_conv1d_k.weight";
  rewrite(dir / "k.gguf", dir / "wide_conv.gguf", conv, {conv, {hp.ssm.conv_taps, width + 1}});
  std::string error = load_error(dir / "wide_conv.gguf");
  EXPECT_NE(error.find(conv), std::string::npos) << error;
  rewrite(dir / "k.gguf", dir / "no_mla_key.gguf", "", {},
          [](gguf::GgufWriter& w) { w.remove("kimi-linear.attention.key_length_mla"); });
  error = load_error(dir / "no_mla_key.gguf");
  EXPECT_NE(error.find("kimi-linear.attention.key_length_mla"), std::string::npos) << error;
}

// RWKV-6 and RWKV-7: every layer recurrent, its state the time mix's and
// the channel mix's shifted rows and each head's matrix, no KV rows. RWKV-6's
// five lerps apart (time_mix_lerp_{w,k,v,r,g}, as llama.cpp also reads them)
// give the fused tensor's logits bit for bit. A token shift other than 2,
// no head size or a missing low rank is refused naming the key; RWKV-7's
// first layer's value mix, required by llama.cpp though never run, too.
TEST(ModelLoad, RwkvStateLerpsAndRequiredKeys) {
  test::TempDir dir;
  for (const char* arch : {"rwkv6", "rwkv7"}) {
    SCOPED_TRACE(arch);
    RandomModelOptions o = small_model(arch);
    o.geometry.n_layer = 2;
    write_random_model(o, dir / "r.gguf");
    const auto model = Model::load(dir / "r.gguf", {});
    const ModelHParams& hp = model->decoder().hparams();
    for (const int64_t il : {0, 1}) {
      EXPECT_EQ(hp.layer(il).state_width, 2 * hp.n_embd + hp.n_embd * hp.rwkv.head_size) << il;
      EXPECT_EQ(hp.layer(il).n_head_kv, 0) << il;
    }
    for (const KvLayerShape& layer :
         model->decoder().kv_cache_shape(1, 64, KvType::f32, 1).layers) {
      EXPECT_EQ(layer.k_width + layer.v_width, 0);
    }
    const std::string p = std::string(arch) + ".";
    rewrite(dir / "r.gguf", dir / "shift.gguf", "", {},
            [&](gguf::GgufWriter& w) { w.set(p + "token_shift_count", gguf::Value(uint32_t{1})); });
    std::string error = load_error(dir / "shift.gguf");
    EXPECT_NE(error.find("token_shift_count"), std::string::npos) << error;
    rewrite(dir / "r.gguf", dir / "no_head.gguf", "", {},
            [&](gguf::GgufWriter& w) { w.remove(p + "wkv.head_size"); });
    error = load_error(dir / "no_head.gguf");
    EXPECT_NE(error.find(p + "wkv.head_size"), std::string::npos) << error;
    const std::string rank =
        p + (arch == std::string("rwkv6") ? "time_mix_extra_dim" : "attention.gate_lora_rank");
    rewrite(dir / "r.gguf", dir / "no_rank.gguf", "", {},
            [&](gguf::GgufWriter& w) { w.remove(rank); });
    error = load_error(dir / "no_rank.gguf");
    EXPECT_NE(error.find(rank), std::string::npos) << error;
  }
  rewrite(dir / "r.gguf", dir / "no_v1.gguf", "blk.0.time_mix_v1.weight");
  const std::string error = load_error(dir / "no_v1.gguf");
  EXPECT_NE(error.find("blk.0.time_mix_v1.weight"), std::string::npos) << error;

  // RWKV-6 with its lerps apart.
  write_random_model(small_model("rwkv6"), dir / "fused.gguf");
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "fused.gguf");
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  std::vector<std::span<const std::byte>> data;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (!t.name.ends_with("time_mix_lerp_fused.weight")) {
      writer.add_tensor(t.name, t.type, t.shape);
      data.push_back(t.data);
      continue;
    }
    ASSERT_EQ(t.type, GgmlType::F32);
    const std::string layer = t.name.substr(0, t.name.find("time_mix_lerp_fused"));
    const size_t part_bytes = t.data.size() / 5;
    for (size_t p = 0; p < 5; ++p) {
      writer.add_tensor(layer + "time_mix_lerp_" + "wkvrg"[p] + ".weight", GgmlType::F32,
                        {t.shape[0], 1, 1});
      data.push_back(t.data.subspan(p * part_bytes, part_bytes));
    }
  }
  writer.begin(dir / "apart.gguf");
  for (const auto& bytes : data) writer.write_tensor_data(bytes);
  writer.finish();
  const std::vector<TokenId> ids = {5, 9, 14, 3, 27, 8, 11, 40, 2, 19};
  Session fused(Model::load(dir / "fused.gguf", {})), apart(Model::load(dir / "apart.gguf", {}));
  EXPECT_TRUE(bitwise_equal(fused.evaluate(ids), apart.evaluate(ids)));
}

// Qwen3-Next's older files carry one fused ssm_in (per key head: q, k, its
// value heads' v, then their z) instead of attn_qkv and attn_gate: the same
// rows in another order, so the same logits, bit for bit. Which layers are
// Gated DeltaNet follows attention.recurrent_layers when the file has it.
TEST(ModelLoad, Qwen3NextFusedSsmInAndRecurrentLayers) {
  test::TempDir dir;
  RandomModelOptions o = small_model("qwen3next");
  o.geometry.n_embd = 256;  // two key heads of two value heads each
  o.geometry.n_layer = 3;
  write_random_model(o, dir / "q.gguf");
  const auto model = Model::load(dir / "q.gguf", {});
  const ModelHParams& hp = model->decoder().hparams();
  EXPECT_GT(hp.layer(0).state_width, 0);
  EXPECT_GT(hp.layer(1).state_width, 0);
  EXPECT_EQ(hp.layer(1).n_head_kv, 0);
  EXPECT_EQ(hp.layer(2).state_width, 0);
  EXPECT_GT(hp.layer(2).n_head_kv, 0);
  ASSERT_EQ(hp.ssm.n_group, 2);
  ASSERT_EQ(hp.ssm.n_head, 4);

  const auto dk = static_cast<size_t>(hp.ssm.d_state);
  const auto n_k = static_cast<size_t>(hp.ssm.n_group);
  const size_t dv = static_cast<size_t>(hp.ssm.d_inner) / n_k;
  const auto row = static_cast<size_t>(hp.n_embd);
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "q.gguf");
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  std::vector<std::vector<float>> data;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::string name = t.name;
    if (name.ends_with("attn_gate.weight")) continue;
    std::vector<float> values(static_cast<size_t>(t.n_elements()));
    std::memcpy(values.data(), t.data.data(), t.n_bytes);
    if (!name.ends_with("attn_qkv.weight")) {
      writer.add_tensor(name, t.type, t.shape);
      data.push_back(std::move(values));
      continue;
    }
    const std::string layer = name.substr(0, name.size() - std::string("attn_qkv.weight").size());
    const gguf::TensorInfo* gate = file.find_tensor(layer + "attn_gate.weight");
    ASSERT_NE(gate, nullptr);
    const auto* z = reinterpret_cast<const float*>(gate->data.data());
    std::vector<float> fused;
    const auto rows = [&](const float* from, size_t first, size_t n) {
      fused.insert(fused.end(), from + first * row, from + (first + n) * row);
    };
    for (size_t kh = 0; kh < n_k; ++kh) {
      rows(values.data(), kh * dk, dk);                 // q
      rows(values.data(), n_k * dk + kh * dk, dk);      // k
      rows(values.data(), 2 * n_k * dk + kh * dv, dv);  // v
      rows(z, kh * dv, dv);                             // z
    }
    writer.add_tensor(layer + "ssm_in.weight", GgmlType::F32,
                      {hp.n_embd, static_cast<int64_t>(fused.size() / row)});
    data.push_back(std::move(fused));
  }
  writer.begin(dir / "fused.gguf");
  for (const auto& values : data) writer.write_tensor_data(std::as_bytes(std::span(values)));
  writer.finish();
  const auto fused_model = Model::load(dir / "fused.gguf", {});
  const std::vector<TokenId> ids = {5, 9, 14, 3, 27, 8, 11, 40, 2, 19};
  Session a(model), b(fused_model);
  EXPECT_TRUE(bitwise_equal(a.evaluate(ids), b.evaluate(ids)));

  const auto recurrent_layers = [](std::vector<uint32_t> flags) {
    return set_u32_array("qwen3next.attention.recurrent_layers", std::move(flags));
  };
  // The interval's layers, stated: the same model.
  rewrite(dir / "q.gguf", dir / "same.gguf", "", {}, recurrent_layers({1, 1, 0, 0}));
  EXPECT_EQ(load_error(dir / "same.gguf"), "");
  // Layer 1 attending: its Gated DeltaNet tensors are not the family's.
  rewrite(dir / "q.gguf", dir / "other.gguf", "", {}, recurrent_layers({1, 0, 0, 0}));
  const std::string error = load_error(dir / "other.gguf");
  EXPECT_NE(error.find("blk.1."), std::string::npos) << error;
}

// LFM2's short convolutions and Mamba-2's layers keep a state per sequence
// that cannot be cut back: a session reuses its history only when the new
// prompt extends all of it, and otherwise forwards again from the start;
// either way the tokens and logits are a fresh session's, bit for bit.
class HybridState : public ::testing::TestWithParam<const char*> {
 protected:
  // The family's three-layer random model, written once per test.
  std::filesystem::path model_file() {
    const auto path = dir_ / "model.gguf";
    if (!std::filesystem::exists(path)) {
      RandomModelOptions o = small_model(GetParam());
      o.geometry.n_layer = 3;
      write_random_model(o, path);
    }
    return path;
  }
  // It loaded with an f32 KV cache (and `chunk` prefill rows when given).
  std::shared_ptr<const Model> load_model(int64_t chunk = 0) {
    LoadOptions load;
    load.kv_type = KvType::f32;
    if (chunk > 0) load.chunk_size = chunk;
    return Model::load(model_file(), load);
  }

 private:
  test::TempDir dir_;
};

TEST_P(HybridState, ReusesOnlyAHistoryItExtends) {
  const auto model = load_model();
  EXPECT_GT(model->decoder().hparams().layer(0).state_width, 0);
  const GenerateOptions greedy = test::greedy(6);
  const auto ids = [](TokenId first, int n) {
    std::vector<TokenId> v;
    for (int i = 0; i < n; ++i) v.push_back(first + 7 * i % 97);
    return v;
  };
  const std::vector<TokenId> turn1 = ids(3, 20);
  Session chat(model);
  const auto r1 = chat.generate(std::span<const TokenId>(turn1), greedy);
  std::vector<TokenId> turn2 = turn1;
  turn2.insert(turn2.end(), r1.tokens.begin(), r1.tokens.end());
  const auto extra = ids(50, 8);
  turn2.insert(turn2.end(), extra.begin(), extra.end());
  const auto r2 = chat.generate(std::span<const TokenId>(turn2), greedy);
  EXPECT_EQ(r2.cached_tokens, 20 + 6 - 1);
  EXPECT_EQ(r2.tokens, Session(model).generate(std::span<const TokenId>(turn2), greedy).tokens);

  std::vector<TokenId> diverging(turn1.begin(), turn1.begin() + 12);
  const auto tail = ids(99, 9);
  diverging.insert(diverging.end(), tail.begin(), tail.end());
  const auto rd = chat.generate(std::span<const TokenId>(diverging), greedy);
  EXPECT_EQ(rd.cached_tokens, 0);
  EXPECT_EQ(rd.tokens, Session(model).generate(std::span<const TokenId>(diverging), greedy).tokens);

  Session cut(model);
  const auto all = ids(1, 24);
  cut.append(all);
  cut.truncate(10);
  const auto next = ids(40, 5);
  const std::vector<float> after_cut = cut.evaluate(next);
  Session fresh(model);
  fresh.append(std::span<const TokenId>(all).first(10));
  const std::vector<float> expected = fresh.evaluate(next);
  ASSERT_EQ(after_cut.size(), expected.size());
  EXPECT_EQ(std::memcmp(after_cut.data(), expected.data(), expected.size() * sizeof(float)), 0);
}

// A turn's prompt leaves a state snapshot before its last token: the next
// turn that keeps the prompt but revises the reply (or regenerates the
// same prompt) resumes there instead of forwarding everything again, and
// gives a fresh session's tokens and logits, bit for bit.
TEST_P(HybridState, ResumesFromTheSnapshotAtTheEndOfAPrompt) {
  const auto model = load_model();
  const GenerateOptions greedy = test::greedy(6);
  std::vector<TokenId> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(3 + 7 * i % 97);
  Session chat(model);
  chat.generate(std::span<const TokenId>(prompt), greedy);
  std::vector<TokenId> revised = prompt;
  for (const TokenId id : {11, 12, 13, 14, 15, 16, 17}) revised.push_back(id);
  const auto resumed = chat.generate(std::span<const TokenId>(revised), greedy);
  EXPECT_EQ(resumed.cached_tokens, 19);
  Session fresh(model);
  EXPECT_EQ(resumed.tokens, fresh.generate(std::span<const TokenId>(revised), greedy).tokens);
  const std::vector<TokenId> next = {21, 22, 23};
  EXPECT_TRUE(bitwise_equal(chat.evaluate(next), fresh.evaluate(next)));

  // The same prompt again: from its own snapshot, one token forwarded.
  Session again(model);
  const auto first = again.generate(std::span<const TokenId>(prompt), greedy);
  const auto second = again.generate(std::span<const TokenId>(prompt), greedy);
  EXPECT_EQ(second.cached_tokens, 19);
  EXPECT_EQ(second.tokens, first.tokens);
}

// A generation cancelled inside its prompt keeps the whole chunks it
// forwarded, with the state they advanced and nothing more: the same prompt
// then resumes after them and gives a fresh session's tokens and logits.
TEST_P(HybridState, CancelledInThePromptResumesAfterItsWholeChunks) {
  const auto model = load_model(/*chunk=*/8);
  const GenerateOptions greedy = test::greedy(5);
  std::vector<TokenId> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + 11 * i % 97);
  Session chat(model);
  GenerateOptions cancelling = greedy;
  cancelling.on_prefill = [](int64_t done, int64_t) { return done < 16; };
  const auto cancelled = chat.generate(std::span<const TokenId>(prompt), cancelling);
  EXPECT_EQ(cancelled.finish_reason, FinishReason::cancelled);
  EXPECT_TRUE(cancelled.tokens.empty());
  EXPECT_EQ(chat.history().size(), 16u);
  const auto resumed = chat.generate(std::span<const TokenId>(prompt), greedy);
  EXPECT_EQ(resumed.cached_tokens, 16);
  Session fresh(model);
  EXPECT_EQ(resumed.tokens, fresh.generate(std::span<const TokenId>(prompt), greedy).tokens);
  const std::vector<TokenId> next = {21, 22, 23};
  EXPECT_TRUE(bitwise_equal(chat.evaluate(next), fresh.evaluate(next)));
}

// The recurrent blocks split their convolutions by channel and their scans
// by head (or channel) across threads: 1, 2 and 3 threads give the same bits.
TEST_P(HybridState, ThreadCountChangesNoBits) {
  std::vector<float> reference;
  for (const int threads : {1, 2, 3}) {
    LoadOptions load;
    load.threads = threads;
    const auto model = Model::load(model_file(), load);
    Session session(model);
    const auto logits = session.evaluate(walk_ids(), 16);
    if (reference.empty()) {
      reference = logits;
    } else {
      EXPECT_TRUE(bitwise_equal(logits, reference)) << threads << " threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HybridState,
                         ::testing::Values("lfm2", "lfm2moe", "mamba2", "granitehybrid",
                                           "nemotron_h", "nemotron_h_moe", "qwen3next", "qwen35",
                                           "qwen35moe", "falcon-h1", "mamba", "jamba", "plamo2",
                                           "minimax-01", "kimi-linear", "rwkv6", "rwkv7"));

// inspect names each recurrent layer's block and shapes, what runs beside
// it, and which layers have experts when the file decides (Jamba).
TEST(LayerSpecs, InspectDescribesRecurrentLayers) {
  test::TempDir dir;
  const auto describe = [&](const char* arch) {
    RandomModelOptions o = small_model(arch);
    o.geometry.n_layer = 4;
    write_random_model(o, dir / "m.gguf");
    std::string out;
    EXPECT_EQ(test::run_cli("inspect " + (dir / "m.gguf").string(), &out), 0) << out;
    return out;
  };
  std::string out = describe("jamba");
  EXPECT_NE(out.find("layer 0        Mamba: inner 128, state 16, dt rank 4, 4 taps (state 2432 "
                     "floats), ff 96"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("layer 1        Mamba: inner 128, state 16, dt rank 4, 4 taps (state 2432 "
                     "floats), 4 experts (2 per token) x ff 96"),
            std::string::npos)
      << out;
  out = describe("falcon-h1");
  EXPECT_NE(out.find("Mamba-2: inner 128 in 8 heads, state 16, 1 group(s), 4 taps (state 2528 "
                     "floats), beside attention: 4 heads (2 KV) x 16"),
            std::string::npos)
      << out;
  out = describe("nemotron_h_moe");
  EXPECT_NE(out.find("layer 1        no attention, 4 experts"), std::string::npos) << out;
  EXPECT_NE(out.find("layer 2        4 heads (2 KV) x 16, no FFN"), std::string::npos) << out;
  out = describe("qwen35");
  EXPECT_NE(out.find("Gated DeltaNet: 1 key heads, 2 value heads of 16, 4 taps"), std::string::npos)
      << out;
}

TEST(LayerSpecs, InspectShowsEachLayersDescriptionAndTheKvMemory) {
  test::TempDir dir;
  RandomModelOptions o = small_model("gemma2");
  o.geometry.n_layer = 3;
  o.geometry.n_ctx = 8192;
  write_random_model(o, dir / "g2.gguf");
  std::string out;
  ASSERT_EQ(test::run_cli("inspect " + (dir / "g2.gguf").string(), &out), 0) << out;
  EXPECT_NE(out.find("model       gemma2, 3 layers, n_embd 64"), std::string::npos) << out;
  EXPECT_NE(out.find("layer 0        4 heads (2 KV) x 16, ff 96, window 16, local RoPE"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("layer 1        4 heads (2 KV) x 16, ff 96, full attention, global RoPE"),
            std::string::npos);
  // 3 layers x (32 + 32) values x 2 bytes.
  EXPECT_NE(out.find("KV cache       384 bytes per position (f16), 3.00 MiB at the trained "
                     "context 8192"),
            std::string::npos)
      << out;
  // The two window layers keep 15 + 2 x 512 + 15 positions (66 blocks):
  // (8192 + 2 x 1056) x 128 bytes.
  EXPECT_NE(out.find("1.26 MiB there as a session keeps it: the window layers hold 1056 "
                     "positions (window 16, chunk 512), not the context"),
            std::string::npos)
      << out;
}

// Every family: 64 positions (gen-model's 16-position windows crossed four
// times) prefilled in one chunk, in chunks of 1, 7 and 64, split across two
// calls, and decoded token by token give the same bits.
TEST(FamilyBatchInvariance, EveryFamilyAcrossItsWindowEdges) {
  const std::vector<TokenId> ids = walk_ids();
  for (const Family* family : families()) {
    SCOPED_TRACE(std::string(family->arch));
    if (family->encoder) continue;  // EncoderFamilies.*
    const auto model = test::load_test_model({.arch = std::string(family->arch)}, 2, KvType::f16);
    Session reference(model);
    const auto one_chunk = reference.evaluate(ids, 64);
    for (const int64_t chunk : {1, 7}) {
      Session s(model);
      EXPECT_TRUE(bitwise_equal(s.evaluate(ids, chunk), one_chunk)) << "chunk " << chunk;
    }
    // A second turn that reuses the first's cache past the window edge.
    Session turns(model);
    auto first = turns.evaluate(std::span(ids).first(40), 64);
    const auto rest = turns.evaluate(std::span(ids).subspan(40), 64);
    first.insert(first.end(), rest.begin(), rest.end());
    EXPECT_TRUE(bitwise_equal(first, one_chunk));
    // Greedy decoding: every generated token is the argmax prefill gives
    // (among the tokens ignore_eos leaves, as a random model may favour EOS).
    Session gen(model);
    GenerateOptions greedy;
    greedy.sampling.temperature = 0;
    greedy.max_tokens = 24;
    greedy.ignore_eos = true;
    const auto prompt = std::span<const TokenId>(ids).first(30);
    const auto result = gen.generate(prompt, greedy);
    std::vector<TokenId> all(prompt.begin(), prompt.end());
    all.insert(all.end(), result.tokens.begin(), result.tokens.end());
    Session eval(model);
    const auto logits = eval.evaluate(all, 64);
    const auto n_vocab = static_cast<size_t>(model->n_vocab());
    for (size_t i = 0; i < result.tokens.size(); ++i) {
      const float* begin = logits.data() + (prompt.size() - 1 + i) * n_vocab;
      std::vector<float> row(begin, begin + n_vocab);
      for (const TokenId eog : model->tokenizer().vocab().end_of_generation) {
        row[static_cast<size_t>(eog)] = -std::numeric_limits<float>::infinity();
      }
      EXPECT_EQ(std::max_element(row.begin(), row.end()) - row.begin(), result.tokens[i])
          << "token " << i;
    }
  }
}

// A prefill chunk shorter than the window bounds the window layers' KV rows
// by the window (plus the chunk), not the context. The logits stay those of
// a cache kept whole, bit for bit: across the window edge, and across turns
// whose reused history is kept, cut shallow (kept) or cut below what the
// window layers still hold (forwarded again).
TEST(FamilyBatchInvariance, BoundedWindowsGiveTheLogitsOfAWholeCache) {
  const std::vector<TokenId> ids = walk_ids();
  int windowed = 0;
  for (const Family* family : families()) {
    SCOPED_TRACE(std::string(family->arch));
    const test::TestModelSpec spec{.arch = std::string(family->arch)};
    const auto whole = test::load_test_model(spec, 2, KvType::f16);  // chunk 512: kept whole
    // Windows shorter than the context (SmallThinker's are always 4096).
    const auto& layers = whole->hparams().layers;
    if (std::none_of(layers.begin(), layers.end(),
                     [&](const LayerSpec& l) { return l.window > 0 && l.window < spec.n_ctx; })) {
      continue;
    }
    ++windowed;
    constexpr int64_t kChunk = 4;
    const auto bounded = test::load_test_model(spec, 2, KvType::f16, kChunk);
    KvCacheShape shape = bounded->decoder().kv_cache_shape(spec.n_ctx, 1, KvType::f16);
    const uint64_t whole_bytes = KvCache::bytes_needed(shape);
    shape.n_ubatch = kChunk;
    EXPECT_LT(KvCache::bytes_needed(shape), whole_bytes);

    const auto one_chunk = Session(whole).evaluate(ids, 64);
    EXPECT_TRUE(bitwise_equal(Session(bounded).evaluate(ids, 64), one_chunk));

    GenerateOptions greedy;
    greedy.sampling.temperature = 0;
    greedy.max_tokens = 4;
    greedy.ignore_eos = true;
    Session turns(bounded);
    // Each turn's reply is the one a fresh session with a whole cache gives.
    const auto turn = [&](std::span<const TokenId> prompt, int64_t expected_cached) {
      const auto result = turns.generate(prompt, greedy);
      EXPECT_EQ(result.cached_tokens, expected_cached);
      EXPECT_EQ(result.tokens, Session(whole).generate(prompt, greedy).tokens);
    };
    const auto ids_span = std::span<const TokenId>(ids);
    turn(ids_span.first(40), 0);
    std::vector<TokenId> prompt(turns.history().begin(), turns.history().end());
    prompt.insert(prompt.end(), ids.begin() + 40, ids.begin() + 50);
    turn(prompt, static_cast<int64_t>(turns.history().size()));  // kept whole
    prompt.assign(turns.history().begin(), turns.history().end() - 2);
    prompt.insert(prompt.end(), ids.begin() + 50, ids.begin() + 54);
    turn(prompt, static_cast<int64_t>(turns.history().size()) - 2);  // a shallow cut
    prompt.assign(ids.begin(), ids.begin() + 8);
    prompt.insert(prompt.end(), ids.begin() + 54, ids.end());
    turn(prompt, 0);  // below what the window layers hold: forwarded again
  }
  EXPECT_GT(windowed, 0);
}

// Gemma 4's KV-shared layers (gen-model: the last two of four) keep no
// cache rows and attend over the cache of the last earlier layer of their
// kind, window rows included: the logits are batch invariant and those of a
// whole cache with the window layers' rows bounded. MoE layers and
// non-causal files are refused.
TEST(LayerSpecs, Gemma4SharedKvLayersReadAnEarlierLayersCache) {
  const test::TestModelSpec spec{.arch = "gemma4", .n_layer = 4};
  const auto whole = test::load_test_model(spec, 2, KvType::f16);
  const KvCacheShape shape = whole->decoder().kv_cache_shape(32, 1, KvType::f32);
  ASSERT_EQ(shape.n_layer(), 4);
  const int64_t widths[] = {32, 64, 0, 0};  // 2 KV heads of 16 (local) and 32 (global)
  for (size_t il = 0; il < 4; ++il) EXPECT_EQ(shape.layers[il].k_width, widths[il]) << il;
  const std::vector<TokenId> ids = walk_ids();
  const auto one_chunk = Session(whole).evaluate(ids, 64);
  for (const int64_t chunk : {1, 7}) {
    EXPECT_TRUE(bitwise_equal(Session(whole).evaluate(ids, chunk), one_chunk)) << chunk;
  }
  const auto bounded = test::load_test_model(spec, 2, KvType::f16, 4);
  EXPECT_TRUE(bitwise_equal(Session(bounded).evaluate(ids, 64), one_chunk));

  test::TempDir dir;
  RandomModelOptions o = small_model("gemma4");
  write_random_model(o, dir / "gemma4.gguf");
  rewrite(dir / "gemma4.gguf", dir / "moe.gguf", "", {"blk.0.ffn_gate_inp.weight", {64, 4}});
  EXPECT_NE(load_error(dir / "moe.gguf").find("mixture-of-experts"), std::string::npos);
  // Bidirectional sliding-window layers (llama.cpp's non_causal_type SWA_ONLY).
  rewrite(dir / "gemma4.gguf", dir / "non_causal.gguf", "", {},
          [](gguf::GgufWriter& w) { w.set("gemma4.attention.causal", gguf::Value(false)); });
  EXPECT_NE(load_error(dir / "non_causal.gguf").find("attention.causal"), std::string::npos);
}

// Phi-3's LongRoPE: the long factors when the context per sequence exceeds
// rope.scaling.original_context_length (gen-model: a quarter of the trained
// context, 32 of 128 here), else the short ones; a file whose long factors
// are its short ones gives, with a long context, the short-context logits.
TEST(LongRope, Phi3ChoosesItsFactorsByTheContext) {
  test::TempDir dir;
  write_random_model(small_model("phi3", OptionalTensors::all), dir / "a.gguf");
  std::vector<float> short_factors;
  {
    const gguf::GgufFile file = gguf::GgufFile::open(dir / "a.gguf");
    const gguf::TensorInfo* t = file.find_tensor("rope_factors_short.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_NE(file.find_tensor("rope_factors_long.weight"), nullptr);
    short_factors.resize(t->data.size() / sizeof(float));
    std::memcpy(short_factors.data(), t->data.data(), t->data.size());
  }
  rewrite(
      dir / "a.gguf", dir / "b.gguf", "rope_factors_long.weight",
      {"rope_factors_long.weight", {static_cast<int64_t>(short_factors.size())}, short_factors});
  const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25, 29};
  const auto logits = [&](const std::filesystem::path& path, int64_t context) {
    LoadOptions load;
    load.kv_type = KvType::f32;
    load.context = context;
    Session session(Model::load(path, load));
    return session.evaluate(ids, 4);
  };
  const auto short_ctx = logits(dir / "a.gguf", 32);
  const auto long_ctx = logits(dir / "a.gguf", 33);
  EXPECT_FALSE(bitwise_equal(short_ctx, long_ctx));
  EXPECT_TRUE(bitwise_equal(logits(dir / "b.gguf", 33), short_ctx));
  EXPECT_TRUE(bitwise_equal(logits(dir / "b.gguf", 32), short_ctx));
}

// Phi-3's fused ffn_up ([n_embd, 2 * n_ff]: gate rows, then up rows) gives
// the SwiGLU of the same rows as separate gate and up matrices.
TEST(FfnBlock, FusedGateUpEqualsSeparateGateAndUp) {
  ModelHParams hp;
  hp.n_embd = 8;
  hp.layers.push_back(LayerSpec{.n_ff = 6});
  const std::vector<float> gate = test::normal_values(1, 6 * 8);
  const std::vector<float> up = test::normal_values(2, 6 * 8);
  const std::vector<float> down = test::normal_values(3, 8 * 6);
  std::vector<float> fused = gate;
  fused.insert(fused.end(), up.begin(), up.end());
  const auto view = [](const std::vector<float>& w, int64_t n_rows, int64_t n_cols) {
    kernels::WeightView v;
    v.type = GgmlType::F32;
    v.n_rows = n_rows;
    v.n_cols = n_cols;
    v.row_bytes = static_cast<size_t>(n_cols) * sizeof(float);
    v.data = reinterpret_cast<const std::byte*>(w.data());
    return v;
  };
  FfnWeights separate, joined;
  separate.gate = view(gate, 6, 8);
  separate.up = view(up, 6, 8);
  separate.down = view(down, 8, 6);
  joined.up = view(fused, 12, 8);
  joined.down = separate.down;
  joined.fused_gate_up = true;
  const std::vector<float> in = test::normal_values(4, 3 * 8);
  ThreadPool pool(2);
  ForwardBuffers buffers;
  CpuBackend cpu(pool, buffers.cpu);
  ForwardContext ctx{cpu, buffers};
  std::vector<float> a(3 * 8), b(3 * 8);
  ffn(separate, FfnActivation::swiglu, hp, 0, 3, ctx, in, a);
  ffn(joined, FfnActivation::swiglu, hp, 0, 3, ctx, in, b);
  EXPECT_EQ(a, b);
}

// ALiBi instead of RoPE: llama.cpp fixes the max bias at 8 for BLOOM,
// Refact and Baichuan 13B (40 layers); MPT and Jais read
// attention.max_alibi_bias (gen-model writes 8). No layer of these rotates,
// nor GPT-2's (learned positions) nor other Baichuan depths'.
TEST(LayerSpecs, AlibiFamiliesReadTheirMaxBiasAndRotateNothing) {
  test::TempDir dir;
  const struct {
    const char* arch;
    int64_t layers;
    float max_bias;
  } cases[] = {{"bloom", 2, 8}, {"refact", 2, 8},    {"mpt", 2, 8},     {"jais", 2, 8},
               {"gpt2", 2, 0},  {"baichuan", 40, 8}, {"baichuan", 2, 0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.arch) + ", " + std::to_string(c.layers) + " layers");
    auto options = small_model(c.arch);
    options.geometry.n_layer = c.layers;
    write_random_model(options, dir / "a.gguf");
    const auto model = Model::load(dir / "a.gguf", {});
    EXPECT_FLOAT_EQ(model->hparams().alibi_max_bias, c.max_bias);
    for (const LayerSpec& layer : model->hparams().layers) EXPECT_EQ(layer.rope, RopeSlot::none);
  }
  write_random_model(small_model("bloom"), dir / "b.gguf");
  std::string out;
  ASSERT_EQ(test::run_cli("inspect " + (dir / "b.gguf").string(), &out), 0) << out;
  EXPECT_NE(out.find("full attention, ALiBi (max bias 8)"), std::string::npos) << out;
}

// The logits of eight rows of the model at `path`.
std::vector<float> logits_of(const std::filesystem::path& path) {
  LoadOptions load;
  load.kv_type = KvType::f32;
  Session session(Model::load(path, load));
  const std::vector<TokenId> ids = {1, 5, 9, 13, 17, 21, 25, 29};
  return session.evaluate(ids, 8);
}

// Learned positions (GPT-2's position_embd, required; MPT's, optional):
// the row's position picks the row of the table, so the same model without
// them (MPT) or with a zero table gives other logits, and GPT-2 refuses a
// file without it.
// A file's tokenizer.ggml.suppress_tokens are never generated (llama.cpp's
// sampler bans them): greedy decoding takes the next best token instead.
TEST(ModelLoad, SuppressTokensAreNeverGenerated) {
  test::TempDir dir;
  write_random_model(small_model("llama"), dir / "m.gguf");
  GenerateOptions greedy;
  greedy.sampling.temperature = 0;
  greedy.max_tokens = 8;
  greedy.ignore_eos = true;
  const std::vector<TokenId> prompt = {1, 5, 9, 13};
  const auto free = Session(Model::load(dir / "m.gguf", {})).generate(prompt, greedy).tokens;
  ASSERT_FALSE(free.empty());
  const TokenId banned = free[0];
  rewrite(dir / "m.gguf", dir / "suppressed.gguf", "", {}, [&](gguf::GgufWriter& w) {
    gguf::Array ids = gguf::Array::of(gguf::ValueType::i32);
    ids.items = std::vector<int32_t>{banned};
    w.set("tokenizer.ggml.suppress_tokens", gguf::Value(ids));
  });
  const auto suppressed =
      Session(Model::load(dir / "suppressed.gguf", {})).generate(prompt, greedy).tokens;
  ASSERT_EQ(suppressed.size(), free.size());
  EXPECT_EQ(std::ranges::count(suppressed, banned), 0);
}

TEST(ModelLoad, LearnedPositionsAreAddedAtEachRowsPosition) {
  test::TempDir dir;
  write_random_model(small_model("gpt2"), dir / "g.gguf");
  rewrite(dir / "g.gguf", dir / "no_pos.gguf", "position_embd.weight");
  const std::string error = load_error(dir / "no_pos.gguf");
  EXPECT_NE(error.find("position_embd.weight"), std::string::npos) << error;
  // A zero table: only the token embedding is left.
  rewrite(dir / "g.gguf", dir / "zero.gguf", "position_embd.weight",
          {"position_embd.weight", {64, 128}, std::vector<float>(64 * 128, 0.0f)});
  EXPECT_FALSE(bitwise_equal(logits_of(dir / "g.gguf"), logits_of(dir / "zero.gguf")));

  write_random_model(small_model("mpt", OptionalTensors::all), dir / "m.gguf");
  rewrite(dir / "m.gguf", dir / "m_zero.gguf", "position_embd.weight",
          {"position_embd.weight", {64, 128}, std::vector<float>(64 * 128, 0.0f)});
  rewrite(dir / "m.gguf", dir / "m_none.gguf", "position_embd.weight");
  // MPT without the table adds nothing: as a zero table.
  EXPECT_TRUE(bitwise_equal(logits_of(dir / "m_zero.gguf"), logits_of(dir / "m_none.gguf")));
  EXPECT_FALSE(bitwise_equal(logits_of(dir / "m.gguf"), logits_of(dir / "m_none.gguf")));
}

// MPT's attention.clamp_kqv clamps every Q/K/V value (0: no clamp): a clamp
// beyond every value changes nothing, a tight one changes the logits.
TEST(ModelLoad, MptClampKqvClampsTheProjections) {
  test::TempDir dir;
  write_random_model(small_model("mpt"), dir / "m.gguf");
  const auto with_clamp = [&](float clamp, const char* name) {
    rewrite(dir / "m.gguf", dir / name, "", {},
            [&](gguf::GgufWriter& w) { w.set("mpt.attention.clamp_kqv", gguf::Value(clamp)); });
    return logits_of(dir / name);
  };
  const auto none = with_clamp(0.0f, "none.gguf");
  EXPECT_TRUE(bitwise_equal(with_clamp(1e30f, "wide.gguf"), none));
  EXPECT_FALSE(bitwise_equal(with_clamp(0.05f, "tight.gguf"), none));
}

// PLaMo 3 (QkvForm::fused, its bias and scale not applied): llama.cpp creates
// attn_qkv.weight itself, so separate Q/K/V are refused, a bias is not
// read, and its scale is read but multiplies nothing.
TEST(ModelLoad, Plamo3ReadsOnlyAFusedQkvWithoutBiasOrScale) {
  test::TempDir dir;
  write_random_model(small_model("plamo3"), dir / "a.gguf");
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "a.gguf");
  ASSERT_NE(file.find_tensor("blk.0.attn_qkv.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.0.post_attention_norm"), nullptr);  // llama.cpp's name
  rewrite(dir / "a.gguf", dir / "split.gguf", "blk.0.attn_qkv.weight",
          {"blk.0.attn_q.weight", {64, 64}});
  EXPECT_NE(load_error(dir / "split.gguf").find("blk.0.attn_qkv.weight"), std::string::npos);
  rewrite(dir / "a.gguf", dir / "bias.gguf", "", {"blk.0.attn_qkv.bias", {128}});
  EXPECT_NE(load_error(dir / "bias.gguf").find("blk.0.attn_qkv.bias"), std::string::npos);
  rewrite(dir / "a.gguf", dir / "scaled.gguf", "", {"blk.0.attn_qkv.scale", {1}, {1.5f}});
  LoadOptions load;
  load.kv_type = KvType::f32;
  const std::vector<TokenId> ids = {1, 5, 9};
  Session plain(Model::load(dir / "a.gguf", load));
  Session scaled(Model::load(dir / "scaled.gguf", load));
  EXPECT_EQ(plain.evaluate(ids, 3), scaled.evaluate(ids, 3));
}

// Apertus's xIELU parameters are required keys without the arch prefix,
// one value per layer (or one for all), and each layer uses its own.
TEST(ModelLoad, ApertusReadsItsXieluParametersPerLayer) {
  test::TempDir dir;
  write_random_model(small_model("apertus"), dir / "a.gguf");
  rewrite(dir / "a.gguf", dir / "missing.gguf", "", {},
          [](gguf::GgufWriter& w) { w.remove("xielu.beta"); });
  EXPECT_NE(load_error(dir / "missing.gguf").find("xielu.beta"), std::string::npos);
  const auto set_alpha_p = [&](const std::filesystem::path& to, std::vector<float> values) {
    rewrite(dir / "a.gguf", to, "", {}, [&](gguf::GgufWriter& w) {
      gguf::Array array = gguf::Array::of(gguf::ValueType::f32);
      std::get<std::vector<float>>(array.items) = values;
      w.set("xielu.alpha_p", gguf::Value(std::move(array)));
    });
  };
  set_alpha_p(dir / "three.gguf", {0.3f, 0.5f, 0.7f});
  EXPECT_NE(load_error(dir / "three.gguf").find("xielu.alpha_p"), std::string::npos);
  // gen-model writes alpha_p = {0.3, 0.5}: changing layer 1's changes the logits.
  set_alpha_p(dir / "same.gguf", {0.3f, 0.5f});
  set_alpha_p(dir / "other.gguf", {0.3f, 0.9f});
  rewrite(dir / "a.gguf", dir / "scalar.gguf", "", {},
          [](gguf::GgufWriter& w) { w.set("xielu.eps", gguf::Value(-1e-6f)); });
  LoadOptions load;
  load.kv_type = KvType::f32;
  const std::vector<TokenId> ids = {1, 5, 9};
  const auto logits = [&](const char* name) {
    Session s(Model::load(dir / name, load));
    return s.evaluate(ids, 3);
  };
  const auto base = logits("a.gguf");
  EXPECT_EQ(base, logits("same.gguf"));
  EXPECT_EQ(base, logits("scalar.gguf"));
  EXPECT_NE(base, logits("other.gguf"));
}

// BitNet: separate Q/K/V without biases (AttentionTensors::
// QkvForm::separate_without_biases) and the branches' RMS sub-norms
// (AttentionTensors::sub_norm, FfnTensors::sub_norm), which the loader
// requires and the forward pass applies.
TEST(ModelLoad, BitnetReadsItsSubNormsAndNoQkvBiases) {
  test::TempDir dir;
  write_random_model(small_model("bitnet"), dir / "a.gguf");
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "a.gguf");
  ASSERT_NE(file.find_tensor("blk.0.attn_sub_norm.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_sub_norm.weight")->shape, (std::vector<int64_t>{96}));
  rewrite(dir / "a.gguf", dir / "bias.gguf", "", {"blk.0.attn_q.bias", {64}});
  EXPECT_NE(load_error(dir / "bias.gguf").find("blk.0.attn_q.bias"), std::string::npos);
  fuse_qkv(dir / "a.gguf", dir / "fused.gguf");
  EXPECT_NE(load_error(dir / "fused.gguf").find("attn_q.weight"), std::string::npos);
  rewrite(dir / "a.gguf", dir / "nosub.gguf", "blk.1.attn_sub_norm.weight");
  EXPECT_NE(load_error(dir / "nosub.gguf").find("blk.1.attn_sub_norm.weight"), std::string::npos);
  LoadOptions load;
  load.kv_type = KvType::f32;
  const std::vector<TokenId> ids = {1, 5, 9};
  const auto logits = [&](const std::filesystem::path& path) {
    Session s(Model::load(path, load));
    return s.evaluate(ids, 3);
  };
  const auto base = logits(dir / "a.gguf");
  for (const auto& [name, n] : {std::pair<std::string, int64_t>{"blk.0.attn_sub_norm.weight", 64},
                                {"blk.0.ffn_sub_norm.weight", 96}}) {
    SCOPED_TRACE(name);
    rewrite(dir / "a.gguf", dir / "ones.gguf", name, {name, {n}});  // all ones
    EXPECT_NE(base, logits(dir / "ones.gguf"));
  }
}

}  // namespace
}  // namespace cortiq

namespace cortiq {
namespace {

// Encoders (BERT) attend in both directions: the first row's state depends
// on the last token; a sequence is read whole, whatever the chunk, and
// alone, whatever came before; and asking one for logits is refused.
TEST(EncoderFamilies, AttendBothWaysAndReadEachInputWhole) {
  const std::vector<TokenId> ids = walk_ids();
  int encoders = 0;
  for (const Family* family : families()) {
    if (!family->encoder) continue;
    ++encoders;
    SCOPED_TRACE(std::string(family->arch));
    const auto model = test::load_test_model({.arch = std::string(family->arch)}, 2, KvType::f16);
    const auto n_embd = static_cast<size_t>(model->hparams().n_embd);
    ASSERT_FALSE(model->hparams().causal_attention);
    Session reference(model);
    const auto whole = reference.embeddings(ids, 64);
    for (const int64_t chunk : {1, 7}) {
      Session s(model);
      EXPECT_TRUE(bitwise_equal(s.embeddings(ids, chunk), whole)) << "chunk " << chunk;
    }
    // A second call embeds its ids alone: the first call is forgotten.
    Session twice(model);
    twice.embeddings(std::span(ids).first(10));
    EXPECT_TRUE(bitwise_equal(twice.embeddings(ids), whole));
    // The first row reads the last token.
    auto changed = ids;
    changed.back() = ids.back() + 1;
    Session other(model);
    const std::vector<float> changed_rows = other.embeddings(changed);
    EXPECT_FALSE(std::equal(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n_embd),
                            changed_rows.begin()));
    Session logits(model);
    try {
      logits.evaluate(ids);
      ADD_FAILURE() << "an encoder gave logits";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("text encoder"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(encoders, 0);
}

}  // namespace
}  // namespace cortiq
