#!/usr/bin/env python3
"""Attention-weight heatmap: one libattn call's weight matrix (one head) as a PNG.

The weights come from the library (ATTN_OP_WEIGHTS through attn.Desc.weights) for random q / k
drawn from --seed. Rows are queries, columns are keys; each cell is a --cell pixel square:

* a visible key: its weight on a perceptual colour map (viridis, 0 = dark purple, the largest
  weight of the head = yellow; --vmax fixes the top of the scale);
* a hidden key (the causal rule or the sliding window): light grey with a "/" hatch;
* a padded key (--pad trailing keys, key_valid false or past seq_lens_k): dark grey with a "\\"
  hatch, in every row.

Hidden and padded cells come from the parameters of the call (the rules of capi/attn.h), never
from the weights: a visible key whose weight underflowed to 0.0 is still drawn as a colour-map
cell (the bottom of the map), and the program stops if the library gave a non-zero weight to a
cell the rules hide. A legend strip under the grid shows the colour bar (0 .. max) and the two
mask colours. The PNG is written with zlib and struct alone (8-bit RGB, filter 0); a tEXt chunk
"attn:heatmap" records the parameters and the grid geometry (tests/python/check_heatmap.py
reads it).

Run (from the repository root; the package and a built libattn as for examples/python/demo.py):
    python3 examples/python/heatmap.py --seq-q 16 --seq-k 20 --causal bottom-right \\
        --window-left 6 --pad 4 --out heatmap.png
or, from examples/python, ``python3 -m heatmap ...``. Needs numpy and the attn package only.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import zlib

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
try:
    import attn
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    if "ATTN_LIBRARY" not in os.environ and os.path.exists(os.path.join(ROOT, "build",
                                                                        "libattn.so")):
        os.environ["ATTN_LIBRARY"] = os.path.join(ROOT, "build", "libattn.so")
    import attn

import numpy as np

# ------------------------------------------------------------------------------------------
# Colours (8-bit RGB). tests/python/check_heatmap.py imports these names.
# ------------------------------------------------------------------------------------------

#: viridis (matplotlib), 16 evenly spaced stops of its 256-entry table (entries 0, 17, .., 255),
#: interpolated linearly to LEVELS colours (all distinct).
VIRIDIS_STOPS = (
    (68, 1, 84), (72, 26, 108), (71, 47, 125), (65, 68, 135), (57, 86, 140), (49, 104, 142),
    (42, 120, 142), (35, 136, 142), (31, 152, 139), (34, 168, 132), (53, 183, 121),
    (84, 197, 104), (122, 209, 81), (165, 219, 54), (210, 226, 27), (253, 231, 37))
LEVELS = 256

BACKGROUND = (255, 255, 255)
GRID = (255, 255, 255)          # the thin lines between cells
FRAME = (150, 150, 150)         # the outermost grid line
TEXT = (50, 50, 50)
HIDDEN_BG, HIDDEN_HATCH = (224, 224, 224), (172, 172, 172)   # light grey, "/" hatch
PAD_BG, PAD_HATCH = (44, 44, 44), (118, 118, 118)            # dark grey, "\" hatch
HATCH_PERIOD = 4                # one hatch pixel every 4 along a row (image coordinates)

CAUSAL_CHOICES = ("none", "top-left", "bottom-right")
PAD_WITH_CHOICES = ("key_valid", "seq_lens_k")

VISIBLE, HIDDEN, PADDED = 0, 1, 2


def colormap(levels: int = LEVELS):
    """The colour map as a list of `levels` RGB tuples, index 0 = weight 0, last = vmax."""
    n = len(VIRIDIS_STOPS) - 1
    out = []
    for k in range(levels):
        x = k * n / (levels - 1)
        i = min(int(x), n - 1)
        f = x - i
        a, b = VIRIDIS_STOPS[i], VIRIDIS_STOPS[i + 1]
        out.append(tuple(int(round(a[c] + (b[c] - a[c]) * f)) for c in range(3)))
    return out


def level(weight: float, vmax: float, levels: int = LEVELS) -> int:
    """Colour-map index of a visible weight: round(weight / vmax * (levels - 1)), clipped."""
    t = float(weight) / float(vmax)
    return max(0, min(levels - 1, int(round(t * (levels - 1)))))


# ------------------------------------------------------------------------------------------
# The call
# ------------------------------------------------------------------------------------------

def make_inputs(seed: int, heads: int, seq_q: int, seq_k: int, head_dim: int):
    """Deterministic q (1, heads, seq_q, head_dim) and k (1, heads, seq_k, head_dim), float32,
    standard normal from numpy's default_rng(seed)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, heads, seq_q, head_dim)).astype(np.float32)
    k = rng.standard_normal((1, heads, seq_k, head_dim)).astype(np.float32)
    return q, k


