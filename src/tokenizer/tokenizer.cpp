// Tokenizer: what every tokenizer model shares. Special tokens are split out
// of the text first (as the peer's tokenizer_st_partition does), the plain
// fragments go to the model, BOS/EOS come from the vocabulary's flags.
#include "tokenizer/tokenizer.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "tokenizer/tokenizer_wpm.hpp"

namespace cortiq {

namespace {

std::unique_ptr<TokenizerModel> make_model(const Vocab& vocab) {
  switch (vocab.kind) {
    case TokenizerKind::spm:
      return make_spm_model(vocab);
    case TokenizerKind::bpe:
      return make_bpe_model(vocab);
    case TokenizerKind::wpm:
      return make_wpm_model(vocab, WpmNormalizer{.lowercase = vocab.normalizer_lowercase,
                                                 .strip_accents = vocab.normalizer_strip_accents});
    case TokenizerKind::gemma4:
      return make_gemma4_model(vocab);
    case TokenizerKind::ugm:
      return make_ugm_model(vocab);
    case TokenizerKind::plamo2:
      return make_plamo2_model(vocab);
    case TokenizerKind::rwkv:
      return make_rwkv_model(vocab);
    case TokenizerKind::none:
      break;
  }
  return nullptr;
}

// The peer strips with C's isspace in the "C" locale.
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// clean_up_tokenization_spaces, pass by pass as the peer does it: " ?" " !"
// " ." " ," lose their space; a lone " ' " loses both; " 's" " 'm" " 're"
// " 've" lose the space before the apostrophe.
std::string clean_spaces(std::string text) {
  if (text.size() < 2) return text;
  auto pass = [](std::string& in, auto&& step) {
    std::string out(1, in[0]);
    for (size_t i = 1; i < in.size(); ++i) step(in, i, out);
    in = std::move(out);
  };
  pass(text, [](std::string& in, size_t& i, std::string& out) {
    const char x = in[i];
    if (in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) out.pop_back();
    out.push_back(x);
  });
  pass(text, [](std::string& in, size_t& i, std::string& out) {
    const char x = in[i];
    if (x == '\'' && i + 1 < in.size() && in[i - 1] == ' ' && in[i + 1] == ' ') {
      out.pop_back();
      in[++i] = '\0';  // the space after is skipped, and no longer precedes anything
    }
    out.push_back(x);
  });
  pass(text, [](std::string& in, size_t& i, std::string& out) {
    const char x = in[i];
    if (in[i - 1] == ' ' && x == '\'' && i + 1 < in.size()) {
      const char x1 = in[i + 1];
      const char x2 = i + 2 < in.size() ? in[i + 2] : '\0';
      const bool joins =
          x1 == 's' || x1 == 'm' ||
          (i + 2 < in.size() && ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')));
      if (joins) out.pop_back();
    }
    out.push_back(x);
  });
  return text;
}

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

// Appends the valid UTF-8 of `in` to `out`, each invalid sequence as U+FFFD.
// Returns how many bytes were used: all of them when `final`, else all but
// an incomplete sequence at the end that later bytes may complete.
size_t append_valid_utf8(std::string_view in, bool final, std::string& out) {
  size_t i = 0;
  while (i < in.size()) {
    const auto b = static_cast<unsigned char>(in[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const size_t len = (b >= 0xC2 && b <= 0xDF)   ? 2
                       : (b >= 0xE0 && b <= 0xEF) ? 3
                       : (b >= 0xF0 && b <= 0xF4) ? 4
                                                  : 0;
    if (len == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    // The second byte's range excludes overlongs, surrogates and > U+10FFFF.
    const unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    size_t k = 1;
    for (; k < len && i + k < in.size(); ++k) {
      const auto c = static_cast<unsigned char>(in[i + k]);
      if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
    }
    if (k == len) {
      out.append(in.substr(i, len));
    } else if (i + k == in.size() && !final) {
      return i;  // may still be completed
    } else {
      out.append(kReplacement);
    }
    i += k;
  }
  return i;
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab)
    : vocab_(std::make_unique<const Vocab>(std::move(vocab))), model_(make_model(*vocab_)) {
  const Vocab& v = *vocab_;
  for (TokenId id = 0; id < static_cast<TokenId>(v.size()); ++id) {
    const TokenType t = v.types[id];
    if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown) {
      specials_.push_back(id);
    }
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [&](TokenId a, TokenId b) { return v.tokens[a].size() > v.tokens[b].size(); });
}

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& file) {
  return Tokenizer(Vocab::from_gguf(file));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, TokenizeOptions options) const {
  if (!model_) {
    throw Error("model has no vocabulary (tokenizer.ggml.model = " +
                (vocab_->model_name.empty() ? std::string("absent") : vocab_->model_name) +
                "); pass token ids");
  }
  std::vector<TokenId> out;
  if (options.add_special) add_prefix(out);
  bool at_start = true;  // SentencePiece's dummy prefix goes after every special token
  for (const Fragment& f : split_special(text, options.parse_special)) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      at_start = true;
    } else {
      model_->encode(text.substr(f.offset, f.length), at_start, out);
      at_start = false;
    }
  }
  if (options.add_special) add_suffix(out);
  return out;
}

// WordPiece always frames its input as [CLS] ... [SEP]; RWKV never adds
// either end, whatever add_bos/add_eos say (llama.cpp's RWKV branch ignores
// them; the flags still reach what reads them, as llama_vocab_get_add_bos
// does in the peer); the others follow add_bos/add_eos.
void Tokenizer::add_prefix(std::vector<TokenId>& out) const {
  const Vocab& v = *vocab_;
  if (v.kind == TokenizerKind::rwkv) return;
  if (v.kind == TokenizerKind::wpm ? v.bos != kNoToken : v.add_bos) out.push_back(v.bos);
}

void Tokenizer::add_suffix(std::vector<TokenId>& out) const {
  const Vocab& v = *vocab_;
  if (v.kind == TokenizerKind::rwkv) return;
  if (v.kind == TokenizerKind::wpm) {
    if (v.sep != kNoToken) out.push_back(v.sep);
  } else if (v.add_eos) {
    out.push_back(v.eos);
  }
}

// Each special token in turn, longest first, is cut out of every plain
// fragment left by the ones before it. Without parse_special only
// user-defined tokens are cut out (Hugging Face pre-tokenizes added tokens
// that are not "special" always).
std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text,
                                                          bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});
  for (const TokenId id : specials_) {
    if (!parse_special && vocab_->types[id] != TokenType::user_defined) continue;
    split_on(text, id, fragments);
  }
  return fragments;
}

