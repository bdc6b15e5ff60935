#!/usr/bin/env python3
"""Check a PNG written by examples/python/heatmap.py (ctest python_heatmap).

    check_heatmap.py --render examples/python/heatmap.py [heatmap options]   # render, check
    check_heatmap.py --png FILE [heatmap options]                            # check a file

The heatmap options (--seq-q, --seq-k, --causal, --window-left, --window-right, --pad, --pad-with,
--heads, --head, --head-dim, --scale, --seed, --vmax, --cell) are the ones the picture was made
with; --render runs the tool with them into a temporary directory first (removed afterwards).

The PNG is read here in pure Python: the signature, every chunk's CRC, IHDR, the IDAT stream
(zlib), un-filtering (all five filter types), IEND last. Then, against the options (the
"attn:heatmap" tEXt chunk must agree with them):
* the image size is the recorded one and the grid sits where seq_q x seq_k cells of --cell
  pixels say: its frame, the lines between cells, background around it;
* each (query, key) is classed from the options by this file's own reading of the rules in
  capi/attn.h (causal, window, padding), not by the tool's code and not from weights == 0;
  the library's weights (attn.Desc.weights on the tool's inputs) must be exactly 0 on the
  hidden and padded cells, positive on the visible ones (so a case whose visible weights
  underflow to 0.0, e.g. --scale 40, fails here although the tool draws it correctly);
* every padded column is the padding colours (dark grey + hatch) in every row, every hidden
  cell the hidden colours (light grey + hatch), every visible cell one flat colour of the
  colour map;
* the colours follow the weights: a larger weight never gets a lower colour-map level, the
  brightest cell of each row holds the row's largest weight, and each level is the weight's
  (round(weight / vmax * 255), +-1).
Exits 0 and prints one "OK" line, or prints every failure (up to 20) and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

sys.dont_write_bytecode = True   # importing the tool must not write into the source tree

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_TOOL = os.path.join(ROOT, "examples", "python", "heatmap.py")


# ------------------------------------------------------------------------------------------
# PNG reader
# ------------------------------------------------------------------------------------------

class PngError(Exception):
    pass


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(data: bytes):
    """Parse a non-interlaced 8-bit RGB or RGBA PNG. Returns (width, height, channels, rows,
    text, info): rows = list of bytearrays (width * channels bytes each, un-filtered), text =
    {keyword: str} of the tEXt chunks, info = {"chunks": [...types], "filters": set()}."""
    sig = b"\x89PNG\r\n\x1a\n"
    if data[:8] != sig:
        raise PngError("bad signature %r" % data[:8])
    pos, chunks, idat, text = 8, [], [], {}
    ihdr = None
    while True:
        if pos + 8 > len(data):
            raise PngError("truncated chunk header at byte %d" % pos)
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length or pos + 12 + length > len(data):
            raise PngError("truncated %r chunk at byte %d" % (kind, pos))
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise PngError("CRC mismatch in %r chunk at byte %d" % (kind, pos))
        chunks.append(kind.decode("latin-1"))
        pos += 12 + length
        if len(chunks) == 1 and kind != b"IHDR":
            raise PngError("first chunk is %r, not IHDR" % kind)
        if kind == b"IHDR":
            if len(chunks) != 1 or length != 13:
                raise PngError("misplaced or malformed IHDR")
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            if idat and chunks[-2] != "IDAT":
                raise PngError("IDAT chunks are not consecutive")
            idat.append(body)
        elif kind == b"tEXt":
            key, _, value = body.partition(b"\x00")
            text[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"IEND":
            if length != 0:
                raise PngError("IEND has data")
            if pos != len(data):
                raise PngError("%d bytes after IEND" % (len(data) - pos))
            break
        elif not (kind[0] & 0x20):
            raise PngError("unknown critical chunk %r" % kind)
    width, height, depth, ctype, comp, filt, interlace = ihdr
    if width == 0 or height == 0:
        raise PngError("empty image %dx%d" % (width, height))
    if depth != 8 or ctype not in (2, 6) or comp != 0 or filt != 0 or interlace != 0:
        raise PngError("unsupported IHDR: depth %d, colour type %d, compression %d, filter %d, "
                       "interlace %d" % (depth, ctype, comp, filt, interlace))
    if not idat:
        raise PngError("no IDAT")
    raw = zlib.decompress(b"".join(idat))
    ch = 3 if ctype == 2 else 4
    stride = width * ch
    if len(raw) != height * (stride + 1):
        raise PngError("IDAT holds %d bytes, expected %d" % (len(raw), height * (stride + 1)))
    rows, prev, filters = [], bytearray(stride), set()
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        filters.add(f)
        if f == 0:
            pass
        elif f == 1:
            for x in range(ch, stride):
                line[x] = (line[x] + line[x - ch]) & 0xFF
        elif f == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 0xFF
        elif f == 3:
            for x in range(stride):
                left = line[x - ch] if x >= ch else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 0xFF
        elif f == 4:
            for x in range(stride):
                left = line[x - ch] if x >= ch else 0
                upleft = prev[x - ch] if x >= ch else 0
                line[x] = (line[x] + _paeth(left, prev[x], upleft)) & 0xFF
        else:
            raise PngError("row %d has filter type %d" % (y, f))
        rows.append(line)
        prev = line
    return width, height, ch, rows, text, {"chunks": chunks, "filters": filters}


# ------------------------------------------------------------------------------------------
# The rules, read from capi/attn.h independently of the tool
# ------------------------------------------------------------------------------------------

def expected_class(i, j, seq_q, seq_k, causal, wl, wr, pad, pad_with):
    """"visible", "hidden" or "padded" for query i, key j."""
    if j >= seq_k - pad:
        return "padded"
    len_k = seq_k - pad if pad_with == "seq_lens_k" else seq_k
    diag = i + len_k - seq_q if causal == "bottom-right" else i
    if causal in ("top-left", "bottom-right") and j > diag:
        return "hidden"
    if wl != -1 and j < diag - wl:
        return "hidden"
    if wr != -1 and j > diag + wr:
        return "hidden"
    return "visible"


# ------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--png")
    pre.add_argument("--render", metavar="TOOL")
    pre.add_argument("--tool", default=None, help="heatmap.py to import (default: --render's, "
                                                  "else examples/python/heatmap.py)")
    mine, rest = pre.parse_known_args(argv)
    if (mine.png is None) == (mine.render is None):
        print("check_heatmap: give exactly one of --png FILE, --render TOOL", file=sys.stderr)
        return 2
    tool = os.path.abspath(mine.tool or mine.render or DEFAULT_TOOL)
    sys.path.insert(0, os.path.dirname(tool))
    import heatmap                                    # colours, the inputs, its options
    import numpy as np
    import attn

    parser = heatmap.build_parser()
    a = parser.parse_args(rest)
    heatmap.check_args(parser, a)

    tmp = None
    try:
        if mine.render:
            tmp = tempfile.TemporaryDirectory(prefix="attn-heatmap-")
            png = os.path.join(tmp.name, "heatmap.png")
            cmd = [sys.executable, tool] + rest + ["--out", png]
            print("$ " + " ".join(cmd))
            sys.stdout.flush()
            r = subprocess.run(cmd)
            if r.returncode != 0:
                print("check_heatmap: the tool exited with %d" % r.returncode)
                return 1
        else:
            png = mine.png
        with open(png, "rb") as f:
            data = f.read()
        return check(data, a, heatmap, np, attn)
    finally:
        if tmp is not None:
            tmp.cleanup()


def check(data, a, heatmap, np, attn) -> int:
    failures = []

    def fail(msg):
        failures.append(msg)

    try:
        width, height, ch, rows, text, info = read_png(data)
    except (PngError, zlib.error) as e:
        print("check_heatmap: FAIL: not a valid PNG: %s" % e)
        return 1

    def px(x, y):
        r = rows[y]
        return (r[x * ch], r[x * ch + 1], r[x * ch + 2])

    # the recorded parameters must be the ones we were given
    meta = json.loads(text.get("attn:heatmap", "{}"))
    given = {"seq_q": a.seq_q, "seq_k": a.seq_k, "causal": a.causal,
             "window_left": a.window_left, "window_right": a.window_right, "pad": a.pad,
             "pad_with": a.pad_with, "heads": a.heads, "head": a.head,
             "head_dim": a.head_dim, "seed": a.seed, "cell": a.cell}
    for k, v in given.items():
        if meta.get(k) != v:
            fail("tEXt attn:heatmap has %s = %r, the options say %r" % (k, meta.get(k), v))
    if failures:
        return report(failures)

    # the library's weights, called here (the tool's inputs, this file's own Desc call)
    q, k = heatmap.make_inputs(a.seed, a.heads, a.seq_q, a.seq_k, a.head_dim)
    with attn.Desc(1, a.heads, a.heads, a.seq_q, a.seq_k, a.head_dim,
                   causal=a.causal.replace("-", "_"), scale=a.scale,
                   window=(a.window_left, a.window_right)) as desc:
        extra = {}
        if a.pad and a.pad_with == "key_valid":
            kv = np.ones((1, a.seq_k), np.uint8)
            kv[0, a.seq_k - a.pad:] = 0
            extra["key_valid"] = kv
        elif a.pad:
            extra["seq_lens_k"] = np.array([a.seq_k - a.pad], np.int32)
        w = desc.weights(q, k, **extra)[0, a.head].astype(np.float64)

    cls = [[expected_class(i, j, a.seq_q, a.seq_k, a.causal, a.window_left, a.window_right,
                           a.pad, a.pad_with) for j in range(a.seq_k)] for i in range(a.seq_q)]
    for i in range(a.seq_q):
        for j in range(a.seq_k):
            if cls[i][j] != "visible" and w[i, j] != 0.0:
                fail("weight(%d, %d) = %r but the rules make it %s" % (i, j, w[i, j], cls[i][j]))
            if cls[i][j] == "visible" and not w[i, j] > 0.0:
                fail("weight(%d, %d) = %r but the rules make it visible" % (i, j, w[i, j]))
    visible_w = [w[i, j] for i in range(a.seq_q) for j in range(a.seq_k)
                 if cls[i][j] == "visible"]
    vmax = a.vmax if a.vmax is not None else (max(visible_w) if visible_w else 1.0)
    if abs(meta.get("vmax", -1.0) - vmax) > 1e-6 * vmax:
        fail("recorded vmax %r, the weights give %r" % (meta.get("vmax"), vmax))

    # geometry: the image size is the recorded one, the grid is where the sizes say
    cell, pitch = a.cell, a.cell + 1
    grid_w, grid_h = a.seq_k * pitch + 1, a.seq_q * pitch + 1
    gx, gy = meta["grid_x"], meta["grid_y"]
    if (width, height) != (meta["width"], meta["height"]):
        fail("IHDR says %dx%d, the tool recorded %dx%d" % (width, height, meta["width"],
                                                            meta["height"]))
    if (meta["grid_w"], meta["grid_h"], meta["pitch"]) != (grid_w, grid_h, pitch):
        fail("recorded grid %dx%d pitch %d, expected %dx%d pitch %d for %d x %d cells of %d px"
             % (meta["grid_w"], meta["grid_h"], meta["pitch"], grid_w, grid_h, pitch,
                a.seq_q, a.seq_k, cell))
    if not (gx >= 1 and gy >= 1 and gx + grid_w < width and gy + grid_h < height):
        fail("grid %dx%d at (%d, %d) does not fit inside %dx%d with a border"
             % (grid_w, grid_h, gx, gy, width, height))
    if failures:
        return report(failures)
    if ch != 3 or info["filters"] != {0}:
        fail("expected 8-bit RGB with filter 0 on every row, got %d channels, filters %s"
             % (ch, sorted(info["filters"])))

    frame, grid, bg = tuple(heatmap.FRAME), tuple(heatmap.GRID), tuple(heatmap.BACKGROUND)
    for x in range(gx - 1, gx + grid_w + 1):                   # ring just outside the frame
        for y in (gy - 1, gy + grid_h):
            if px(x, y) != bg:
                fail("pixel (%d, %d) outside the grid is %s, not the background" % (x, y,
                                                                                  px(x, y)))
    for y in range(gy - 1, gy + grid_h + 1):
        for x in (gx - 1, gx + grid_w):
            if px(x, y) != bg:
                fail("pixel (%d, %d) outside the grid is %s, not the background" % (x, y,
                                                                                  px(x, y)))
    for x in range(gx, gx + grid_w):
        for y in range(gy, gy + grid_h):
            on_line = (x - gx) % pitch == 0 or (y - gy) % pitch == 0
            if not on_line:
                continue
            border = x in (gx, gx + grid_w - 1) or y in (gy, gy + grid_h - 1)
            want = frame if border else grid
            if px(x, y) != want:
                fail("grid-line pixel (%d, %d) is %s, expected %s" % (x, y, px(x, y), want))

    # cells
    cmap = [tuple(c) for c in heatmap.colormap()]
    index = {c: n for n, c in enumerate(cmap)}
    hidden_set = {tuple(heatmap.HIDDEN_BG), tuple(heatmap.HIDDEN_HATCH)}
    pad_set = {tuple(heatmap.PAD_BG), tuple(heatmap.PAD_HATCH)}
    if (len(index) != len(cmap) or hidden_set & set(cmap) or pad_set & set(cmap)
            or hidden_set & pad_set):
        fail("the colour map, hidden and padding colours are not all distinct")
    levels = {}
    counts = {"visible": 0, "hidden": 0, "padded": 0}
    for i in range(a.seq_q):
        for j in range(a.seq_k):
            x0, y0 = gx + 1 + j * pitch, gy + 1 + i * pitch
            colours = {px(x, y) for y in range(y0, y0 + cell) for x in range(x0, x0 + cell)}
            c = cls[i][j]
            counts[c] += 1
            if c == "padded":
                if colours != pad_set:
                    fail("padded cell (query %d, key %d) has colours %s, expected %s"
                         % (i, j, sorted(colours), sorted(pad_set)))
            elif c == "hidden":
                if colours != hidden_set:
                    fail("hidden cell (query %d, key %d) has colours %s, expected %s"
                         % (i, j, sorted(colours), sorted(hidden_set)))
            elif len(colours) != 1 or next(iter(colours)) not in index:
                fail("visible cell (query %d, key %d) is not one colour-map colour: %s"
                     % (i, j, sorted(colours)[:4]))
            else:
                levels[i, j] = index[next(iter(colours))]

    # the colours follow the weights
    if levels:
        for (i, j), lv in levels.items():
            want = max(0, min(heatmap.LEVELS - 1,
                              int(round(w[i, j] / vmax * (heatmap.LEVELS - 1)))))
            if abs(lv - want) > 1:
                fail("cell (query %d, key %d): weight %.6g is level %d, expected %d"
                     % (i, j, w[i, j], lv, want))
        order = sorted(levels, key=lambda ij: w[ij])
        for p, n in zip(order, order[1:]):
            if w[p] < w[n] and levels[p] > levels[n]:
                fail("weight %.6g at %s is brighter (level %d) than %.6g at %s (level %d)"
                     % (w[p], p, levels[p], w[n], n, levels[n]))
        for i in range(a.seq_q):
            row = [(j, levels[i, j]) for j in range(a.seq_k) if (i, j) in levels]
            if not row:
                continue
            brightest = max(lv for _, lv in row)
            jmax = max((j for j, _ in row), key=lambda j: w[i, j])
            if levels[i, jmax] != brightest:
                fail("row %d: the largest weight (key %d, %.6g) is level %d, the brightest "
                     "cell is level %d" % (i, jmax, w[i, jmax], levels[i, jmax], brightest))

    if failures:
        return report(failures)
    print("check_heatmap: OK: %dx%d PNG (chunks %s, CRCs and filter 0 checked), grid %d x %d "
          "of %d px cells: %d visible, %d hidden, %d padded cells; colours follow the weights "
          "(vmax %.4g)" % (width, height, " ".join(info["chunks"]), a.seq_q, a.seq_k, cell,
                           counts["visible"], counts["hidden"], counts["padded"], vmax))
    return 0


def report(failures) -> int:
    for m in failures[:20]:
        print("check_heatmap: FAIL: " + m)
    if len(failures) > 20:
        print("check_heatmap: ... and %d more" % (len(failures) - 20))
    return 1


if __name__ == "__main__":
    sys.exit(main())
