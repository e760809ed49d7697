#!/usr/bin/env python3
"""Unigram (tokenizer.ggml.model = "t5") vocabularies and their goldens.

There is no real T5/XLM-R vocabulary among the shared files, so this writes
one: a deterministic Unigram vocabulary (about 2,500 tokens: "▁"-prefixed
words and pieces with log-probability scores, single characters including
multi-byte ones, <pad> </s> <unk>, user-defined, control and unused tokens)
and a precompiled_charsmap built here as SentencePiece lays it out (a
darts-clone double array, llama.cpp's "XCDA", plus NUL-terminated
replacements) with NFKC-like rules: full-width ASCII, ligatures, combining
sequences, half-width katakana, fractions, whitespace and deleted control
characters. Two files differ only in their flags:

  unigram-t5.gguf     add_space_prefix and remove_extra_whitespaces true (as
                      T5's converted files say), charsmap as u8
  unigram-plain.gguf  no flag keys (llama.cpp's defaults: both false),
                      charsmap as i8

  make_unigram_goldens.py vocab OUT_DIR
      writes the two files (byte for byte the same on every run).
  make_unigram_goldens.py goldens VOCAB_DIR OUT_DIR LLAMA_TOKENIZE PEER_DETOKENIZE INP_FILE...
      tokenizes every case with llama.cpp's llama-tokenize (specials not
      parsed, no BOS/EOS), decodes the ids with llama.cpp's llama_detokenize
      (peer-detokenize), and writes OUT_DIR/unigram-NAME.tsv.

The cases: every string of the shared .inp files (referenced by file and
index, never copied here), hand-written strings aimed at the normalizer and
the Viterbi tie-breaks, and seeded random strings (ASCII, whitespace runs,
multi-byte, unknown characters, invalid UTF-8, user-defined tokens).
Run through tools/peer/make-unigram-goldens.sh.
"""
import math
import os
import random
import struct
import subprocess
import sys

SPACE = "\u2581"

# ---------------------------------------------------------------- vocabulary

WORDS = """the of and to in is was for that on as with by he at from his an were are which
this be or had it not but first one their its new after who they have her she two been
other when there all during into school time may years more most only over city some world
would where later up such used many can state about national out known university united
then made year people also world could through between long called under three while before
game very part group no than around just new because both each being since through well
hello good day work house way water right old look write go see number sound word make
take get place made live back give most very after thing our just name sentence man think
say great where help through much before line turn cause same mean differ move boy follow
came want show also around form three small set put end does another well large must big
even such because turn here why ask went men read need land different home us move try kind
hand picture again change off play spell air away animal point page letter mother answer
found study still learn should america light thought head under story saw left few while
along might close something seem next hard open example begin life always those both paper
together got often run important until children side feet car mile night walk white sea
began grow took river four carry state once book hear stop without second late miss idea
enough eat face watch far real almost let above girl sometimes mountain cut young talk soon
list song being leave family apple tree code data model token text program function return
value string number error file line print input output system memory cpu test case month
months weather tokenizer language machine learning neural network train training""".split()

# Words in other scripts (multi-byte pieces); none is a test string.
FOREIGN = ("über für schön straße mädchen größe été français déjà garçon niño señor mañana "
           "на не что это как он она мы вы они дом город "
           "日本語 中国 東京 カタカナ ガラス キー").split()

# Single characters that are tokens. What is missing (most CJK, emoji, Thai,
# Khmer, ...) is unknown: runs of it become one <unk>.
ASCII_CHARS = [chr(c) for c in range(0x21, 0x7F)]
MULTIBYTE_CHARS = list("éèêëáàâäåçñöôóüúûíîïßÄÖÜÉ" "αβγδεμπω" "нещоаБъл"
                       "гркиясмдтвучзпбы" "我想在工作天中日本語国東京"
                       "カガキギタナラス" "⁄～€£¥©®°±×÷–—‘’“”•…žŽ") + ["😁", "\u0301"]

