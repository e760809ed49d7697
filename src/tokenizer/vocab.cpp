// Vocab::from_gguf: the tokenizer.* keys, with the defaults and the
// per-model fix-ups that the peer (llama.cpp's llama_vocab::load) applies, so
// that the same file gives the same ids here and there.
#include "tokenizer/vocab.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <span>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "tokenizer/charsmap.hpp"

namespace cortiq {

namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kMergesKey = "tokenizer.ggml.merges";
constexpr const char* kCharsmapKey = "tokenizer.ggml.precompiled_charsmap";

bool one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

[[noreturn]] void fail(const gguf::GgufFile& file, const std::string& problem) {
  throw Error(file.path() + ": " + problem);
}

TokenizerKind kind_of(const gguf::GgufFile& file, const std::string& model) {
  if (model.empty() || model == "no_vocab" || model == "none") return TokenizerKind::none;
  if (model == "llama") return TokenizerKind::spm;
  if (model == "gpt2") return TokenizerKind::bpe;
  if (model == "bert") return TokenizerKind::wpm;
  if (model == "gemma4") return TokenizerKind::gemma4;
  if (model == "t5") return TokenizerKind::ugm;
  if (model == "plamo2") return TokenizerKind::plamo2;
  if (model == "rwkv") return TokenizerKind::rwkv;
  if (one_of(model, {"hybriddna", "whitespace"})) {
    fail(file, strfmt("%s: tokenizer model '%s' is not supported yet", kModelKey, model.c_str()));
  }
  fail(file,
       strfmt("%s: unknown tokenizer model '%s' (known: llama, gpt2, bert, gemma4, t5, plamo2, "
              "rwkv, no_vocab)",
              kModelKey, model.c_str()));
}

// Flags and special ids the peer assumes when the file does not say.
void set_model_defaults(Vocab& v) {
  switch (v.kind) {
    case TokenizerKind::spm:
      v.bos = 1, v.eos = 2, v.unk = 0;
      v.add_space_prefix = true;
      v.add_bos = true;
      break;
    case TokenizerKind::wpm:
      v.bos = 101, v.unk = 100, v.sep = 102, v.pad = 0, v.mask = 103;
      v.add_bos = true;
      v.add_sep = true;
      v.clean_spaces = true;
      break;
    case TokenizerKind::bpe: {
      v.bos = 11, v.eos = 11;
      // Pre-tokenizers whose models add BOS, and those that keep spaces
      // before punctuation when decoding (the rest clean them).
      v.add_bos = one_of(v.pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
                                 "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "tekken",
                                 "chameleon", "gemma4", "granite-embed-multi-311m"});
      v.clean_spaces =
          !one_of(v.pre, {"deepseek-llm", "deepseek-coder",   "deepseek-v3",
                          "youtu",        "sarvam-moe",       "command-r",
                          "qwen2",        "deepseek-r1-qwen", "kormo",
                          "f2llmv2",      "qwen35",           "poro-chat",
                          "viking",       "tekken",           "smollm",
                          "chameleon",    "gpt-4o",           "llama4",
                          "kanana2",      "talkie",           "granite-embed-multi-97m",
                          "tiny_aya",     "cohere2moe",       "superbpe",
                          "trillion",     "granite-docling",  "bailingmoe",
                          "bailingmoe2",  "llada-moe",        "seed-coder",
                          "hunyuan",      "hunyuan-dense",    "joyai-llm",
                          "kimi-k2",      "grok-2",           "afmoe",
                          "laguna",       "minimax-m2",       "solar-open"});
      break;
    }
    case TokenizerKind::gemma4:
      v.clean_spaces = true;
      break;
    case TokenizerKind::ugm:
      // T5's ids: <pad> 0, </s> 1, <unk> 2, no BOS; EOS is added. No dummy
      // prefix and no whitespace merging unless the file says so.
      v.pad = 0, v.eos = 1, v.unk = 2;
      v.add_eos = true;
      break;
    case TokenizerKind::plamo2:
      // <|plamo:unk|> 0, <|plamo:bos|> 1, <|plamo:eos|> 2, <|plamo:pad|> 3;
      // nothing added unless the file says so.
      v.unk = 0, v.bos = 1, v.eos = 2, v.pad = 3;
      break;
    case TokenizerKind::rwkv:
      // No special ids, no dummy prefix, nothing added: llama.cpp's
      // defaults. The converter's keys name <s> (id 0) as BOS and EOS and
      // "\n\n" as EOT; the tokenizer adds neither whatever add_bos_token says
      // (Tokenizer::add_prefix).
      break;
    case TokenizerKind::none:
      break;
  }
}

