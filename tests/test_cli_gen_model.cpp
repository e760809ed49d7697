// `cortiq gen-model`: flags reach the file, and the file is reproducible.
#include <gtest/gtest.h>

#include "formats/gguf/gguf_file.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

using test::run_cli;

TEST(CliGenModel, SameFlagsGiveIdenticalFiles) {
  test::TempDir dir;
  const std::string flags =
      "gen-model --arch qwen3 --embd 128 --layers 3 --heads 4 --kv-heads 2 "
      "--head-dim 48 --ff 256 --type Q8_0 --seed 42 -o ";
  std::string out;
  ASSERT_EQ(run_cli(flags + (dir / "a.gguf").string(), &out), 0) << out;
  ASSERT_EQ(run_cli(flags + (dir / "b.gguf").string(), &out), 0) << out;
  EXPECT_EQ(test::read_file_bytes(dir / "a.gguf"), test::read_file_bytes(dir / "b.gguf"));
  ASSERT_EQ(run_cli("gen-model --arch qwen3 --embd 128 --layers 3 --heads 4 --kv-heads 2 "
                    "--head-dim 48 --ff 256 --type Q8_0 --seed 43 -o " +
                        (dir / "c.gguf").string(),
                    &out),
            0);
  EXPECT_NE(test::read_file_bytes(dir / "a.gguf"), test::read_file_bytes(dir / "c.gguf"));
}

TEST(CliGenModel, FlagsReachTheFile) {
  test::TempDir dir;
  std::string out;
  ASSERT_EQ(run_cli("gen-model --arch qwen3 --embd 128 --layers 3 --heads 4 --kv-heads 2 "
                    "--head-dim 48 --ff 256 --ctx 1024 --rope-base 1e6 --rms-eps 1e-6 --tied "
                    "--vocab 700 --type F16 --name tiny -o " +
                        (dir / "m.gguf").string(),
                    &out),
            0)
      << out;
  const gguf::GgufFile f = gguf::GgufFile::open(dir / "m.gguf");
  EXPECT_EQ(f.architecture(), "qwen3");
  EXPECT_EQ(f.get_string("general.name"), "tiny");
  EXPECT_EQ(f.get_uint("general.file_type"), 1u);
  EXPECT_EQ(f.get_uint("qwen3.embedding_length"), 128u);
  EXPECT_EQ(f.get_uint("qwen3.block_count"), 3u);
  EXPECT_EQ(f.get_uint("qwen3.attention.head_count"), 4u);
  EXPECT_EQ(f.get_uint("qwen3.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_uint("qwen3.attention.key_length"), 48u);
  EXPECT_EQ(f.get_uint("qwen3.attention.value_length"), 48u);
  EXPECT_EQ(f.get_uint("qwen3.feed_forward_length"), 256u);
  EXPECT_EQ(f.get_uint("qwen3.context_length"), 1024u);
  EXPECT_EQ(f.get_uint("qwen3.vocab_size"), 700u);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("qwen3.rope.freq_base")), 1e6f);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("qwen3.attention.layer_norm_rms_epsilon")),
                  1e-6f);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // --tied
  EXPECT_EQ(f.find_tensor("token_embd.weight")->shape, (std::vector<int64_t>{128, 700}));
  EXPECT_EQ(f.find_tensor("blk.2.attn_q.weight")->shape, (std::vector<int64_t>{128, 192}));
  EXPECT_EQ(f.find_tensor("blk.2.attn_q.weight")->type, GgmlType::F16);
  EXPECT_EQ(f.find_tensor("blk.2.attn_k_norm.weight")->shape, (std::vector<int64_t>{48}));
  EXPECT_EQ(f.find_tensor("blk.2.attn_k_norm.weight")->type, GgmlType::F32);
  EXPECT_EQ(f.tensors().size(), 2u + 3 * 11);
}

// --chat-template FILE stores the file's text as tokenizer.chat_template
// (README "Quick start" writes Llama 3.1's that way); a missing file is an
// error naming it.
TEST(CliGenModel, ChatTemplateFileIsStoredWhole) {
  test::TempDir dir;
  const std::string jinja =
      "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n"
      "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
  test::write_file_bytes(dir / "t.jinja", std::vector<uint8_t>(jinja.begin(), jinja.end()));
  std::string out;
  ASSERT_EQ(run_cli("gen-model --arch llama --embd 64 --ff 128 --chat-template " +
                        (dir / "t.jinja").string() + " -o " + (dir / "m.gguf").string(),
                    &out),
            0)
      << out;
  EXPECT_EQ(gguf::GgufFile::open(dir / "m.gguf").get_string("tokenizer.chat_template"), jinja);
  EXPECT_NE(run_cli("gen-model --arch llama --chat-template " + (dir / "none.jinja").string() +
                        " -o " + (dir / "n.gguf").string(),
                    &out),
            0);
  EXPECT_NE(out.find("none.jinja"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "n.gguf"));
}

TEST(CliGenModel, EveryArchitectureAndWritableType) {
  test::TempDir dir;
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K",
                             "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4"}) {
      std::string out;
      const auto path = dir / "m.gguf";
      ASSERT_EQ(run_cli(std::string("gen-model --arch ") + arch + " --type " + type +
                            " --layers 1 -o " + path.string(),
                        &out),
                0)
          << arch << " " << type << "\n"
          << out;
      const gguf::GgufFile f = gguf::GgufFile::open(path);
      EXPECT_EQ(ggml_type_name(f.find_tensor("blk.0.ffn_up.weight")->type), type) << arch;
      EXPECT_EQ(f.find_tensor("blk.0.ffn_norm.weight")->type, GgmlType::F32);
    }
  }
}

// Both values are stored as f32: one that is positive as a double but 0 or
// infinite as an f32 was written as such.
TEST(CliGenModel, RopeBaseAndEpsilonMustBePositiveAsF32) {
  test::TempDir dir;
  const auto path = dir / "m.gguf";
  for (const char* flags : {"--rms-eps 1e-50", "--rms-eps nan", "--rope-base 1e39",
                            "--rope-base inf", "--rope-base 0"}) {
    std::string out;
    EXPECT_NE(
        run_cli(std::string("gen-model --arch llama --layers 1 ") + flags + " -o " + path.string(),
                &out),
        0)
        << flags << "\n"
        << out;
    EXPECT_NE(out.find("must be a positive f32"), std::string::npos) << flags << "\n" << out;
    EXPECT_FALSE(std::filesystem::exists(path)) << flags;
  }
}

}  // namespace
}  // namespace cortiq