def compute_weights(a):
    """The library's weights for the parsed options `a`: float32 (seq_q, seq_k) of head a.head,
    through attn.Desc.weights (ATTN_OP_WEIGHTS), padding as key_valid or seq_lens_k."""
    q, k = make_inputs(a.seed, a.heads, a.seq_q, a.seq_k, a.head_dim)
    causal = a.causal.replace("-", "_")
    with attn.Desc(1, a.heads, a.heads, a.seq_q, a.seq_k, a.head_dim, causal=causal,
                   scale=a.scale, window_left=a.window_left,
                   window_right=a.window_right) as desc:
        if a.pad == 0:
            w = desc.weights(q, k)
        elif a.pad_with == "key_valid":
            key_valid = np.ones((1, a.seq_k), np.bool_)
            key_valid[0, a.seq_k - a.pad:] = False
            w = desc.weights(q, k, key_valid=key_valid)
        else:
            w = desc.weights(q, k, seq_lens_k=np.array([a.seq_k - a.pad], np.int32))
        scale = desc.scale
    return np.array(w[0, a.head]), scale


def cell_classes(seq_q, seq_k, causal, window_left, window_right, pad, pad_with):
    """VISIBLE / HIDDEN / PADDED for every (query, key), from the parameters alone (capi/attn.h:
    diag(i) = i, or i + len_k - seq_q for bottom-right where len_k = seq_lens_k when that operand
    is given, else seq_k; causal hides j > diag(i); the window keeps
    diag(i) - left <= j <= diag(i) + right, -1 = unbounded; padding hides its key everywhere)."""
    len_k = seq_k - pad if pad_with == "seq_lens_k" else seq_k
    classes = []
    for i in range(seq_q):
        diag = i + len_k - seq_q if causal == "bottom-right" else i
        row = []
        for j in range(seq_k):
            if j >= seq_k - pad:
                row.append(PADDED)
            elif ((causal != "none" and j > diag)
                  or (window_left >= 0 and j < diag - window_left)
                  or (window_right >= 0 and j > diag + window_right)):
                row.append(HIDDEN)
            else:
                row.append(VISIBLE)
        classes.append(row)
    return classes


# ------------------------------------------------------------------------------------------
# Drawing: a 5x7 bitmap font and rectangles on a numpy (height, width, 3) uint8 image
# ------------------------------------------------------------------------------------------

