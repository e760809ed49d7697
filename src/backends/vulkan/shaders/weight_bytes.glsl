// Little-endian reads at byte offsets of `weight_words` (a uint[] storage
// buffer the including shader declares). The host pads every buffer to a
// whole number of words, so a read that straddles two words stays inside.

// The 32 bits at any byte offset.
uint load_u32(uint offset) {
  const uint i = offset >> 2u;
  const uint shift = (offset & 3u) * 8u;
  const uint low = weight_words[i];
  if (shift == 0u) return low;
  return (low >> shift) | (weight_words[i + 1u] << (32u - shift));
}

// The 16 bits at an even byte offset (never straddles a word).
uint load_u16(uint offset) {
  return (weight_words[offset >> 2u] >> ((offset & 2u) * 8u)) & 0xFFFFu;
}

// An IEEE half at an even byte offset.
float load_f16(uint offset) { return unpackHalf2x16(load_u16(offset)).x; }
