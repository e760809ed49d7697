#include "tokenizer/pre_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <new>
#include <utility>

#include "base/error.hpp"
#include "base/log.hpp"

namespace cortiq {
namespace {

// ---------------------------------------------------------------------------
// The regexes. Most are the peer's, verbatim. Where the peer rewrote a
// tokenizer.json pattern only because std::regex cannot take it (the
// \p{Lu}/\p{Ll} classes of tekken, gpt-4o and youtu, which the peer's
// category-collapsing reduces to \p{L}; the class intersections of kimi-k2),
// we use the original, which PCRE2 understands, so the split is the one the
// model was trained with. Known consequences, checked against the peer:
// "iPhone" is " i"+"Phone" for kimi-k2/youtu/tekken-style patterns, and
// combining marks (\p{M}) stay in their word for gpt-4o and tekken. Our
// digit grouping (tiny_aya, afmoe) keeps the text before a digit run as its
// own piece (tokenizers' "Isolated"); the peer glues it to the first group.
// Case-insensitive contractions keep the peer's '[sS] form: (?i) would also
// fold U+017F and U+212A.
// ---------------------------------------------------------------------------

constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";

#define CORTIQ_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

constexpr const char* kLlama3 = CORTIQ_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char* kJais2 = CORTIQ_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";

constexpr const char* kQwen2 = CORTIQ_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char* kQwen35 = CORTIQ_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char* kSeedCoder = CORTIQ_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char* kBailing =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";

constexpr const char* kExaoneMoe = CORTIQ_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";

constexpr const char* kMiniCpm5 = CORTIQ_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

#define CORTIQ_UPPER R"re([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])re"
#define CORTIQ_LOWER R"re([\p{Ll}\p{Lm}\p{Lo}\p{M}])re"

constexpr const char* kTekken =
    R"re([^\r\n\p{L}\p{N}]?)re" CORTIQ_UPPER "*" CORTIQ_LOWER
    R"re(+|[^\r\n\p{L}\p{N}]?)re" CORTIQ_UPPER "+" CORTIQ_LOWER
    R"re(*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?)re" CORTIQ_UPPER "*" CORTIQ_LOWER "+" CORTIQ_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?)re" CORTIQ_UPPER "+" CORTIQ_LOWER "*" CORTIQ_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// tokenization_kimi.py's [X&&[^\p{Han}]] written as a negative lookahead.
#define CORTIQ_K2_UPPER R"re((?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]))re"
#define CORTIQ_K2_LOWER R"re((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}]))re"

constexpr const char* kKimiK2 =
    R"re(\p{Han}+|[^\r\n\p{L}\p{N}]?)re" CORTIQ_K2_UPPER "*" CORTIQ_K2_LOWER "+" CORTIQ_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?)re" CORTIQ_K2_UPPER "+" CORTIQ_K2_LOWER "*" CORTIQ_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char* kDeepseekV3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr const char* kStarcoderMain = kGpt2;

// A step is a regex, or the peer's hand-written digit grouping (runs of
// \p{N} cut into groups of three from the right: 1234567 -> 1 234 567).
enum class StepKind { regex, digit_groups };

struct StepSpec {
  StepKind kind;
  const char* pattern;
};

struct PreSpec {
  std::vector<StepSpec> steps;
  bool ignore_merges = false;
};

StepSpec re(const char* pattern) {
  return {StepKind::regex, pattern};
}
StepSpec digit_groups() {
  return {StepKind::digit_groups, R"re(\p{N}+)re"};
}

PreSpec default_spec() {
  return {
      {re(R"re([\p{P}\$\+<=>\^~\|]+)re"), re(kGpt2), re(R"re(\p{N}+)re"), re("[0-9][0-9][0-9]")}};
}

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (auto n : names)
    if (n == name) return true;
  return false;
}