_FONT_ROWS = {
    "0": "01110 10001 10011 10101 11001 10001 01110",
    "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111",
    "3": "11111 00010 00100 00010 00001 10001 01110",
    "4": "00010 00110 01010 10010 11111 00010 00010",
    "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110",
    "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110",
    "9": "01110 10001 10001 01111 00001 00010 01100",
    "A": "01110 10001 10001 10001 11111 10001 10001",
    "B": "11110 10001 10001 11110 10001 10001 11110",
    "C": "01110 10001 10000 10000 10000 10001 01110",
    "D": "11100 10010 10001 10001 10001 10010 11100",
    "E": "11111 10000 10000 11110 10000 10000 11111",
    "F": "11111 10000 10000 11110 10000 10000 10000",
    "G": "01110 10001 10000 10111 10001 10001 01111",
    "H": "10001 10001 10001 11111 10001 10001 10001",
    "I": "01110 00100 00100 00100 00100 00100 01110",
    "J": "00111 00010 00010 00010 00010 10010 01100",
    "K": "10001 10010 10100 11000 10100 10010 10001",
    "L": "10000 10000 10000 10000 10000 10000 11111",
    "M": "10001 11011 10101 10101 10001 10001 10001",
    "N": "10001 10001 11001 10101 10011 10001 10001",
    "O": "01110 10001 10001 10001 10001 10001 01110",
    "P": "11110 10001 10001 11110 10000 10000 10000",
    "Q": "01110 10001 10001 10001 10101 10010 01101",
    "R": "11110 10001 10001 11110 10100 10010 10001",
    "S": "01111 10000 10000 01110 00001 00001 11110",
    "T": "11111 00100 00100 00100 00100 00100 00100",
    "U": "10001 10001 10001 10001 10001 10001 01110",
    "V": "10001 10001 10001 10001 10001 01010 00100",
    "W": "10001 10001 10001 10101 10101 10101 01010",
    "X": "10001 10001 01010 00100 01010 10001 10001",
    "Y": "10001 10001 10001 01010 00100 00100 00100",
    "Z": "11111 00001 00010 00100 01000 10000 11111",
    ".": "00000 00000 00000 00000 00000 01100 01100",
    "-": "00000 00000 00000 11111 00000 00000 00000",
    ":": "00000 01100 01100 00000 01100 01100 00000",
    "=": "00000 00000 11111 00000 11111 00000 00000",
    "(": "00010 00100 01000 01000 01000 00100 00010",
    ")": "01000 00100 00010 00010 00010 00100 01000",
    ",": "00000 00000 00000 00000 01100 00100 01000",
    "/": "00000 00001 00010 00100 01000 10000 00000",
    ">": "01000 00100 00010 00001 00010 00100 01000",
    "<": "00010 00100 01000 10000 01000 00100 00010",
    "+": "00000 00100 00100 11111 00100 00100 00000",
    "_": "00000 00000 00000 00000 00000 00000 11111",
    " ": "00000 00000 00000 00000 00000 00000 00000",
}
_FONT = {ch: np.array([[c == "1" for c in r] for r in rows.split()], np.bool_)
         for ch, rows in _FONT_ROWS.items()}
GLYPH_W, GLYPH_H, ADVANCE = 5, 7, 6


def text_width(s: str) -> int:
    return max(0, len(s) * ADVANCE - 1)


def draw_text(img, x, y, s, color=TEXT, vertical=False):
    """Upper-case text, 5x7 glyphs; vertical = rotated a quarter turn, reading bottom to top
    from (x, y) = the bottom-left corner."""
    for n, ch in enumerate(s.upper()):
        g = _FONT.get(ch, _FONT[" "])
        if vertical:
            g = np.rot90(g)                      # 7 wide, 5 tall
            y0 = y - (n + 1) * ADVANCE + 1
            img[y0:y0 + GLYPH_W, x:x + GLYPH_H][g] = color
        else:
            x0 = x + n * ADVANCE
            img[y:y + GLYPH_H, x0:x0 + GLYPH_W][g] = color


def fill_hatched(img, x, y, w, h, bg, hatch, anti):
    """Fill a rectangle with bg and one-pixel diagonal hatch lines in image coordinates (so
    neighbouring cells join up): "/" when (x + y) % HATCH_PERIOD == 0, "\\" (anti) when
    (x - y) % HATCH_PERIOD == 0."""
    yy, xx = np.mgrid[y:y + h, x:x + w]
    on = ((xx - yy) if anti else (xx + yy)) % HATCH_PERIOD == 0
    region = img[y:y + h, x:x + w]
    region[...] = bg
    region[on] = hatch


def fill(img, x, y, w, h, color):
    img[y:y + h, x:x + w] = color


