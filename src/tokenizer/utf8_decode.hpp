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

// Bytes of the UTF-8 character at `pos` if it is structurally valid (lead
// byte and continuation bytes only, overlong forms and surrogates included:
// llama.cpp's unicode_cpt_from_utf8), else 0.
inline size_t structural_length(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  size_t len = 0;
  if (lead < 0x80) return 1;
  if ((lead & 0x40) == 0) return 0;  // a continuation byte
  if ((lead & 0x20) == 0) {
    len = 2;
  } else if ((lead & 0x10) == 0) {
    len = 3;
  } else if ((lead & 0x08) == 0) {
    len = 4;
  } else {
    return 0;
  }
  if (pos + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(text[pos + k]) & 0xC0) != 0x80) return 0;
  }
  return len;
}

inline void append(std::string& out, char32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

}  // namespace cortiq::utf8