void Tokenizer::split_on(std::string_view text, TokenId special,
                         std::vector<Fragment>& fragments) const {
  const std::string& needle = vocab_->tokens[special];
  const uint8_t strip = vocab_->strip_flags(special);
  // Cheap rejection: most special tokens never occur in a given text.
  if (text.find(needle) == std::string_view::npos) return;
  std::vector<Fragment> result;
  result.reserve(fragments.size() + 2);
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      result.push_back(f);
      continue;
    }
    size_t begin = f.offset;
    const size_t end = f.offset + f.length;
    while (begin < end) {
      const size_t match = text.substr(0, end).find(needle, begin);
      if (match == std::string_view::npos) break;
      size_t left_end = match;
      if (strip & Vocab::kStripLeft) {
        while (left_end > begin && is_ascii_space(text[left_end - 1])) --left_end;
      }
      if (left_end > begin) result.push_back({kNoToken, begin, left_end - begin});
      result.push_back({special, 0, 0});
      begin = match + needle.size();
      if (strip & Vocab::kStripRight) {
        while (begin < end && is_ascii_space(text[begin])) ++begin;
      }
    }
    if (begin < end) result.push_back({kNoToken, begin, end - begin});
  }
  fragments = std::move(result);
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  const Vocab& v = *vocab_;
  if (id < 0 || static_cast<size_t>(id) >= v.size()) {
    throw Error(strfmt("token id %d is outside the vocabulary (%zu tokens)", id, v.size()));
  }
  if (!model_) return {};
  if (v.kind == TokenizerKind::rwkv) {
    // Every RWKV token is stored escaped and stands for its unescaped bytes,
    // whatever its type ([PADn] unused tokens included); control and
    // unknown ones are left out unless specials are rendered, as for every
    // model.
    const TokenType t = v.types[id];
    if (!render_special && (t == TokenType::control || t == TokenType::unknown)) return {};
    return model_->token_bytes(id);
  }
  switch (v.types[id]) {
    case TokenType::control:
    case TokenType::unknown:
      return render_special ? v.tokens[id] : std::string();
    case TokenType::user_defined:
      return v.tokens[id];
    case TokenType::normal:
    case TokenType::byte:
      return model_->token_bytes(id);
    case TokenType::unused:
    case TokenType::undefined:
      break;
  }
  return {};
}

std::string Tokenizer::output_piece(TokenId id, bool first, bool render_special) const {
  std::string piece = token_to_piece(id, render_special);
  // Only the very first token's space is the dummy prefix.
  if (first && vocab_->add_space_prefix && starts_with(piece, " ")) piece.erase(0, 1);
  return piece;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special,
                              bool remove_leading_space) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    text += output_piece(ids[i], i == 0 && remove_leading_space, render_special);
  }
  return vocab_->clean_spaces ? clean_spaces(std::move(text)) : text;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamDecoder::push(TokenId id) {
  pending_ += tokenizer_.output_piece(id, first_, render_special_);
  first_ = false;
  std::string out;
  pending_.erase(0, append_valid_utf8(pending_, /*final=*/false, out));
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  append_valid_utf8(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace cortiq
