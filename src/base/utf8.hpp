// UTF-8 encoding of one code point, shared by the JSON reader and the
// template lexer (both turn \uXXXX escapes into text), and decoding of
// text already known to be valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cortiq {

// Appends the UTF-8 bytes of `cp` (at most U+10FFFF; callers validate).
inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The length of the UTF-8 sequence a lead byte announces (1 for a
// continuation byte), llama.cpp's unicode_len_utf8.
inline size_t utf8_sequence_length(unsigned char lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

// The code point of the whole UTF-8 sequence at text[pos] (valid UTF-8:
// callers check, and that the sequence fits), moving pos past it.
inline uint32_t next_utf8(std::string_view text, size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t length = utf8_sequence_length(lead);
  uint32_t cp = length == 1 ? lead : lead & (0x3Fu >> (length - 1));
  for (size_t k = 1; k < length; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3Fu);
  pos += length;
  return cp;
}

}  // namespace cortiq