# ------------------------------------------------------------------------------------------
# PNG (8-bit RGB, no interlace, every scanline with filter byte 0)
# ------------------------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def png_bytes(img, text=None) -> bytes:
    """img: uint8 (height, width, 3). text: {keyword: latin-1 string} for tEXt chunks."""
    height, width, _ = img.shape
    rows = np.ascontiguousarray(img, np.uint8).reshape(height, width * 3)
    raw = b"".join(b"\x00" + rows[y].tobytes() for y in range(height))
    out = [PNG_SIGNATURE, _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))]
    for key, value in (text or {}).items():
        out.append(_chunk(b"tEXt", key.encode("latin-1") + b"\x00" + value.encode("latin-1")))
    out.append(_chunk(b"IDAT", zlib.compress(raw, 9)))
    out.append(_chunk(b"IEND", b""))
    return b"".join(out)


# ------------------------------------------------------------------------------------------
# The picture
# ------------------------------------------------------------------------------------------

def _label_step(pitch, label_extent):
    """Label every k-th row / column with k the smallest of 1, 2, 4, 5, 10, ... that leaves
    room for a label and a 4-pixel gap."""
    for k in (1, 2, 4, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if k * pitch >= label_extent + 4:
            return k
    return 10 ** len(str(label_extent))


def fmt_weight(x: float) -> str:
    return "%.3g" % x


def render(w, classes, a, vmax, hidden_rules):
    """The picture as (image, geometry dict)."""
    seq_q, seq_k, cell = a.seq_q, a.seq_k, a.cell
    pitch = cell + 1
    grid_w, grid_h = seq_k * pitch + 1, seq_q * pitch + 1
    margin, gap = 8, 4
    cmap = colormap()

    row_label_w = text_width(str(seq_q - 1))
    col_label_w = text_width(str(seq_k - 1))
    row_step, col_step = _label_step(pitch, GLYPH_H), _label_step(pitch, col_label_w)

    # left to right: "QUERIES" (vertical), row labels, grid; top to bottom: "KEYS", column
    # labels, grid, legend
    grid_x = margin + GLYPH_H + gap + row_label_w + gap
    grid_y = margin + GLYPH_H + gap + GLYPH_H + gap

    # legend layout (computed first: it decides the width)
    bar_w = max(128, min(256, grid_w))
    bar_h = 10
    ly = grid_y + grid_h + 12                   # top of the colour bar
    hidden_text = "HIDDEN" + (" (%s)" % ", ".join(hidden_rules) if hidden_rules else "")
    pad_text = "PADDED KEY (%s)" % ("KEY_VALID" if a.pad_with == "key_valid" else "SEQ_LENS_K")
    swatch = max(cell, GLYPH_H + 2)
    items = [(hidden_text, HIDDEN_BG, HIDDEN_HATCH, False), (pad_text, PAD_BG, PAD_HATCH, True)]
    params = "HEAD %d  CAUSAL %s  WINDOW (%d, %d)  PAD %d  SEED %d" % (
        a.head, a.causal.upper(), a.window_left, a.window_right, a.pad, a.seed)
    right = max(grid_x + grid_w, grid_x + bar_w, margin + text_width(params),
                grid_x + (grid_w - text_width("KEYS")) // 2 + text_width("KEYS"))
    item_w = [swatch + gap + text_width(t) for t, _, _, _ in items]
    right = max(right, grid_x + max(item_w))
    # place the swatches: on one line if they fit within `right`, else one per line
    sy = ly + bar_h + 3 + GLYPH_H + 8
    placed, x, y = [], grid_x, sy
    for it, wd in zip(items, item_w):
        if placed and x + wd > right:
            x, y = grid_x, y + swatch + 4
        placed.append((it, x, y))
        x += wd + 14
    py = y + swatch + 8
    width = right + margin
    height = py + GLYPH_H + margin

    img = np.empty((height, width, 3), np.uint8)
    img[...] = BACKGROUND

    # axis titles and labels
    draw_text(img, grid_x + (grid_w - text_width("KEYS")) // 2, margin, "KEYS")
    draw_text(img, margin, grid_y + (grid_h + text_width("QUERIES")) // 2, "QUERIES",
              vertical=True)
    for j in range(0, seq_k, col_step):
        s = str(j)
        draw_text(img, grid_x + 1 + j * pitch + (cell - text_width(s)) // 2,
                  margin + GLYPH_H + gap, s)
    for i in range(0, seq_q, row_step):
        s = str(i)
        draw_text(img, grid_x - gap - text_width(s), grid_y + 1 + i * pitch + (cell - GLYPH_H) // 2,
                  s)

    # the grid: frame, lines, cells
    fill(img, grid_x, grid_y, grid_w, grid_h, FRAME)
    fill(img, grid_x + 1, grid_y + 1, grid_w - 2, grid_h - 2, GRID)
    for i in range(seq_q):
        for j in range(seq_k):
            x0, y0 = grid_x + 1 + j * pitch, grid_y + 1 + i * pitch
            c = classes[i][j]
            if c == PADDED:
                fill_hatched(img, x0, y0, cell, cell, PAD_BG, PAD_HATCH, True)
            elif c == HIDDEN:
                fill_hatched(img, x0, y0, cell, cell, HIDDEN_BG, HIDDEN_HATCH, False)
            else:
                fill(img, x0, y0, cell, cell, cmap[level(w[i, j], vmax)])

    # legend: colour bar 0 .. vmax with its labels, the two mask swatches, the parameters
    for x in range(bar_w):
        fill(img, grid_x + x, ly, 1, bar_h, cmap[int(round(x * (LEVELS - 1) / (bar_w - 1)))])
    ty = ly + bar_h + 3
    top = fmt_weight(vmax)
    draw_text(img, grid_x, ty, "0")
    draw_text(img, grid_x + bar_w - text_width(top), ty, top)
    label = "WEIGHT"
    draw_text(img, grid_x + (bar_w - text_width(label)) // 2, ty, label)
    for (t, bg, hatch, anti), x, y in placed:
        fill(img, x, y, swatch, swatch, FRAME)
        fill_hatched(img, x + 1, y + 1, swatch - 2, swatch - 2, bg, hatch, anti)
        draw_text(img, x + swatch + gap, y + (swatch - GLYPH_H) // 2, t)
    draw_text(img, margin, py, params)

    geometry = {"width": width, "height": height, "grid_x": grid_x, "grid_y": grid_y,
                "grid_w": grid_w, "grid_h": grid_h, "pitch": pitch, "cell": cell,
                "colorbar": [grid_x, ly, bar_w, bar_h]}
    return img, geometry


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Write the attention weights of one libattn call (one head) as a PNG "
                    "heatmap: rows = queries, columns = keys.")
    p.add_argument("--seq-q", type=int, default=16, help="queries (rows), default 16")
    p.add_argument("--seq-k", type=int, default=20, help="keys (columns), default 20")
    p.add_argument("--causal", choices=CAUSAL_CHOICES, default="none",
                   help="causal rule (default none)")
    p.add_argument("--window-left", type=int, default=-1,
                   help="sliding window, keys left of the diagonal; -1 = unbounded (default)")
    p.add_argument("--window-right", type=int, default=-1,
                   help="sliding window, keys right of the diagonal; -1 = unbounded (default)")
    p.add_argument("--pad", type=int, default=0, help="trailing padded keys (default 0)")
    p.add_argument("--pad-with", choices=PAD_WITH_CHOICES, default="key_valid",
                   help="how the padding is passed: the key_valid mask (default) or seq_lens_k "
                        "(bottom-right then aligns to the real length)")
    p.add_argument("--heads", type=int, default=2, help="heads in the call (default 2)")
    p.add_argument("--head", type=int, default=0, help="head to draw (default 0)")
    p.add_argument("--head-dim", type=int, default=16, help="head_dim (default 16)")
    p.add_argument("--scale", type=float, default=None,
                   help="score scale (default the library's 1/sqrt(head_dim))")
    p.add_argument("--seed", type=int, default=0, help="seed of the random q and k (default 0)")
    p.add_argument("--vmax", type=float, default=None,
                   help="weight at the top of the colour map (default the head's largest)")
    p.add_argument("--cell", type=int, default=12, help="cell size in pixels (default 12)")
    p.add_argument("--out", default="heatmap.png", help="output file (default heatmap.png)")
    return p


def check_args(p, a):
    for name in ("seq_q", "seq_k", "heads", "head_dim"):
        if getattr(a, name) < 1:
            p.error("--%s must be >= 1" % name.replace("_", "-"))
    if not 0 <= a.head < a.heads:
        p.error("--head must be in [0, %d)" % a.heads)
    if not 0 <= a.pad <= a.seq_k:
        p.error("--pad must be in [0, seq_k]")
    if a.window_left < -1 or a.window_right < -1:
        p.error("--window-left / --window-right must be >= -1")
    if not 3 <= a.cell <= 64:
        p.error("--cell must be in [3, 64]")
    if a.vmax is not None and not a.vmax > 0:
        p.error("--vmax must be > 0")


def main(argv=None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    check_args(p, a)

    w, scale = compute_weights(a)
    classes = cell_classes(a.seq_q, a.seq_k, a.causal, a.window_left, a.window_right, a.pad,
                           a.pad_with)
    counts = [0, 0, 0]
    leaks, zero_visible = [], 0
    for i in range(a.seq_q):
        for j in range(a.seq_k):
            c = classes[i][j]
            counts[c] += 1
            if c != VISIBLE and w[i, j] != 0.0:
                leaks.append((i, j, float(w[i, j])))
            elif c == VISIBLE and w[i, j] == 0.0:
                zero_visible += 1
    if leaks:
        print("heatmap: the library gave non-zero weights to cells the parameters hide "
              "(query, key, weight): %s" % leaks[:8], file=sys.stderr)
        return 1
    visible = [float(w[i, j]) for i in range(a.seq_q) for j in range(a.seq_k)
               if classes[i][j] == VISIBLE]
    vmax = a.vmax if a.vmax is not None else (max(visible) if visible and max(visible) > 0
                                              else 1.0)

    hidden_rules = []
    if a.causal != "none":
        hidden_rules.append("CAUSAL")
    if a.window_left >= 0 or a.window_right >= 0:
        hidden_rules.append("WINDOW")
    img, geo = render(w, classes, a, vmax, hidden_rules)
    meta = {"tool": "libattn examples/python/heatmap.py", "library": attn.version(),
            "seq_q": a.seq_q, "seq_k": a.seq_k, "causal": a.causal,
            "window_left": a.window_left, "window_right": a.window_right, "pad": a.pad,
            "pad_with": a.pad_with, "heads": a.heads, "head": a.head, "head_dim": a.head_dim,
            "scale": scale, "seed": a.seed, "vmax": vmax, "levels": LEVELS}
    meta.update(geo)
    data = png_bytes(img, {"attn:heatmap": json.dumps(meta, sort_keys=True),
                           "Software": "libattn heatmap.py"})
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    with open(a.out, "wb") as f:
        f.write(data)

    pad_desc = ("keys %d..%d" % (a.seq_k - a.pad, a.seq_k - 1)) if a.pad else "none"
    print("wrote %s: %d x %d px, %d bytes (8-bit RGB PNG)" % (a.out, geo["width"],
                                                               geo["height"], len(data)))
    print("  grid: %d queries (rows) x %d keys (columns), %d px cells, head %d of %d, "
          "causal %s, window (%d, %d), scale %.6g, seed %d"
          % (a.seq_q, a.seq_k, a.cell, a.head, a.heads, a.causal, a.window_left,
             a.window_right, scale, a.seed))
    print("  legend:")
    print("    viridis colour map: weight 0 (dark purple) .. %s (yellow)%s: %d visible cells"
          % (fmt_weight(vmax), "" if a.vmax is not None else " = the head's largest weight",
             counts[VISIBLE]))
    if zero_visible:
        print("      (%d of them visible with a weight that is exactly 0.0: drawn at the "
              "bottom of the map)" % zero_visible)
    print("    light grey, '/' hatch: hidden (%s): %d cells"
          % (", ".join(r.lower() for r in hidden_rules) or "no rule", counts[HIDDEN]))
    print("    dark grey, '\\' hatch: padded keys (%s): %s, %d cells"
          % (a.pad_with, pad_desc, counts[PADDED]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