# (key, replacement): the charsmap's rules. Keys are the input byte strings
# (UTF-8), longest match wins; an empty replacement deletes the input.
def charsmap_rules():
    rules = {}
    for c in range(0xFF01, 0xFF5F):  # full-width ASCII
        rules[chr(c)] = chr(c - 0xFF01 + 0x21)
    for k, v in {
        "\u3000": " ", "\u00A0": " ", "\u2002": " ", "\u2003": " ",  # spaces
        "\t": " ", "\n": " ", "\f": " ",  # '\r' stays: an unknown character
        "\u200B": "", "\u00AD": "", "\u2060": "",  # deleted
        "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
        "\u00B2": "2", "\u00B3": "3", "\u00B9": "1", "\u00BD": "1\u20442", "\u00BC": "1\u20444",
        "\u2122": "TM", "\u2026": "...", "\u2116": "No", "\u2163": "IV", "\u2460": "1",
        "\u212B": "\u00C5", "\u00B5": "\u03BC", "\u33C2": "a.m.",
        "e\u0301": "\u00E9", "a\u030A": "\u00E5", "o\u0308": "\u00F6", "u\u0308": "\u00FC",
        "A\u0308": "\u00C4", "\u01C6": "d\u017E", "\u01C4": "D\u017D",
        "\uFF76": "\u30AB", "\uFF77": "\u30AD", "\uFF80": "\u30BF", "\uFF9E": "\u3099",
        "\uFF76\uFF9E": "\u30AC", "\uFF77\uFF9E": "\u30AE", "\uFF80\uFF9E": "\u30C0",
        # A replacement with spaces inside (NFKC of the ligature U+FDFA).
        "\uFDFA": "\u0635\u0644\u0649 \u0627\u0644\u0644\u0647 \u0639\u0644\u064A\u0647 \u0648\u0633\u0644\u0645",
    }.items():
        rules[k] = v
    for c in list(range(0x01, 0x09)) + [0x0B] + list(range(0x0E, 0x20)) + [0x7F]:
        rules[chr(c)] = ""  # control characters are deleted
    return rules


