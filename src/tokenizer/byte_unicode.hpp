// The GPT-2 byte-level alphabet: every byte 0..255 stands for one printable
// Unicode character, so that byte-level BPE vocabularies can store arbitrary
// bytes (spaces, control bytes, halves of UTF-8 sequences) as visible text.
// Printable Latin-1 bytes map to themselves; the other 68 map, in byte order,
// to U+0100.. (space 0x20 -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cortiq {

// The code point that stands for `byte`.
uint32_t byte_to_codepoint(uint8_t byte);
// The UTF-8 of that code point (one or two bytes).
std::string_view byte_to_utf8(uint8_t byte);
// The byte a code point stands for; nullopt outside the alphabet.
std::optional<uint8_t> codepoint_to_byte(uint32_t cp);

// Raw bytes -> their alphabet characters, UTF-8 encoded.
void append_byte_encoded(std::string_view bytes, std::string& out);
std::string byte_encode(std::string_view bytes);
// The inverse; nullopt when `text` is not valid UTF-8 or holds a character
// outside the alphabet (added tokens are often stored as plain text).
std::optional<std::string> byte_decode(std::string_view text);

}  // namespace cortiq
