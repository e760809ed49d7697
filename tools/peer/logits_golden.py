#!/usr/bin/env python3
"""Turns the peer's raw logits (peer-logits -o, float32 [n_pos][n_vocab]) into
a compact golden file the tests read (tests/golden/logits/NAME.logits).

Format (little-endian):
  "CQLG", u32 version (1), u32 n_pos, u32 n_vocab, u32 n_cols
  i32 ids[n_pos]          the input token ids
  i32 cols[n_cols]        which vocabulary columns are stored (all of them
                          when n_vocab <= 4096, else a stride sample plus
                          each position's 8 best)
  per position: f64 logsumexp over the full row, i32 argmax (lowest id on
                ties), f32 logits[n_cols]
Standard library only.
"""
import array
import math
import struct
import sys

FULL_LIMIT = 4096
SAMPLE = 1024
TOP = 8


def main():
    raw_path, ids_text, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    ids = [int(t) for t in ids_text.split()]
    data = array.array("f")
    with open(raw_path, "rb") as f:
        data.frombytes(f.read())
    if sys.byteorder != "little":
        data.byteswap()
    n_pos = len(ids)
    n_vocab = len(data) // n_pos
    assert n_vocab * n_pos == len(data), "logits file size does not match the ids"
    rows = [data[p * n_vocab:(p + 1) * n_vocab] for p in range(n_pos)]
    if n_vocab <= FULL_LIMIT:
        cols = list(range(n_vocab))
    else:
        chosen = set(range(0, n_vocab, n_vocab // SAMPLE))
        for row in rows:
            best = sorted(range(n_vocab), key=lambda i: (-row[i], i))[:TOP]
            chosen.update(best)
        cols = sorted(chosen)
    with open(out_path, "wb") as out:
        out.write(b"CQLG" + struct.pack("<IIII", 1, n_pos, n_vocab, len(cols)))
        out.write(struct.pack("<%di" % n_pos, *ids))
        out.write(struct.pack("<%di" % len(cols), *cols))
        for row in rows:
            m = max(row)
            lse = m + math.log(math.fsum(math.exp(v - m) for v in row))
            best = max(range(n_vocab), key=lambda i: (row[i], -i))
            out.write(struct.pack("<di", lse, best))
            out.write(struct.pack("<%df" % len(cols), *[row[c] for c in cols]))


if __name__ == "__main__":
    main()