def build_charsmap(rules):
    """SentencePiece's precompiled charsmap: u32 trie size, darts-clone units, strings."""
    # Replacement strings, each stored once.
    blob = bytearray()
    offsets = {}
    for key in sorted(rules):
        rep = rules[key].encode()
        if rep not in offsets:
            offsets[rep] = len(blob)
            blob += rep + b"\0"
    # A byte trie of the keys.
    root = {"children": {}, "value": None}
    for key, rep in rules.items():
        node = root
        for b in key.encode():
            node = node["children"].setdefault(b, {"children": {}, "value": None})
        node["value"] = offsets[rep.encode()]
    # Double array: node at position p with BASE b has its child for byte c at
    # b ^ c (unit = offset << 10 | leaf << 8 | c, offset = p ^ b) and its value
    # at b ^ 0 (unit = 1 << 31 | value). Every BASE is used once, so a child
    # slot is never another node's.
    units = {0: 0}
    used_positions = {0}
    used_bases = set()
    queue = [(root, 0)]
    while queue:
        node, pos = queue.pop(0)
        labels = sorted(node["children"]) + ([0] if node["value"] is not None else [])
        b = 1
        while b in used_bases or any((b ^ l) in used_positions for l in labels):
            b += 1
        used_bases.add(b)
        offset = pos ^ b
        assert offset < (1 << 21), "offset needs the extended encoding"
        units[pos] = units.get(pos, 0) | (offset << 10)
        if node["value"] is not None:
            units[pos] |= 1 << 8
            units[b] = (1 << 31) | node["value"]
            used_positions.add(b)
        for c in sorted(node["children"]):
            units[b ^ c] = c
            used_positions.add(b ^ c)
            queue.append((node["children"][c], b ^ c))
    # Whole 256-unit blocks, as darts-clone writes them: every byte tried
    # from any BASE stays inside the array.
    size = (max(max(units), max(used_bases) | 0xFF) // 256 + 1) * 256
    array = b"".join(struct.pack("<I", units.get(i, 0)) for i in range(size))
    return struct.pack("<I", len(array)) + array + bytes(blob)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def build_vocab():
    """[(text, score, type)] in id order. Types: 1 normal, 2 unknown, 3 control,
    4 user-defined, 5 unused."""
    # User-defined tokens score -1000 in the file, as converted added tokens
    # do; llama.cpp's Viterbi scores them 0.
    vocab = [("<pad>", 0.0, 3), ("</s>", 0.0, 3), ("<unk>", 0.0, 2),
             ("<extra_id_0>", -1000.0, 4), ("<extra_id_1>", -1000.0, 4),
             # User-defined and starting with a character the charsmap maps:
             # llama.cpp's normalizer passes any text that follows a path of
             # the user-defined tokens' trie as it is, even part of a
             # character ("Ǆ" is C7 84: C7 passes, 84 becomes U+FFFD). No
             # other rule or common character starts with byte C7.
             ("\u01C6\u01C6", -1000.0, 4),  # "ǆǆ"
             ("<mask>", 0.0, 3),
             (SPACE + "xyzzy", -3.0, 5)]  # unused: matched, decodes to nothing
    # Piece counts over a Zipf-weighted corpus of the words.
    counts = {}
    words = WORDS + FOREIGN
    for rank, w in enumerate(words):
        weight = 1000.0 / (rank + 3)
        for form in (SPACE + w, w, SPACE + w.capitalize()):
            for i in range(len(form)):
                for j in range(i + 2, min(len(form), i + 8) + 1):
                    piece = form[i:j]
                    counts[piece] = counts.get(piece, 0.0) + weight
    total = sum(counts.values())
    pieces = sorted(counts, key=lambda p: (-counts[p], p))[:2200]
    for w in words:
        if SPACE + w not in pieces:
            pieces.append(SPACE + w)
    for extra in [SPACE + "1", "10", "00", "000", "19", "20", "33", "333", SPACE + "(", SPACE + "=",
                  "!!", ").", SPACE + "'", "'s", SPACE + '"', "...", "1\u20442", SPACE + "TM"]:
        if extra not in pieces:
            pieces.append(extra)
    seen = {t for t, _, _ in vocab}
    for i, p in enumerate(pieces):
        if p in seen:
            continue
        seen.add(p)
        score = math.log(counts.get(p, 1.0) / total)
        # Half the scores on a 1/16 grid: many exactly equal sums, so the
        # Viterbi's tie-breaks decide; the rest are plain float32 log-probs.
        if i % 2 == 0:
            score = round(score * 16) / 16
        vocab.append((p, f32(score), 1))
    # Single characters, lower than the pieces.
    chars = [SPACE] + ASCII_CHARS + MULTIBYTE_CHARS
    for i, c in enumerate(chars):
        if c in seen:
            continue
        seen.add(c)
        vocab.append((c, f32(-9.0 - (i % 7) * 0.5), 1))
    # A hand-set tie: " qzxw" is "▁qz"+"xw" or "▁q"+"zxw", both -12. And a
    # near-tie that only double sums see: " ~^^~" is "▁~"+"^^~" = -17 or
    # "▁~^"+"^~" = -17 + 2^-20, which a float sum rounds to -17.
    for text, score in [(SPACE + "qz", -6.0), ("xw", -6.0), (SPACE + "q", -6.0), ("zxw", -6.0),
                        (SPACE + "~", -8.0), ("^^~", -9.0), (SPACE + "~^", -8.0),
                        ("^~", -9.0 + 2.0 ** -20)]:
        if text not in seen:
            seen.add(text)
            vocab.append((text, score, 1))
    return vocab


def gguf_bytes(vocab, charsmap, variant):
    def s(b):
        return struct.pack("<Q", len(b)) + b

    kvs = []

    def kv(key, type_id, payload):
        kvs.append(s(key.encode()) + struct.pack("<I", type_id) + payload)

    def kv_str(key, value):
        kv(key, 8, s(value.encode()))

    def kv_u32(key, value):
        kv(key, 4, struct.pack("<I", value))

    def kv_bool(key, value):
        kv(key, 7, struct.pack("<?", value))

    def kv_array(key, elem_type, items):
        kv(key, 9, struct.pack("<IQ", elem_type, len(items)) + b"".join(items))

    # The shared vocab files' layout: a llama architecture with its hparams
    # (llama.cpp loads them vocab-only), then the tokenizer.* keys.
    kv_str("general.architecture", "llama")
    kv_str("general.name", "cortiq-unigram-" + variant)
    for key, value in [("block_count", 1), ("context_length", 512), ("embedding_length", 64),
                       ("feed_forward_length", 128), ("attention.head_count", 1),
                       ("attention.head_count_kv", 1), ("vocab_size", len(vocab)),
                       ("rope.dimension_count", 64)]:
        kv_u32("llama." + key, value)
    kv("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-6))
    kv_str("tokenizer.ggml.model", "t5")
    kv_str("tokenizer.ggml.pre", "default")
    kv_array("tokenizer.ggml.tokens", 8, [s(t.encode()) for t, _, _ in vocab])
    kv_array("tokenizer.ggml.scores", 6, [struct.pack("<f", sc) for _, sc, _ in vocab])
    kv_array("tokenizer.ggml.token_type", 5, [struct.pack("<i", ty) for _, _, ty in vocab])
    kv_u32("tokenizer.ggml.eos_token_id", 1)
    kv_u32("tokenizer.ggml.unknown_token_id", 2)
    kv_u32("tokenizer.ggml.padding_token_id", 0)
    if variant == "t5":
        kv_bool("tokenizer.ggml.add_space_prefix", True)
        kv_bool("tokenizer.ggml.remove_extra_whitespaces", True)
        kv_array("tokenizer.ggml.precompiled_charsmap", 0, [bytes([b]) for b in charsmap])
    else:
        kv_array("tokenizer.ggml.precompiled_charsmap", 1, [bytes([b]) for b in charsmap])
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    return header + b"".join(kvs)


VARIANTS = ["t5", "plain"]


def write_vocabs(out_dir):
    vocab = build_vocab()
    charsmap = build_charsmap(charsmap_rules())
    os.makedirs(out_dir, exist_ok=True)
    for variant in VARIANTS:
        with open(os.path.join(out_dir, f"unigram-{variant}.gguf"), "wb") as f:
            f.write(gguf_bytes(vocab, charsmap, variant))
    print(f"{len(vocab)} tokens, charsmap {len(charsmap)} bytes", file=sys.stderr)


# --------------------------------------------------------------------- cases

def split_inputs(raw):
    """The .inp format, split as tests/test_tokenizer_vocab_files.cpp does."""
    sep = b"\n__ggml_vocab_test__\n"
    out, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        if nxt < 0:
            out.append(raw[pos:])
            break
        out.append(raw[pos:nxt])
        pos = nxt + len(sep)
    return out


HAND = [
    "", " ", "   ", "hello world", " hello  world ", "Hello World", "HELLO",
    "\uFF28\uFF45\uFF4C\uFF4C\uFF4F\u3000\uFF57\uFF4F\uFF52\uFF4C\uFF44\uFF01",  # full-width
    "\ufb01nd the \ufb02ow of \ufb03ce", "cafe\u0301 a\u030Angstro\u0308m", "e\u0301e\u0301\u0301",
    "\uFF76\uFF9E\uFF77\uFF9E\uFF76\uFF80\uFF9E\uFF9E", "\u00BD \u00BC \u00B2\u00B3 \u2122 \u2026 \u2116",
    "a\u200Bb\u00ADc\u2060d", "tab\there\nnew\rline\fform\x0bvt",
    "\x01\x02hidden\x7f", "x\uFDFAy", "\u212B\u00B5m \u33C2 \u2163 \u2460",
    "<extra_id_0>", "a<extra_id_0>b<extra_id_1>c", "<extra", "<extra_id_2>", "<e>",
    # Full-width "<" normalizes to "<": the user-defined token appears only
    # after normalization, where the Viterbi scores it 0.
    "\uFF1Cextra_id_0>", "a \uFF1Cextra_id_1> b", "\uFF1Cextra_id_0\uFF1E",
    "\u01C6\u01C6", "\u01C6", "\u01C4", "x\u01C6\u01C6\u01C6y", "\u01C6 \u01C4 \u01C5",
    "</s>", "<pad><unk><mask>", "xyzzy", " xyzzy", " qzxw", "qzxw qzxw", "zxw", " ~^^~",
    "\U0001F999\U0001F999 \u0E01\u0E02 \u1780\u1781", "\u4E00\u4E8C\u4E09", "\U0001F601!",
    "3333333333", "1.000.000,00", "f(x) = x**2 + 1;", "  leading", "trailing   ",
    "\u3000\u3000ideographic\u3000", "\u00A0nbsp\u00A0\u00A0", "\u0301", "a\u0301\u0301",
]

HAND_BYTES = [
    b"\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc0\x80",
    b"\xed\xa0\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"a\x00b", b"\x00",
    b"\xc7\x86\xc7",  # a user-defined prefix cut inside a character
]


def random_cases(rng):
    words = WORDS + FOREIGN
    rules = list(charsmap_rules())
    unknown_ranges = [(0x0E01, 0x0E3A), (0x1780, 0x17B3), (0x4E00, 0x4FFF), (0x1F300, 0x1F64F),
                      (0x0530, 0x0586), (0x10A0, 0x10FF)]
    spaces = [" ", " ", " ", "  ", "\t", "\n", "\r", "\u3000", "\u00A0", "   ", "\n\n"]

    def word():
        w = rng.choice(words)
        r = rng.random()
        return w.capitalize() if r < 0.2 else w.upper() if r < 0.25 else w

    def unknown():
        lo, hi = rng.choice(unknown_ranges)
        return chr(rng.randint(lo, hi))

    def gen_ascii():
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            parts.append(word() if r < 0.6 else
                         "".join(rng.choice(ASCII_CHARS) for _ in range(rng.randint(1, 6))) if r < 0.85
                         else str(rng.randint(0, 10 ** rng.randint(1, 9))))
        return "".join(p + rng.choice([" ", " ", " ", "", ", ", ". "]) for p in parts)

    def gen_whitespace():
        out = rng.choice(["", rng.choice(spaces)])
        for _ in range(rng.randint(1, 8)):
            out += word() + "".join(rng.choice(spaces) for _ in range(rng.randint(1, 4)))
        return out

    def gen_multibyte():
        pool = MULTIBYTE_CHARS + rules + [rng.choice(FOREIGN) for _ in range(5)]
        return "".join(rng.choice(pool) + rng.choice(["", "", "", " "])
                       for _ in range(rng.randint(1, 20)))

    def gen_unknown():
        out = ""
        for _ in range(rng.randint(1, 10)):
            r = rng.random()
            out += (unknown() * rng.randint(1, 3) if r < 0.5 else word() if r < 0.8
                    else rng.choice(spaces))
        return out

    def gen_user_defined():
        pool = ["<extra_id_0>", "<extra_id_1>", "<extra", "<e", "\u01C6\u01C6", "\u01C6",
                "\u01C4", "\uFF0B", "<", ">"]
        return "".join(rng.choice(pool) if rng.random() < 0.5 else word() + rng.choice(spaces)
                       for _ in range(rng.randint(1, 8)))

    def gen_bytes():
        out = bytearray()
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.4:
                out += word().encode()
            elif r < 0.7:
                out += bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 3)))
            else:
                out += rng.choice([b"\xc3", b"\xe3\x81", b"\xf0\x9f", b"\x80", b"\xbf", b"\xc0\xaf",
                                   b"\xed\xbf\xbf", b"\xf7\xbf\xbf\xbf", b"\xfe", b" ", b"\x00"])
        return bytes(out)

    cases = []
    for name, gen in [("ascii", gen_ascii), ("whitespace", gen_whitespace),
                      ("multibyte", gen_multibyte), ("unknown", gen_unknown),
                      ("user", gen_user_defined), ("bytes", gen_bytes)]:
        for i in range(60):
            text = gen()
            cases.append((f"random:{name}:{i}", text if isinstance(text, bytes) else text.encode()))
    return cases


