#!/usr/bin/env python3
"""onnx_seed.py - make a fuzz_onnx seed (fuzz/corpus/onnx/) from a
libonnx-testdata case, at the protobuf wire level (no onnx package needed):
the graph inputs from index KEEP on become initializers holding the case's
test_data_set_0/input_<i>.pb, so inputs our ops need as constants (Reshape's
shape, Slice's starts, ...) are folded and the model imports and runs.

    python3 fuzz/onnx_seed.py /usr/share/libonnx-testdata/data/node/test_slice 1 \
        fuzz/corpus/onnx/slice.onnx
"""
import sys

def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1
        r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i

def enc_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7f; v >>= 7
        if v: out.append(c | 0x80)
        else: out.append(c); return bytes(out)

def fields(b):
    i = 0; out = []
    while i < len(b):
        key, j = varint(b, i); f, wt = key >> 3, key & 7
        if wt == 0: _, k = varint(b, j)
        elif wt == 1: k = j + 8
        elif wt == 5: k = j + 4
        elif wt == 2:
            n, j2 = varint(b, j); k = j2 + n
        else: raise ValueError(wt)
        out.append((f, wt, b[i:k], b[(j2 if wt == 2 else j):k]))
        i = k
    return out

def ld(f, payload): return enc_varint(f << 3 | 2) + enc_varint(len(payload)) + payload

case, keep, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = open(case + '/model.onnx', 'rb').read()
res = bytearray()
for f, wt, raw, payload in fields(model):
    if f != 7: res += raw; continue
    g = bytearray(); idx = 0; inits = []
    for gf, gwt, graw, gp in fields(payload):
        if gf == 11:
            name = [p for ff, _, _, p in fields(gp) if ff == 1][0]
            if idx >= keep:
                t = open('%s/test_data_set_0/input_%d.pb' % (case, idx), 'rb').read()
                t = b''.join(r for ff, _, r, _ in fields(t) if ff != 8) + ld(8, name)
                inits.append(ld(5, t))
                idx += 1
                continue
            idx += 1
        g += graw
    for t in inits: g += t
    res += ld(7, bytes(g))
open(out, 'wb').write(bytes(res))
