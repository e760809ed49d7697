// Strict UTF-8 decoding for the tokenizer models that work on code points
// (WordPiece, Gemma 4). Input text may hold any bytes; each byte that does
// not start a well-formed sequence (stray continuation byte, truncated
// sequence, overlong form, surrogate, value above U+10FFFF) decodes as one
// U+FFFD and decoding resumes at the next byte, as the peer does for the
// malformed sequences it detects.
#pragma once

#include <cstddef>
#include <string_view>

#include <utf8proc.h>

namespace cortiq::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

struct Decoded {
  char32_t cp;
  size_t len;  // bytes consumed, at least 1
  bool valid;  // false: `cp` is U+FFFD standing for one bad byte
};

inline Decoded decode(std::string_view text, size_t pos) {
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                                  static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
  if (n <= 0) return {kReplacement, 1, false};
  return {static_cast<char32_t>(cp), static_cast<size_t>(n), true};
}

inline void append(std::string& out, char32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

}  // namespace cortiq::utf8
