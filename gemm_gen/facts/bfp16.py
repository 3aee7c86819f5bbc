"""bfp16ebs8: blocks of 8 values sharing one 8-bit exponent, with int8 two's-complement mantissas.

Format (AIE API block-vector table; mlir-aie block_datatypes/helper.h and python/utils/bfp.py):
9 bytes per block, the shared exponent byte first, then the 8 mantissas. A value decodes as
    x = q * 2^(E - 127) / 64,   q in [-128, 127].
The shared exponent E is the largest biased fp32 exponent in the block (Inf/NaN left out). The host
helper (floatToBfp16) truncates toward -inf; the AIE's own bf16 -> bfp16 conversion follows the
core's rounding mode (mlir-aie PR #3442), so `quantize` takes the mode: FLOOR is the helper.
"""

from __future__ import annotations

import numpy as np

from .dtypes import BFP16
from .rounding import Rounding, round_real

BLOCK = BFP16.block_elems  # values per block
BLOCK_BYTES = BFP16.block_bytes  # the shared exponent byte, then one int8 mantissa per value
MANTISSA_FRAC_BITS = 6  # q / 64: one sign bit, then 1.6 fixed point for the block's largest value


def shared_exponents(x: np.ndarray) -> np.ndarray:
    """The biased fp32 exponent of the largest-exponent finite value of each block of 8 (last axis)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.int64)
    exp = np.where(exp == 0xFF, 0, exp)  # Inf/NaN do not set the exponent
    return exp.reshape(*exp.shape[:-1], -1, BLOCK).max(axis=-1)


def encode(x: np.ndarray, rounding: Rounding = Rounding.FLOOR) -> tuple[np.ndarray, np.ndarray]:
    """(exponents uint8 [..., blocks], mantissas int8 [..., values]) of fp32 values, 8 per block.

    With FLOOR this is mlir-aie's host helper bit for bit (truncation of the two's-complement
    mantissa, then an arithmetic shift by the exponent difference, also toward -inf).
    """
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-1] % BLOCK:
        raise ValueError(f"the last axis ({x.shape[-1]}) must hold whole blocks of {BLOCK}")
    E = shared_exponents(x)
    exp = (x.view(np.uint32) >> 23) & 0xFF
    finite = exp != 0xFF
    # q = x * 64 / 2^(E - 127), rounded by `rounding`: scaling by a power of two is exact in fp64.
    # Like the helper, a denormal keeps its raw exponent field 0, which halves it (bit-exact with
    # helper.h, not with IEEE); an Inf/NaN lane encodes as 0.
    E_each = np.repeat(E, BLOCK, axis=-1)
    scale = np.exp2((133 - E_each) - (exp == 0))
    t = np.where(finite, x.astype(np.float64), 0.0) * scale
    q = np.clip(round_real(t, rounding), -128, 127)  # rounding up past 127 saturates (unconfirmed)
    return E.astype(np.uint8), q.astype(np.int8)


def _block_max(v: np.ndarray) -> np.ndarray:
    """The largest of each block of 8 along axis 2 of v (pre, blocks, 8, post), kept as (pre, blocks, 1, post):
    elementwise maxima of halves (a reduction over 8 lanes is slow in NumPy)."""
    four = np.maximum(v[:, :, :4], v[:, :, 4:])
    two = np.maximum(four[:, :, :2], four[:, :, 2:])
    return np.maximum(two[:, :, :1], two[:, :, 1:])


CHUNK = 1 << 18  # values per piece of a large array's bit tests: their temporaries stay in cache


def on_grid(x: np.ndarray, axis: int = -1) -> bool:
    """Every block of 8 along `axis` holds values encode() keeps as they are, whatever the rounding: finite, no
    denormals (the helper halves them) and no -0, each a whole multiple of its block's step 2^(E - 133) (E the
    block's largest biased exponent), which makes its mantissa |q| at most 127. Then quantize(x) is x and no block
    clamps: an integer test on the bits instead of the conversion (gemm_gen.facts.inputs' exact family passes it)."""
    return grid_lowest(x, axis) is not None


NO_BITS = 1 << 20  # lowest_bit of values without a nonzero one


def grid_lowest(x: np.ndarray, axis: int = -1) -> int | None:
    """None where x is not on the grid (on_grid), else the exponent of the lowest set bit over its nonzero values
    (lowest_bit, NO_BITS for none): both from one pass over the bits."""
    x32 = np.asarray(x, dtype=np.float32)
    axis %= max(x32.ndim, 1)
    if x32.shape[axis] % BLOCK:
        x32 = np.pad(x32, [(0, 0)] * axis + [(0, -x32.shape[axis] % BLOCK)] + [(0, 0)] * (x32.ndim - axis - 1))
    pre, post = int(np.prod(x32.shape[:axis])), int(np.prod(x32.shape[axis + 1:]))
    bits = np.ascontiguousarray(x32).view(np.uint32).reshape(pre, -1, BLOCK, post)  # blocks along axis 2: a view
    if pre >= post:  # pieces along the axis with more lines
        step = max(1, CHUNK // max(1, bits[0].size))
        pieces = (bits[i:i + step] for i in range(0, pre, step))
    else:
        step = max(1, CHUNK // max(1, bits[..., 0].size))
        pieces = (bits[..., j:j + step] for j in range(0, post, step))
    low = NO_BITS
    for piece in pieces:
        at = _grid_lowest(piece)
        if at is None:
            return None
        low = min(low, at)
    return low


def _grid_lowest(bits: np.ndarray) -> int | None:
    exp = (bits >> 23) & 0xFF
    if (exp == 0xFF).any() or ((exp == 0) & (bits != 0)).any():  # Inf, NaN, denormals and -0 (encoded as +0)
        return None
    key = _low_keys(bits, exp)
    # x = (frac | 2^23) 2^(exp - 150) is a multiple of 2^(E - 133) when its lowest set bit, 2^(key - 21), is:
    # key >= E + 16 (zeros pass: their key wraps past any E)
    if (key < _block_max(exp) + 16).any():
        return None
    return _lowest_of(key)


def lowest_bit(bits: np.ndarray) -> int:
    """The exponent of the lowest set bit over the nonzero values of float32 bit patterns `bits` (finite values;
    denormals and -0 allowed): every value is a multiple of 2^that; NO_BITS without a nonzero value."""
    return _lowest_of(_low_keys(bits, (bits >> 23) & 0xFF))


def _low_keys(bits: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """max(exp, 1) + (the biased exponent of the significand's lowest set bit) - 128 per finite value, as uint32
    (`exp`: the biased exponent fields): a nonzero value's lowest set bit is 2^(key - 149) (a denormal's exponent
    reads as 1); a zero's key wraps to above 2^31."""
    m = np.minimum(exp, 1)
    m <<= 23
    m |= bits & 0x7FFFFF  # the significand, with its implicit bit where the value is normal
    low = np.negative(m)
    low &= m  # the lowest set bit, a power of two below 2^24: exact in float32 (0 for a zero)
    key = low.astype(np.float32).view(np.uint32)
    key >>= 23  # its biased exponent, 0 for a zero
    key += np.maximum(exp, 1)
    key -= np.uint32(128)
    return key


def _lowest_of(key: np.ndarray) -> int:
    least = int(key.min(initial=np.uint32(0xFFFFFFFF)))
    return NO_BITS if least >= 1 << 31 else least - 149


def clamped_blocks(x: np.ndarray, axis: int = -1, rounding: Rounding = Rounding.FLOOR) -> int:
    """Blocks of 8 along `axis` in which a mantissa rounds past 127 (the largest value's 127.5 and up
    rounding to 128): encode() clamps it to 127, an assumption (what the core's conversion does
    there is unpublished). Counted so that a run can say whether it met the case."""
    if on_grid(x, axis):  # nothing rounds
        return 0
    moved = np.moveaxis(np.asarray(x, dtype=np.float32), axis, -1)
    if moved.shape[-1] % BLOCK:
        moved = np.pad(moved, [(0, 0)] * (moved.ndim - 1) + [(0, -moved.shape[-1] % BLOCK)])
    E = np.repeat(shared_exponents(moved), BLOCK, axis=-1)
    exp = (moved.view(np.uint32) >> 23) & 0xFF
    t = np.where(exp != 0xFF, moved.astype(np.float64), 0.0) * np.exp2((133 - E) - (exp == 0))
    over = round_real(t, rounding) > 127
    return int(np.count_nonzero(over.reshape(*over.shape[:-1], -1, BLOCK).any(axis=-1)))


def decode(exps: np.ndarray, mants: np.ndarray) -> np.ndarray:
    """fp32 values of encoded blocks: q * 2^(E - 127) / 64."""
    scale = np.exp2(np.asarray(exps, dtype=np.float64) - 127 - MANTISSA_FRAC_BITS)
    vals = np.asarray(mants, dtype=np.float64).reshape(*np.shape(exps), BLOCK) * scale[..., None]
    return vals.reshape(np.shape(mants)).astype(np.float32)


def quantize(x: np.ndarray, axis: int = -1, rounding: Rounding = Rounding.FLOOR) -> np.ndarray:
    """Values on the bfp16ebs8 grid, blocks of 8 consecutive elements along `axis`, as fp32."""
    moved = np.moveaxis(np.asarray(x, dtype=np.float32), axis, -1)
    exps, mants = encode(moved, rounding)
    return np.moveaxis(decode(exps, mants), -1, axis)


def pack(exps: np.ndarray, mants: np.ndarray) -> bytes:
    """The 9-byte block layout: exponent, then the 8 mantissas."""
    blocks = np.concatenate([np.asarray(exps, dtype=np.uint8).reshape(-1, 1),
                             np.asarray(mants, dtype=np.int8).view(np.uint8).reshape(-1, BLOCK)], axis=1)
    return blocks.tobytes()


def unpack(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    blocks = np.frombuffer(data, dtype=np.uint8).reshape(-1, BLOCK_BYTES)
    return blocks[:, 0].copy(), blocks[:, 1:].copy().view(np.int8).reshape(-1)


# ---- 8 x 8 tiles: how bfp16 matrices are stored for the DMAs ------------------------------------
TILE = BFP16.tile_rows  # a tile is TILE rows of one block each: 8 x 9 = 72 bytes
TILE_BYTES = BFP16.unit_bytes


def to_tiles(exps: np.ndarray, mants: np.ndarray) -> np.ndarray:
    """An R x C matrix encoded in row blocks (exps R x C/8, mants R x C) as uint8 tiles
    (R/8, C/8, 72): tile (i, j) holds rows 8i..8i+7 of block column j, each row's 9-byte block
    (exponent, 8 mantissas) in turn. Row-major over tiles, like the DMAs walk them."""
    rows, cols = np.shape(mants)
    if rows % TILE or cols % TILE:
        raise ValueError(f"a {rows} x {cols} matrix is not whole {TILE} x {TILE} tiles")
    blocks = np.concatenate([np.asarray(exps, dtype=np.uint8)[..., None],
                             np.asarray(mants, dtype=np.int8).view(np.uint8).reshape(rows, cols // BLOCK, BLOCK)],
                            axis=-1)  # rows x blocks x 9
    tiles = blocks.reshape(rows // TILE, TILE, cols // BLOCK, BLOCK_BYTES).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(tiles).reshape(rows // TILE, cols // BLOCK, TILE_BYTES)


def from_tiles(tiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exps, mants) of the matrix stored in uint8 tiles (R/8, C/8, 72): the inverse of to_tiles."""
    tr, tc = tiles.shape[:2]
    grouped = np.asarray(tiles, dtype=np.uint8).reshape(tr, tc, TILE, BLOCK_BYTES).transpose(0, 2, 1, 3)
    blocks = grouped.reshape(tr * TILE, tc, BLOCK_BYTES)
    return blocks[..., 0].copy(), blocks[..., 1:].copy().view(np.int8).reshape(tr * TILE, tc * BLOCK)


def tiles_of(values: np.ndarray, rounding: Rounding = Rounding.FLOOR) -> np.ndarray:
    """Encode an R x C matrix in blocks along its rows and store it as tiles (the host's job)."""
    return to_tiles(*encode(np.asarray(values, dtype=np.float32), rounding))


def tile_values(tiles: np.ndarray) -> np.ndarray:
    """The fp32 values of a matrix stored as tiles."""
    return decode(*from_tiles(tiles))