// The peer's mapping of tokenizer.ggml.pre names to regex sets
// (llama-vocab.cpp). Non-ASCII code points are written as \x{...} so that
// no editor or normalizer can change them (U+1FD3 and U+0390 look alike). nullopt-like: empty steps
// for an unknown name.
PreSpec spec_for(std::string_view n) {
  if (n == "default") return default_spec();
  if (is_one_of(n, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                    "midm-2.0", "lfm2", "jina-v5-nano"}))
    return {{re(kLlama3)}, true};
  if (is_one_of(n, {"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"})) return {{re(kLlama3)}};
  if (n == "jais-2") return {{re(kJais2)}};
  if (n == "minicpm5") return {{re(R"re(\p{N}{1,3})re"), re(kMiniCpm5)}, true};
  if (n == "deepseek-llm")
    return {
        {re("[\r\n]"),
         re(R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re"),
         re(R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re"),
         re("\\s+$"), re(R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re"),
         re(R"re(\p{N}+)re")}};
  if (is_one_of(n, {"deepseek-v3", "hunyuan-dense", "joyai-llm"}))
    return {{re(R"re(\p{N}{1,3})re"),
             re(R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re"),
             re(kDeepseekV3Main)}};
  if (n == "youtu")
    return {
        {re(R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C}\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re"),
         re(R"re([^\r\n\p{L}\p{N}]?)re" CORTIQ_UPPER "*" CORTIQ_LOWER "+" CORTIQ_CONTRACTIONS
            R"re(?|[^\r\n\p{L}\p{N}]?)re" CORTIQ_UPPER "+" CORTIQ_LOWER "*" CORTIQ_CONTRACTIONS
            R"re(?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re")},
        true};
  if (n == "deepseek-coder")
    return {{re("[\r\n]"), re(R"re(\s?\p{L}+)re"), re(R"re(\s?\p{P}+)re"),
             re(R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re"),
             re(R"re(\p{N})re")}};
  if (n == "falcon")
    return {{re(R"re([\p{P}\$\+<=>\^~\|`]+)re"), re(kGpt2), re("[0-9][0-9][0-9]")}};
  if (is_one_of(n, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                    "minerva-7b", "mellum2"}))
    return {{re(R"re(\p{N})re"), re(kStarcoderMain)}};
  if (is_one_of(n, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
                    "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe",
                    "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"}))
    return {{re(kGpt2)}};
  if (is_one_of(n, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2",
                    "hunyuan", "solar-open", "grok-2"}))
    return {{re(kQwen2)}};
  if (n == "qwen35") return {{re(kQwen35)}};
  if (is_one_of(n, {"poro-chat", "bloom", "gpt3-finnish"}))
    return {{re(R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re")}};
  if (n == "viking")
    return {{re(R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re"),
             re(R"re(\p{N})re")}};
  if (n == "tekken") return {{re(kTekken)}, true};
  if (n == "chameleon")
    return {{re("<sentinel:[0-9]+>"), re("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"),
             re("([\\t\\n]|    |  )"), re(R"re(\p{N})re"), re(R"re([\p{P}!-/:-@\[-`{-~])re"),
             re(kGpt2)}};
  if (is_one_of(n, {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) return {{re(kGpt4o)}};
  if (n == "granite-embed-multi-97m") return {{re(kGpt4o)}, true};
  if (is_one_of(n, {"tiny_aya", "cohere2moe"})) return {{digit_groups(), re(kGpt4o)}};
  if (n == "kimi-k2") return {{re(kKimiK2)}};
  if (n == "superbpe") return {{re(R"re(\p{N}+)re"), re(R"re((?=(\d{3})+(?!\d)))re")}};
  if (is_one_of(n, {"bailingmoe", "bailingmoe2", "llada-moe"})) return {{re(kBailing)}};
  if (n == "seed-coder") return {{re(kSeedCoder)}};
  if (n == "afmoe")
    return {
        {digit_groups(),
         re(R"re([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{8C48}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{E40}-\x{E7F}\x{E80}-\x{EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)re"),
         re(kDeepseekV3Main)}};
  if (n == "laguna") return {{re(R"re([^\n]+|[\n]+)re"), re(kQwen2)}};
  if (n == "exaone-moe") return {{re(kExaoneMoe)}};
  return {};
}

// The peer's \s is Unicode White_Space (it substitutes a vertical tab for
// every non-ASCII space before running std::regex); PCRE2's UCP \s is
// property Z plus ASCII spaces, which misses U+0085. So \s and \S become
// this explicit set, and \d becomes ASCII as in ECMAScript.
constexpr std::string_view kWhiteSpaceSet =
    R"re(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})re";
constexpr std::string_view kNonAsciiWhiteSpace =
    R"re([\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}])re";

// The peer runs a regex without Unicode categories on code points where
// every non-ASCII space has become U+000B, so its literal ranges never match
// one (U+3000 lies inside deepseek's [\x{800}-\x{4E00}]). We reproduce that
// by keeping those spaces out of such positive classes.
bool peer_uses_raw_code_points(std::string_view pattern) {
  for (std::string_view cat : {"\\p{N}", "\\p{L}", "\\p{P}", "\\p{M}", "\\p{S}", "\\p{Lu}",
                               "\\p{Ll}", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}"})
    if (pattern.find(cat) != std::string_view::npos) return false;
  return true;
}

// Index of the ']' closing the class opened at `open`.
size_t class_end(std::string_view pattern, size_t open) {
  size_t i = open + 1;
  while (i < pattern.size() && pattern[i] != ']') i += pattern[i] == '\\' ? 2 : 1;
  return i;
}

std::string translate_pattern(std::string_view pattern) {
  const bool raw = peer_uses_raw_code_points(pattern);
  std::string out;
  bool in_class = false;
  bool guarded = false;  // the open class is wrapped in a lookahead group
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceSet) : "[" + std::string(kWhiteSpaceSet) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceSet) + "]";
      } else if (e == 'd') {
        out += in_class ? "0-9" : "[0-9]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      const size_t end = class_end(pattern, i);
      guarded = raw && i + 1 < pattern.size() && pattern[i + 1] != '^' &&
                pattern.substr(i, end - i).find("\\x{") != std::string_view::npos;
      if (guarded) out += "(?:(?!" + std::string(kNonAsciiWhiteSpace) + ")";
      out += c;
      continue;
    }
    out += c;
    if (c == ']' && in_class) {
      in_class = false;
      if (guarded) out += ')';
      guarded = false;
    }
  }
  return out;
}

size_t utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// A resource limit (not a mismatch) leaves the rest of the piece as one
// word; said once per process so a log is not flooded.
void warn_match_error(int rc) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(rc, message, sizeof message);
  LOG_WARN("pre-tokenizer regex failed (%s); the rest of the piece stays one word",
           reinterpret_cast<const char*>(message));
}

}  // namespace

struct PreTokenizer::Step {
  StepKind kind;
  pcre2_code* code = nullptr;
  bool jit = false;

  Step(StepKind k, std::string_view pattern) : kind(k) {
    const std::string translated = translate_pattern(pattern);
    int error = 0;
    PCRE2_SIZE offset = 0;
    // DOLLAR_ENDONLY: ECMAScript's $ does not match before a final newline.
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                         PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw Error("pre-tokenizer regex does not compile at " + std::to_string(offset) + ": " +
                  reinterpret_cast<const char*>(message));
    }
    jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  }
  ~Step() { pcre2_code_free(code); }
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;

  int match(std::string_view subject, size_t start, uint32_t options, pcre2_match_data* md) const {
    const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
    // The text was validated (or sanitized) once up front.
    if (jit && options == 0) return pcre2_jit_match(code, s, subject.size(), start, 0, md, nullptr);
    return pcre2_match(code, s, subject.size(), start, options | PCRE2_NO_UTF_CHECK, md, nullptr);
  }

  // Splits one piece into words, appending to `out`.
  void apply(std::string_view piece, pcre2_match_data* md,
             std::vector<std::string_view>& out) const {
    size_t prev = 0;  // end of the last word emitted
    size_t pos = 0;
    uint32_t options = 0;
    auto emit = [&](size_t end, bool matched) {
      if (end > prev) emit_word(piece.substr(prev, end - prev), matched, out);
      prev = end;
    };
    while (pos <= piece.size()) {
      const int rc = match(piece, pos, options, md);
      if (rc < 0) {
        if (rc != PCRE2_ERROR_NOMATCH) warn_match_error(rc);
        if (options == 0) break;
        // No non-empty match at an empty match's position: step one char.
        options = 0;
        if (pos >= piece.size()) break;
        pos += utf8_len(static_cast<unsigned char>(piece[pos]));
        continue;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      emit(ov[0], false);  // the unmatched gap before the match is a word too
      emit(ov[1], true);
      pos = ov[1];
      // After an empty match, retry at the same place asking for a
      // non-empty one, as std::regex_iterator does.
      options = ov[0] == ov[1] ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
    }
    emit(piece.size(), false);
  }

  void emit_word(std::string_view word, bool matched, std::vector<std::string_view>& out) const {
    if (kind == StepKind::regex || !matched) {
      out.push_back(word);
      return;
    }
    // digit_groups: a match is a run of \p{N}; cut it from the right into
    // threes, the leading group taking the remainder.
    const auto* p = reinterpret_cast<const unsigned char*>(word.data());
    std::vector<size_t> starts;
    for (size_t i = 0; i < word.size(); i += utf8_len(p[i])) starts.push_back(i);
    if (starts.size() <= 3) {
      out.push_back(word);
      return;
    }
    size_t first = starts.size() % 3 == 0 ? 3 : starts.size() % 3;
    size_t begin = 0;
    for (size_t k = first; k <= starts.size(); k += 3) {
      const size_t end = k == starts.size() ? word.size() : starts[k];
      out.push_back(word.substr(begin, end - begin));
      begin = end;
    }
  }
};

PreTokenizer::PreTokenizer(std::string_view name) : name_(name) {
  PreSpec spec = spec_for(name);
  if (spec.steps.empty()) {
    // Like the peer, keep going with the GPT-2-era default: ids will differ
    // from the model's training for some texts, which the warning says.
    LOG_WARN("%s pre-tokenizer '%.*s': using 'default'; tokenization may be degraded",
             name.empty() ? "missing" : "unknown", static_cast<int>(name.size()), name.data());
    name_ = "default";
    spec = default_spec();
  }
  ignore_merges_ = spec.ignore_merges;
  for (const auto& step : spec.steps)
    steps_.push_back(std::make_unique<Step>(step.kind, step.pattern));
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const auto& step : steps_) {
    const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(step->code, nullptr), &pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    next.clear();
    for (auto piece : pieces) step->apply(piece, md.get(), next);
    pieces.swap(next);
  }
  words.insert(words.end(), pieces.begin(), pieces.end());
}

namespace {

// Length of the well-formed UTF-8 sequence at text[i], or 0.
size_t valid_sequence_length(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c0 = b(0);
  if (c0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    n = 2;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    n = 3;
    if (c0 == 0xE0) lo = 0xA0;  // overlong
    if (c0 == 0xED) hi = 0x9F;  // surrogates
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    n = 4;
    if (c0 == 0xF0) lo = 0x90;  // overlong
    if (c0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((b(k) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    // ASCII runs are the common case; skip them cheaply.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const size_t n = valid_sequence_length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace cortiq
