// Byte reads for the K-quant decoders (after weight_bytes.glsl).

// The byte at any offset.
uint byte_at(uint offset) { return (weight_words[offset >> 2u] >> ((offset & 3u) * 8u)) & 0xFFu; }

// The signed byte at any offset.
int signed_byte_at(uint offset) { return bitfieldExtract(int(byte_at(offset)), 0, 8); }