template <class T>
const std::vector<T>* typed_array(const gguf::GgufFile& file, const char* key, const char* what) {
  const gguf::Array* array = file.get_array(key);  // throws when not an array
  if (!array) return nullptr;
  const auto* items = array->as<T>();
  if (!items) {
    fail(file, strfmt("%s: expected an array of %s, found %s", key, what,
                      gguf::value_type_name(array->element_type)));
  }
  return items;
}

void read_tokens(const gguf::GgufFile& file, Vocab& v) {
  const auto* tokens = typed_array<std::string>(file, kTokensKey, "string");
  if (!tokens) {
    if (v.kind == TokenizerKind::none) {
      // An ids-only model: the vocabulary is just a size.
      const auto n = file.get_uint(file.architecture() + ".vocab_size");
      if (n && *n <= (1u << 24)) v.tokens.resize(*n);
      return;
    }
    fail(file, strfmt("%s is missing", kTokensKey));
  }
  if (tokens->size() > static_cast<size_t>(INT32_MAX)) {
    fail(file, strfmt("%s: %zu tokens is too many", kTokensKey, tokens->size()));
  }
  v.tokens = *tokens;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    // The peer renames empty tokens so that every text maps to one id.
    if (v.tokens[i].empty()) v.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
}

void read_scores(const gguf::GgufFile& file, Vocab& v) {
  const gguf::Array* array = file.get_array(kScoresKey);
  if (!array) {
    // The Unigram model is its scores: llama.cpp would take them all as 0
    // and segment arbitrarily.
    if (v.kind == TokenizerKind::ugm) {
      fail(file,
           strfmt("%s is missing (the t5 Unigram model needs a score per token)", kScoresKey));
    }
    return;
  }
  if (array->size() < v.size()) {
    fail(file, strfmt("%s: %zu scores for %zu tokens", kScoresKey, array->size(), v.size()));
  }
  if (const auto* f = array->as<float>()) {
    v.scores.assign(f->begin(), f->begin() + static_cast<ptrdiff_t>(v.size()));
  } else if (const auto* i = array->as<int32_t>()) {
    v.scores.assign(i->begin(), i->begin() + static_cast<ptrdiff_t>(v.size()));
  } else {
    fail(file, strfmt("%s: expected f32 or i32 items, found %s", kScoresKey,
                      gguf::value_type_name(array->element_type)));
  }
}

