#!/usr/bin/env python3
"""Writes a small synthetic RWKV "world" vocabulary (tokenizer.ggml.model =
"rwkv") for the tokenizer test, laid out as llama.cpp's converter writes
the real ones (conversion/base.py, _set_vocab_rwkv_world): <s> at id 0
(control), then every token as Python's repr(bytes)[2:-1] (the 256 single
bytes first, so no byte is ever unknown), then [PADn] unused tokens; BOS
and EOS are <s>, EOT is "\\n\\n". On top of what the converter writes:

- pieces that overlap and nest (greedy longest match must pick the longest;
  a path through the trie that goes deeper than its last token),
- partial UTF-8 sequences as tokens, as the real vocabulary has them,
- escapes the converter never writes but llama.cpp's unescaper reads:
  uppercase hex ("\\x4A" is 'Q' there, by its digit arithmetic, so 'Q'
  gets a second, later id), a non-ASCII byte after "\\x", an unknown escape
  ("\\q" is 'q'), escapes cut short at the end, "\\'",
- two texts with the same bytes ("hi" and "\\x68i"; the later id wins;
  llama.cpp refuses two equal texts),
- a user-defined and a control token with an escape in their texts: split
  out of the text as written (the control one only when specials are
  parsed), matched by the trie as unescaped, decoded unescaped,
- add_bos_token = true, which llama.cpp's RWKV tokenizer ignores.

The file declares a Llama architecture so that llama.cpp loads it
vocab-only (the tokenizer does not depend on the architecture).

usage: rwkv_vocab.py OUT.gguf    (prints the number of tokens)
"""
import struct
import sys

U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9

NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5


def escaped(b):
    """The converter's token text: repr(bytes)[2:-1]."""
    return repr(bytes(b))[2:-1]


# Pieces as bytes (escaped by the converter's rule), in id order.
PIECES = [
    b"he", b"hel", b"hell", b"hello", b"llo", b"lo", b"hello world",
    b" world", b" wor", b"world", b"or", b"ld",
    b" the", b"the", b" a", b"an", b" an", b"and", b" and",
    b"ing", b"in", b" is", b"is",
    b"  ", b"   ", b"    ", b"\n\n", b"\r\n", b"\t\t", b" \n",
    b"12", b"123", b"1234", b"12345678",
    b"ab", b"abcd", b"bcd", b"cd",
    b"xyzzy",  # "xyzz" is no token: the walk goes past the last match
    b"it's", b"say \"it's\"", b"'\"", b"\\n", b"C:\\",
    "é".encode(), "caf".encode(), "café".encode(),
    "こん".encode(), "こんにちは".encode(), "日本".encode(), "日本語".encode(),
    "😀".encode(), "😀😀".encode(),
    b"\xe3\x81",  # the first two bytes of "こ" (and of "ん", "に", ...)
    b"\xf0\x9f",  # the first two bytes of an emoji
    b"\xff\xfe",
]

# Texts written as they stand (not through repr): escapes llama.cpp reads
# with results that a correct hex decoder would not give.
RAW_TEXTS = [
    "hi",
    "\\x68i",     # also "hi": the later id wins
    "\\x4A",      # uppercase hex: 'Q' in llama.cpp ('4' -> 4, 'A' -> 17)
    "\\xC3\\xA9!",  # "3\x19!" there, not "é!"
    "\\x\u00e9",  # the two UTF-8 bytes of "é" taken as hex digits: 0xA9
    "\\q\\z",     # unknown escapes: "qz"
    "\\'s",       # "'s"
    "end\\x4",    # a hex escape cut short: "end"
    "tail\\",     # a lone backslash at the end: "tail"
]


def main(path):
    tokens, types = [], []

    def add(text, kind):
        tokens.append(text)
        types.append(kind)

    add("<s>", CONTROL)
    for b in range(256):
        add(escaped([b]), NORMAL)
    for piece in PIECES:
        add(escaped(piece), NORMAL)
    for text in RAW_TEXTS:
        add(text, NORMAL)
    add("<tab\\t>", USER_DEFINED)  # split out as written, decoded as "<tab\t>"
    add("<|ctl\\n|>", CONTROL)  # split out as written only when specials are parsed
    eot = tokens.index(escaped(b"\n\n"))
    for i in range(len(tokens), len(tokens) + 8):
        add("[PAD%d]" % i, UNUSED)

    kvs = [
        ("general.architecture", STR, "llama"),
        ("llama.context_length", U32, 256),
        ("llama.embedding_length", U32, 64),
        ("llama.block_count", U32, 1),
        ("llama.feed_forward_length", U32, 128),
        ("llama.attention.head_count", U32, 4),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("tokenizer.ggml.model", STR, "rwkv"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 0),
        ("tokenizer.ggml.eos_token_id", U32, 0),
        ("tokenizer.ggml.eot_token_id", U32, eot),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
    ]
    out = bytearray(b"GGUF") + struct.pack("<IQQ", 3, 0, len(kvs))

    def string(s):
        e = s.encode("utf-8")
        return struct.pack("<Q", len(e)) + e

    def scalar(t, v):
        if t == STR:
            return string(v)
        return struct.pack({U32: "<I", I32: "<i", F32: "<f", BOOL: "<?"}[t], v)

    for key, t, v in kvs:
        out += string(key) + struct.pack("<I", t)
        if t == ARR:
            elem, items = v
            out += struct.pack("<IQ", elem, len(items))
            for item in items:
                out += scalar(elem, item)
        else:
            out += scalar(t, v)
    with open(path, "wb") as f:
        f.write(out)
    print(len(tokens))


if __name__ == "__main__":
    main(sys.argv[1])
