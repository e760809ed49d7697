#!/usr/bin/env python3
"""Writes a small synthetic PLaMo-2 vocabulary (tokenizer.ggml.model =
"plamo2") for the tokenizer test: PLaMo-2's four special tokens, the 256
byte tokens, then pieces of English, Japanese and emoji whose scores make
the best path non-trivial (overlapping pieces, ties between lengths, a
piece with a non-finite score; llama.cpp refuses duplicate texts). The file declares a
Llama architecture so that llama.cpp loads it vocab-only (the tokenizer
does not depend on the architecture).

usage: plamo2_vocab.py OUT.gguf
"""
import struct
import sys

U32, I32, F32, STR, ARR = 4, 5, 6, 8, 9

NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6


def pieces():
    """(text, score) of the non-byte, non-special tokens, in id order."""
    out = []
    for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,!?'\n\t-":
        out.append((c, -8.0))
    words = {
        "he": -5.0, "hel": -4.5, "hell": -4.0, "hello": -2.0, "llo": -4.0, "lo": -5.0,
        " world": -2.5, " wor": -4.0, "world": -3.0, "or": -5.5, "ld": -5.5,
        " the": -2.0, "the": -3.0, " a": -3.5, "an": -5.0, " an": -4.0, "and": -3.5, " and": -2.5,
        "ing": -3.0, "in": -4.5, "ng": -5.0, " is": -3.0, "is": -4.0, "  ": -6.0, "   ": -6.5,
        "\n\n": -5.0, " 1": -5.0, "12": -5.0, "123": -4.0, "1234": -3.9,
        # Ties: "ab" + "c" and "a" + "bc" against "abc" (the longest wins a tie).
        "ab": -1.0, "bc": -1.0, "abc": -10.0,
        "こ": -7.0, "ん": -7.0, "に": -7.0, "ち": -7.0, "は": -7.0, "こん": -5.0, "にち": -5.0,
        "こんにちは": -3.0, "日": -7.0, "本": -7.0, "語": -7.0, "日本": -4.0, "日本語": -3.5,
        "本語": -3.0, "東京": -4.0, "東": -7.0, "京": -7.0, "です": -4.0, "で": -7.0, "す": -7.0,
        "。": -6.0, "、": -6.0, "😀": -6.0, "é": -6.0, "café": -4.0,
    }
    out.extend(words.items())
    out.append(("xyz", float("nan")))  # never a piece
    out.append(("<|plamo:op|>", 0.0))  # a user-defined token, matched as text too
    return out


def main(path):
    tokens, scores, types = [], [], []

    def add(text, score, kind):
        tokens.append(text)
        scores.append(score)
        types.append(kind)

    add("<|plamo:unk|>", 0.0, UNKNOWN)
    add("<|plamo:bos|>", 0.0, CONTROL)
    add("<|plamo:eos|>", 0.0, CONTROL)
    add("<|plamo:pad|>", 0.0, CONTROL)
    for b in range(256):
        add("<0x%02X>" % b, 0.0, BYTE)
    for text, score in pieces():
        add(text, score, 4 if text.startswith("<|") else NORMAL)  # 4: user-defined

    kvs = [
        ("general.architecture", STR, "llama"),
        ("llama.context_length", U32, 256),
        ("llama.embedding_length", U32, 64),
        ("llama.block_count", U32, 1),
        ("llama.feed_forward_length", U32, 128),
        ("llama.attention.head_count", U32, 4),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("tokenizer.ggml.model", STR, "plamo2"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        ("tokenizer.ggml.scores", ARR, (F32, scores)),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
    ]
    out = bytearray(b"GGUF") + struct.pack("<IQQ", 3, 0, len(kvs))

    def string(s):
        e = s.encode("utf-8")
        return struct.pack("<Q", len(e)) + e

    def scalar(t, v):
        if t == STR:
            return string(v)
        return struct.pack({U32: "<I", I32: "<i", F32: "<f"}[t], v)

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


if __name__ == "__main__":
    main(sys.argv[1])