void read_types(const gguf::GgufFile& file, Vocab& v) {
  v.types.assign(v.size(), TokenType::normal);
  const auto* types = typed_array<int32_t>(file, kTypesKey, "i32");
  if (!types) return;
  if (types->size() < v.size()) {
    fail(file, strfmt("%s: %zu types for %zu tokens", kTypesKey, types->size(), v.size()));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const int32_t t = (*types)[i];
    v.types[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::undefined;
  }
}

// Only the Unigram model reads it, as in llama.cpp: an array of u8 or i8
// (llama.cpp accepts either), checked here so that a malformed blob fails
// the load rather than a later encode.
void read_charsmap(const gguf::GgufFile& file, Vocab& v) {
  if (v.kind != TokenizerKind::ugm) return;
  const gguf::Array* array = file.get_array(kCharsmapKey);
  if (!array) return;
  if (const auto* u8 = array->as<uint8_t>()) {
    v.precompiled_charsmap = *u8;
  } else if (const auto* i8 = array->as<int8_t>()) {
    v.precompiled_charsmap.assign(i8->begin(), i8->end());
  } else {
    fail(file, strfmt("%s: expected an array of u8 or i8, found %s", kCharsmapKey,
                      gguf::value_type_name(array->element_type)));
  }
  try {
    PrecompiledCharsmap check(v.precompiled_charsmap);
  } catch (const Error& e) {
    fail(file, e.what());
  }
}

void read_merges(const gguf::GgufFile& file, Vocab& v) {
  const auto* merges = typed_array<std::string>(file, kMergesKey, "string");
  if (!merges) {
    if (v.kind == TokenizerKind::bpe || v.kind == TokenizerKind::gemma4) {
      // Kimi-K2 is the one byte-level BPE without merges.
      if (v.pre != "kimi-k2") fail(file, strfmt("%s is missing", kMergesKey));
    }
    return;
  }
  v.merges.reserve(merges->size());
  for (const std::string& m : *merges) {
    // Split at the first space after the first byte: a merge may start with
    // a space-like symbol, never with the separator.
    const size_t pos = m.find(' ', 1);
    if (pos == std::string::npos) {
      v.merges.emplace_back();
    } else {
      v.merges.emplace_back(m.substr(0, pos), m.substr(pos + 1));
    }
  }
}

// A default id outside the vocabulary is dropped; an id from the file
// outside it is ignored with a warning, as the peer does (real files have
// such ids and still work).
void read_special_ids(const gguf::GgufFile& file, Vocab& v) {
  const std::array<std::pair<const char*, TokenId*>, 18> keys = {{
      {"tokenizer.ggml.bos_token_id", &v.bos},
      {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.seperator_token_id", &v.sep},  // sic: the key is spelled so
      {"tokenizer.ggml.padding_token_id", &v.pad},
      {"tokenizer.ggml.cls_token_id", &v.cls},
      {"tokenizer.ggml.mask_token_id", &v.mask},
      {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
      // Older names of the first three.
      {"tokenizer.ggml.prefix_token_id", &v.fim_pre},
      {"tokenizer.ggml.suffix_token_id", &v.fim_suf},
      {"tokenizer.ggml.middle_token_id", &v.fim_mid},
  }};
  for (const auto& [key, id] : keys) {
    if (*id >= 0 && static_cast<size_t>(*id) >= v.size()) *id = kNoToken;
    const std::optional<int64_t> value = file.get_int(key);
    if (!value) continue;
    if (*value < 0 || static_cast<uint64_t>(*value) >= v.size()) {
      LOG_WARN("%s: %s = %lld is outside the vocabulary (%zu tokens); ignored", file.path().c_str(),
               key, static_cast<long long>(*value), v.size());
      continue;
    }
    *id = static_cast<TokenId>(*value);
  }
}

// As llama.cpp: an array of i32 or an error; ids outside the vocabulary dropped.
void read_suppress_tokens(const gguf::GgufFile& file, Vocab& v) {
  const auto* ids = typed_array<int32_t>(file, "tokenizer.ggml.suppress_tokens", "i32");
  if (!ids) return;
  for (const int32_t id : *ids) {
    if (id >= 0 && static_cast<size_t>(id) < v.size()) v.suppress_tokens.push_back(id);
  }
}

void read_flags(const gguf::GgufFile& file, Vocab& v) {
  if (auto b = file.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_sep_token")) v.add_sep = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;
  if (auto b = file.get_bool("tokenizer.ggml.remove_extra_whitespaces")) {
    v.remove_extra_whitespaces = *b;
  }
  if (auto b = file.get_bool("tokenizer.ggml.normalizer.lowercase")) v.normalizer_lowercase = *b;
  v.normalizer_strip_accents = v.normalizer_lowercase;
  if (auto b = file.get_bool("tokenizer.ggml.normalizer.strip_accents")) {
    v.normalizer_strip_accents = *b;
  }
  // Gemma 4 files say add_bos = false, yet the model needs <bos> (peer PR 21500).
  const bool gemma4_pre =
      v.kind == TokenizerKind::gemma4 || one_of(v.pre, {"gemma4", "granite-embed-multi-311m"});
  if (gemma4_pre) v.add_bos = true;
  // A flag asking for a token the vocabulary lacks would add garbage.
  if (v.bos == kNoToken) v.add_bos = false;
  if (v.eos == kNoToken) v.add_eos = false;
  if (v.sep == kNoToken) v.add_sep = false;
}

// Texts that end a turn in the chat formats of common models; the GGUF does
// not mark them, so the peer recognises them by text.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
};
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",         "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",    "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};

bool in(std::string_view text, std::span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

void mark_control(Vocab& v, TokenId id) {
  if (v.types[id] != TokenType::control) {
    LOG_DEBUG("token %d '%s' looks like a control token; typed as one", id, v.tokens[id].c_str());
    v.types[id] = TokenType::control;
  }
}

// The first of `texts` in the vocabulary becomes `id` unless the file set
// it; it is typed control (the peer's fix for files that typed it normal).
void detect_by_text(Vocab& v, TokenId& id, std::span<const std::string_view> texts) {
  for (std::string_view text : texts) {
    if (id != kNoToken) return;
    if (auto found = v.find(text)) id = *found, mark_control(v, *found);
  }
}

void detect_special_ids(Vocab& v) {
  // Of several end-of-turn candidates the first in the list wins (Qwen has
  // <|im_end|> and <|endoftext|>: <|im_end|> ends a chat turn), as the peer
  // reports.
  detect_by_text(v, v.eot, kEndOfTurnTexts);
  static constexpr std::string_view kEom[] = {"<|eom_id|>"};
  detect_by_text(v, v.eom, kEom);
  static constexpr std::string_view kPre[] = {"<|fim_prefix|>",  "<fim-prefix>", "<fim_prefix>",
                                              "<｜fim▁begin｜>", "<PRE>",        "▁<PRE>",
                                              "<|code_prefix|>", "<|prefix|>"};
  static constexpr std::string_view kSuf[] = {"<|fim_suffix|>",  "<fim-suffix>", "<fim_suffix>",
                                              "<｜fim▁hole｜>",  "<SUF>",        "▁<SUF>",
                                              "<|code_suffix|>", "<|suffix|>"};
  static constexpr std::string_view kMid[] = {"<|fim_middle|>",  "<fim-middle>", "<fim_middle>",
                                              "<｜fim▁end｜>",   "<MID>",        "▁<MID>",
                                              "<|code_middle|>", "<|middle|>"};
  static constexpr std::string_view kPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                              "[PAD]"};
  static constexpr std::string_view kRep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>", "<reponame>"};
  static constexpr std::string_view kSep[] = {"<|file_sep|>"};
  detect_by_text(v, v.fim_pre, kPre);
  detect_by_text(v, v.fim_suf, kSuf);
  detect_by_text(v, v.fim_mid, kMid);
  detect_by_text(v, v.fim_pad, kPad);
  detect_by_text(v, v.fim_rep, kRep);
  detect_by_text(v, v.fim_sep, kSep);
}

void detect_end_of_generation(Vocab& v) {
  detect_special_ids(v);
  std::vector<TokenId>& eog = v.end_of_generation;
  for (TokenId id = 0; id < static_cast<TokenId>(v.size()); ++id) {
    if (in(v.tokens[id], kEndOfGenerationTexts)) eog.push_back(id), mark_control(v, id);
  }
  for (TokenId id : {v.eos, v.eot, v.eom, v.fim_pad, v.fim_rep, v.fim_sep}) {
    if (id != kNoToken && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
  }
  auto has = [&](std::string_view text) -> TokenId {
    for (TokenId id : eog) {
      if (v.tokens[id] == text) return id;
    }
    return kNoToken;
  };
  auto drop = [&](TokenId id, TokenType type) {
    eog.erase(std::find(eog.begin(), eog.end(), id));
    v.types[id] = type;
  };
  // gpt-oss (o200k_harmony) and solar-open: <|end|> ends a message, not the
  // generation, when <|return|>/<|call|> or <|calls|>/<|flush|> exist.
  const TokenId end = has("<|end|>");
  const bool calls = has("<|call|>") != kNoToken || has("<|calls|>") != kNoToken;
  if (end != kNoToken && calls && (has("<|return|>") != kNoToken || has("<|flush|>") != kNoToken)) {
    drop(end, TokenType::user_defined);
  }
  // Gemma 4 and PaddleOCR: </s> is plain text there.
  const TokenId s = has("</s>");
  if (s != kNoToken && has("<|tool_response>") != kNoToken) drop(s, TokenType::normal);
  std::sort(eog.begin(), eog.end());
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The lstrip/rstrip attributes of Hugging Face's added tokens, which the
// GGUF does not store: the peer's per-model rules.
void set_strip_rules(const gguf::GgufFile& file, Vocab& v) {
  const std::string name = lowercase(file.get_string("general.name").value_or(""));
  const std::string arch = file.architecture();
  auto set = [&](std::string_view text, uint8_t flag, bool on) {
    const std::optional<TokenId> id = v.find(text);
    if (!id) return;
    if (v.strip.empty()) v.strip.assign(v.size(), 0);
    v.strip[*id] = on ? (v.strip[*id] | flag) : (v.strip[*id] & ~flag);
  };
  const bool jina_mask = v.pre.find("jina-v2-de") != std::string::npos ||
                         v.pre.find("jina-v2-es") != std::string::npos ||
                         v.pre.find("jina-v2-code") != std::string::npos ||
                         arch.find("nomic-bert-moe") != std::string::npos ||
                         arch.find("jina-bert-v3") != std::string::npos;
  if (jina_mask) {
    set("<mask>", Vocab::kStripLeft, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    // Phi-3's added tokens eat the whitespace after them (its chat format
    // puts a newline after <|user|> etc.).
    for (TokenId id = 0; id < static_cast<TokenId>(v.size()); ++id) {
      const TokenType t = v.types[id];
      if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown) {
        set(v.tokens[id], Vocab::kStripRight, true);
      }
    }
    set("</s>", Vocab::kStripRight, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, Vocab::kStripRight, false);
  } else if (name.find("modern-bert") != std::string::npos) {
    set("[MASK]", Vocab::kStripLeft, true);
  }
}

void build_index(Vocab& v) {
  v.token_to_id.reserve(v.size());
  // Later duplicates win, as in the peer.
  for (TokenId id = 0; id < static_cast<TokenId>(v.size()); ++id) v.token_to_id[v.tokens[id]] = id;
  // gpt-oss: these structure tokens are always rendered.
  for (std::string_view t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (auto id = v.find(t)) v.types[*id] = TokenType::user_defined;
  }
}

}  // namespace

Vocab Vocab::from_gguf(const gguf::GgufFile& file) {
  Vocab v;
  v.model_name = file.get_string(kModelKey).value_or("");
  v.pre = file.get_string("tokenizer.ggml.pre").value_or("");
  v.kind = kind_of(file, v.model_name);
  set_model_defaults(v);
  read_tokens(file, v);
  if (v.kind == TokenizerKind::none) {
    v.bos = v.eos = v.unk = v.pad = v.sep = v.cls = v.mask = kNoToken;
    v.types.assign(v.size(), TokenType::normal);
    return v;
  }
  read_scores(file, v);
  read_types(file, v);
  read_merges(file, v);
  read_charsmap(file, v);
  if (v.kind == TokenizerKind::ugm) v.file_types = v.types;
  build_index(v);
  read_special_ids(file, v);
  // Characters no token covers become the unknown token: without one,
  // llama.cpp would emit id -1.
  if (v.kind == TokenizerKind::ugm && v.unk == kNoToken) {
    fail(file, strfmt("tokenizer.ggml.unknown_token_id: the t5 Unigram model needs an unknown "
                      "token; none in the file is inside the vocabulary, nor is the default "
                      "id 2 (%zu tokens)",
                      v.size()));
  }
  read_flags(file, v);
  read_suppress_tokens(file, v);
  detect_end_of_generation(v);
  set_strip_rules(file, v);
  return v;
}

std::optional<TokenId> Vocab::find(std::string_view text) const {
  const auto it = token_to_id.find(std::string(text));
  if (it == token_to_id.end()) return std::nullopt;
  return it->second;
}

TokenType Vocab::type(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= types.size()) return TokenType::undefined;
  return types[id];
}

bool Vocab::is_end_of_generation(TokenId id) const {
  return std::binary_search(end_of_generation.begin(), end_of_generation.end(), id);
}

bool Vocab::is_special(TokenId id) const {
  const TokenType t = type(id);
  return t == TokenType::control || t == TokenType::user_defined;
}

uint8_t Vocab::strip_flags(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= strip.size()) return 0;
  return strip[id];
}

}  // namespace cortiq