def all_cases(inp_files):
    cases = []
    seen = set()
    for path in inp_files:
        with open(path, "rb") as f:
            inputs = split_inputs(f.read())
        name = os.path.basename(path)
        for i, text in enumerate(inputs):
            if text in seen:
                continue
            seen.add(text)
            cases.append((f"inp:{name}:{i}", text))
    for i, text in enumerate(HAND):
        cases.append((f"hand:{i}", text.encode()))
    for i, text in enumerate(HAND_BYTES):
        cases.append((f"hand-bytes:{i}", text))
    cases += random_cases(random.Random(20261201))
    return cases


def escape(data):
    """Valid UTF-8 printable text as it is; \\\\, and \\xHH for control bytes,
    DEL, tabs/newlines and bytes that are not valid UTF-8 (read back by
    tests/test_tokenizer_ugm.cpp)."""
    out = []
    i = 0
    while i < len(data):
        b = data[i]
        n = 1 if b < 0x80 else 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else \
            4 if 0xF0 <= b <= 0xF4 else 0
        if n > 1:
            try:
                out.append(data[i:i + n].decode("utf-8"))
                i += n
                continue
            except UnicodeDecodeError:
                pass
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
        i += 1
    return "".join(out)


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_goldens(vocab_dir, out_dir, llama_tokenize, peer_detokenize, inp_files):
    cases = all_cases(inp_files)
    for variant in VARIANTS:
        model = os.path.join(vocab_dir, f"unigram-{variant}.gguf")
        rows = []
        id_lines = []
        for key, text in cases:
            run = subprocess.run([llama_tokenize, "-m", model, "--stdin", "--ids", "--no-bos",
                                  "--no-parse-special", "--no-escape", "--log-disable"],
                                 input=text, capture_output=True, check=True)
            line = run.stdout.decode().strip().splitlines()[-1]
            assert line.startswith("[") and line.endswith("]"), (key, run.stdout, run.stderr)
            ids = [int(x) for x in line[1:-1].replace(",", " ").split()]
            rows.append((key, text, ids))
            id_lines.append(" ".join(map(str, ids)))
        # llama.cpp's detokenization of each id list, one hex line each.
        run = subprocess.run([peer_detokenize, model], input="\n".join(id_lines).encode() + b"\n",
                             capture_output=True, check=True)
        decoded = [bytes.fromhex(h) for h in run.stdout.decode().split("\n")[:len(rows)]]
        assert len(decoded) == len(rows)
        path = os.path.join(out_dir, f"unigram-{variant}.tsv")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(f"# llama.cpp's ids for unigram-{variant}.gguf: llama-tokenize --ids --no-bos\n")
            f.write("# --no-parse-special --no-escape; regenerate: tools/peer/make-unigram-goldens.sh\n")
            f.write("# case<TAB>text (inp: cases name a string of ../shared/data/vocab)<TAB>ids"
                    "<TAB>llama_detokenize: '=' the text, else fnv1a64 of its bytes\n")
            lossless = 0
            for (key, text, ids), dec in zip(rows, decoded):
                shown = "" if key.startswith("inp:") else escape(text)
                same = dec == text
                lossless += same
                check = "=" if same else f"fnv1a64:{fnv1a64(dec):016x}"
                f.write(f"{key}\t{shown}\t{' '.join(map(str, ids))}\t{check}\n")
        print(f"{path}: {len(rows)} cases, {lossless} decode losslessly", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "vocab":
        write_vocabs(sys.argv[2])
    elif len(sys.argv) >= 6 and sys.argv[1] == "goldens":
        write_goldens(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    else:
        sys.exit(__doc__)
