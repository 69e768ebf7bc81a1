"""The numeric contract re-implemented in plain Python from its text, docs/HARDWARE.md section 6
(its constants read from the guide's generated tables, not from systole), as a user checking
their own hardware would write it. The tests hold systole's results to it for small cases."""

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "HARDWARE.md"
MASK = 0xFFFFFFFF


def guide_table(name):
    """The rows of the guide's generated table ``name`` as lists of cells (backticks removed)."""
    text = GUIDE.read_text()
    m = re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- end: {name} -->", text, re.S)
    assert m, f"{GUIDE} has no generated table {name}"
    rows = [line for line in m.group(1).splitlines() if line.startswith("|")][2:]
    return [[c.strip().strip("`") for c in row.strip("|").split("|")] for row in rows]


CONSTANTS = {row[0]: int(row[1], 16) for row in guide_table("contract-constants")}
LFSR_TAPS = CONSTANTS["LFSR_TAPS"]
LANE_SEED_MUL = CONSTANTS["LANE_SEED_MUL"]
TILE_SEED_MUL = (CONSTANTS["TILE_SEED_MUL[0]"], CONSTANTS["TILE_SEED_MUL[1]"])
TILE_SEED_MIX = (CONSTANTS["TILE_SEED_MIX[0]"], CONSTANTS["TILE_SEED_MIX[1]"])
ROUNDINGS = ("truncate", "nearest", "stochastic")


def lfsr_step(s):
    lsb = s & 1
    s >>= 1
    return s ^ LFSR_TAPS if lsb else s


def lane_seed(t, c):
    s = (t ^ (LANE_SEED_MUL * (c + 1))) & MASK
    return s or 1


def tile_seed(seed, i0, j0):
    x = (seed ^ (i0 * TILE_SEED_MUL[0]) ^ (j0 * TILE_SEED_MUL[1])) & MASK
    x ^= x >> 16
    x = (x * TILE_SEED_MIX[0]) & MASK
    x ^= x >> 15
    x = (x * TILE_SEED_MIX[1]) & MASK
    x ^= x >> 16
    return x or 1


def convert(acc, shift, rounding, random, w):
    """One conversion: the contract's three roundings, then saturation to W bits."""
    if shift == 0:
        q = acc
    elif rounding == "truncate":
        q = acc >> shift
    elif rounding == "nearest":
        q = acc >> shift
        rem = acc - (q << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and q % 2 == 1):
            q += 1
    elif rounding == "stochastic":
        q = (acc + (random % (1 << shift))) >> shift
    else:
        raise ValueError(rounding)
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    return min(max(q, lo), hi)


def convert_tiled(acc, shift, rounding, seed, n, w):
    """A matrix of exact sums converted as an n x n device converts it: column c of the tile at
    (i0, j0) has its own LFSR from lane_seed(tile_seed(seed, i0, j0), c), stepped before each
    row."""
    rows, cols = len(acc), len(acc[0])
    out = np.zeros((rows, cols), dtype=np.int64)
    for i0 in range(0, rows, n):
        for j0 in range(0, cols, n):
            t = tile_seed(seed, i0, j0)
            for c in range(min(n, cols - j0)):
                s = lane_seed(t, c)
                for r in range(min(n, rows - i0)):
                    s = lfsr_step(s)
                    out[i0 + r, j0 + c] = convert(int(acc[i0 + r][j0 + c]), shift, rounding, s, w)
    return out


def exact_product(a, b):
    """The exact sums of A·B as Python integers (no overflow at any size)."""
    a = [[int(v) for v in row] for row in a]
    b = [[int(v) for v in row] for row in b]
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def matmul(a, b, shift, rounding, seed, n, w):
    return convert_tiled(exact_product(a, b), shift, rounding, seed, n, w)


def out_size(size, k, stride, pad):
    return (size + 2 * pad - k) // stride + 1


def im2col(x, k, stride, pad):
    """Rows (b, oy, ox), columns (ci, ky, kx); 0 outside the image."""
    batch, ch, h, w = x.shape
    oh, ow = out_size(h, k, stride, pad), out_size(w, k, stride, pad)
    rows = []
    for b in range(batch):
        for oy in range(oh):
            for ox in range(ow):
                row = []
                for ci in range(ch):
                    for ky in range(k):
                        for kx in range(k):
                            y, xx = oy * stride + ky - pad, ox * stride + kx - pad
                            inside = 0 <= y < h and 0 <= xx < w
                            row.append(int(x[b, ci, y, xx]) if inside else 0)
                rows.append(row)
    return rows


def conv2d(x, wt, stride, pad, shift, rounding, seed, n, w):
    """Forward: im2col(x)·Wᵀ converted over the (batch·oh·ow) x out_ch matrix, back to NCHW."""
    batch, _, h, wd = x.shape
    oc, _, k, _ = wt.shape
    oh, ow = out_size(h, k, stride, pad), out_size(wd, k, stride, pad)
    wrows = wt.reshape(oc, -1).T.tolist()
    c = matmul(im2col(x, k, stride, pad), wrows, shift, rounding, seed, n, w)
    return c.reshape(batch, oh, ow, oc).transpose(0, 3, 1, 2)


def conv2d_grad_input(dy, wt, h, wd, stride, pad, shift, rounding, seed, n, w):
    """gather(dy)·W' over the (batch·h·w) x in_ch matrix, back to NCHW."""
    batch, oc, oh, ow = dy.shape
    _, ic, k, _ = wt.shape
    rows = []
    for b in range(batch):
        for y in range(h):
            for x in range(wd):
                row = []
                for co in range(oc):
                    for ky in range(k):
                        for kx in range(k):
                            ny, nx = y + pad - ky, x + pad - kx
                            ok = ny % stride == 0 and nx % stride == 0 and ny >= 0 and nx >= 0
                            oy, ox = ny // stride, nx // stride
                            ok = ok and oy < oh and ox < ow
                            row.append(int(dy[b, co, oy, ox]) if ok else 0)
                rows.append(row)
    wprime = [[int(wt[co, ci, ky, kx]) for ci in range(ic)] for co in range(oc) for ky in range(k) for kx in range(k)]
    c = matmul(rows, wprime, shift, rounding, seed, n, w)
    return c.reshape(batch, h, wd, ic).transpose(0, 3, 1, 2)


def conv2d_grad_weight(x, dy, k, stride, pad, shift, rounding, seed, n, w):
    """dy_rowsᵀ·im2col(x) over the out_ch x (in_ch·k·k) matrix."""
    batch, oc, oh, ow = dy.shape
    ic = x.shape[1]
    dy_rows_t = dy.transpose(1, 0, 2, 3).reshape(oc, -1).tolist()
    c = matmul(dy_rows_t, im2col(x, k, stride, pad), shift, rounding, seed, n, w)
    return c.reshape(oc, ic, k, k)
