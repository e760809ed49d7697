#include "tokenizer/byte_unicode.hpp"

#include <array>

namespace cortiq {
namespace {

struct ByteTables {
  std::array<uint32_t, 256> codepoint{};
  std::array<std::string, 256> utf8;
  std::array<int16_t, 0x144> byte_of;  // code points in the alphabet are < U+0144

  ByteTables() {
    byte_of.fill(-1);
    uint32_t next_shifted = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      // GPT-2 keeps '!'..'~', '¡'..'¬' and '®'..'ÿ' as they are.
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : next_shifted++;
      codepoint[b] = cp;
      byte_of[cp] = static_cast<int16_t>(b);
      if (cp < 0x80) {
        utf8[b] = std::string(1, static_cast<char>(cp));
      } else {
        utf8[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) {
  return tables().codepoint[byte];
}

std::string_view byte_to_utf8(uint8_t byte) {
  return tables().utf8[byte];
}

std::optional<uint8_t> codepoint_to_byte(uint32_t cp) {
  if (cp >= tables().byte_of.size() || tables().byte_of[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().byte_of[cp]);
}

void append_byte_encoded(std::string_view bytes, std::string& out) {
  const auto& t = tables();
  for (char c : bytes) out += t.utf8[static_cast<uint8_t>(c)];
}

std::string byte_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  append_byte_encoded(bytes, out);
  return out;
}

std::optional<std::string> byte_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c0 = static_cast<uint8_t>(text[i]);
    uint32_t cp = c0;
    // The alphabet lies below U+0800: one- or two-byte UTF-8 only.
    if (c0 >= 0x80) {
      if ((c0 & 0xE0) != 0xC0 || i + 1 >= text.size()) return std::nullopt;
      const auto c1 = static_cast<uint8_t>(text[i + 1]);
      if ((c1 & 0xC0) != 0x80) return std::nullopt;
      cp = ((c0 & 0x1Fu) << 6) | (c1 & 0x3Fu);
      i += 2;
    } else {
      i += 1;
    }
    const auto byte = codepoint_to_byte(cp);
    if (!byte) return std::nullopt;
    out += static_cast<char>(*byte);
  }
  return out;
}

}  // namespace cortiq
