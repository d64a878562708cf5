"""Pillow's JPEG round trip as batched integer tensor ops (any device).

What Pillow does when the reference saves an RGB image as JPEG and reads it back, stage by stage,
with libjpeg-turbo's integer arithmetic (so the pixels are the same, bit for bit; tested against
Pillow on real photos at every quality the editions use):

encode  RGB -> YCbCr with libjpeg's 16-bit fixed-point tables; the image padded to whole 16 x 16
        MCUs by repeating its last column and row; Cb and Cr averaged over 2 x 2 pixels with
        libjpeg's alternating rounding bias (1, 2, 1, 2, ...); the "islow" integer forward DCT of
        every 8 x 8 block (13-bit constants, 2 extra bits between the passes); quantisation with the
        Annex K tables scaled to the quality, rounded as libjpeg-turbo's reciprocal multiplication.
decode  dequantisation and the "islow" inverse DCT with libjpeg's range-limit table (including its
        wrap-around for far out-of-range values); Cb and Cr brought back to full size by libjpeg's
        "fancy" triangle filter (3/4 nearer sample, 1/4 farther, biases 8 and 7); YCbCr -> RGB with
        libjpeg's tables; the padding cropped away.

Entropy coding is lossless and skipped. On the CPU the same stages run compiled
(:mod:`._jpeg_cpu`, ~90x faster than these tensor ops there); on a GPU a batch goes through these
tensor ops without leaving the device.
"""

from __future__ import annotations

import torch

from ._jpeg_tables import (
    CONST_BITS,
    F0_298,
    F0_390,
    F0_541,
    F0_765,
    F0_899,
    F1_175,
    F1_501,
    F1_847,
    F1_961,
    F2_053,
    F2_562,
    F3_072,
    HALF,
    PASS1_BITS,
    SCALE,
    divisors,
    fix,
    quant_tables,
)


def _descale(x: torch.Tensor, n: int) -> torch.Tensor:
    return (x + (1 << (n - 1))) >> n


def _even_rotation(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The islow DCTs' even-part rotation (shared by the forward and inverse transforms):
    (a, b) -> (z1 + a cos-term, z1 - b sin-term), z1 = (a + b) * 0.541196100."""
    z1 = (a + b) * F0_541
    return z1 + a * F0_765, z1 - b * F1_847


def _odd_rotation(
    t0: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor, t3: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The islow DCTs' odd part (shared by the forward and inverse transforms), in libjpeg's order."""
    z1, z2, z3, z4 = t0 + t3, t1 + t2, t0 + t2, t1 + t3
    z5 = (z3 + z4) * F1_175
    z1, z2 = z1 * -F0_899, z2 * -F2_562
    z3, z4 = z3 * -F1_961 + z5, z4 * -F0_390 + z5
    return t0 * F0_298 + z1 + z3, t1 * F2_053 + z2 + z4, t2 * F3_072 + z2 + z3, t3 * F1_501 + z1 + z4


def _fdct_1d(v: torch.Tensor, dim: int, first: bool) -> torch.Tensor:
    d = v.unbind(dim)
    tmp0, tmp7 = d[0] + d[7], d[0] - d[7]
    tmp1, tmp6 = d[1] + d[6], d[1] - d[6]
    tmp2, tmp5 = d[2] + d[5], d[2] - d[5]
    tmp3, tmp4 = d[3] + d[4], d[3] - d[4]
    tmp10, tmp13 = tmp0 + tmp3, tmp0 - tmp3
    tmp11, tmp12 = tmp1 + tmp2, tmp1 - tmp2
    n = CONST_BITS - PASS1_BITS if first else CONST_BITS + PASS1_BITS
    if first:
        o0, o4 = (tmp10 + tmp11) << PASS1_BITS, (tmp10 - tmp11) << PASS1_BITS
    else:
        o0, o4 = _descale(tmp10 + tmp11, PASS1_BITS), _descale(tmp10 - tmp11, PASS1_BITS)
    o2, o6 = (_descale(o, n) for o in _even_rotation(tmp13, tmp12))
    o7, o5, o3, o1 = (_descale(o, n) for o in _odd_rotation(tmp4, tmp5, tmp6, tmp7))
    return torch.stack([o0, o1, o2, o3, o4, o5, o6, o7], dim)


def _idct_1d(v: torch.Tensor, dim: int, n: int) -> torch.Tensor:
    """One islow IDCT pass along ``dim``, descaled by ``n`` bits (the all-zero-AC shortcuts of
    libjpeg give the same numbers, so they need no separate path)."""
    d = v.unbind(dim)
    tmp3, tmp2 = _even_rotation(d[2], d[6])
    tmp0 = (d[0] + d[4]) << CONST_BITS
    tmp1 = (d[0] - d[4]) << CONST_BITS
    tmp10, tmp13 = tmp0 + tmp3, tmp0 - tmp3
    tmp11, tmp12 = tmp1 + tmp2, tmp1 - tmp2
    t0, t1, t2, t3 = _odd_rotation(d[7], d[5], d[3], d[1])
    outs = [tmp10 + t3, tmp11 + t2, tmp12 + t1, tmp13 + t0, tmp13 - t0, tmp12 - t1, tmp11 - t2, tmp10 - t3]
    return torch.stack([_descale(o, n) for o in outs], dim)


def _blocks(plane: torch.Tensor) -> torch.Tensor:
    """B x H x W (multiples of 8) -> B x H/8 x W/8 x 8 x 8."""
    b, h, w = plane.shape
    return plane.reshape(b, h // 8, 8, w // 8, 8).permute(0, 1, 3, 2, 4)


def _unblocks(blocks: torch.Tensor) -> torch.Tensor:
    b, nh, nw, _, _ = blocks.shape
    return blocks.permute(0, 1, 3, 2, 4).reshape(b, nh * 8, nw * 8)


def _coded_plane(plane: torch.Tensor, table: tuple[int, ...]) -> torch.Tensor:
    """Level-shifted samples (int64, B x H x W, multiples of 8) -> the decoded samples (0..255)."""
    dev = plane.device
    blk = _blocks(plane - 128)
    coef = _fdct_1d(_fdct_1d(blk, -1, True), -2, False)  # rows, then columns
    recip, corr, shift = (torch.tensor(v, dtype=torch.int64, device=dev).view(8, 8) for v in divisors(table))
    mag = ((coef.abs() + corr) * recip) >> shift
    qcoef = torch.where(coef < 0, -mag, mag)
    deq = qcoef * torch.tensor(table, dtype=torch.int64, device=dev).view(8, 8)
    ws = _idct_1d(deq, -2, CONST_BITS - PASS1_BITS)  # columns, then rows
    out = _idct_1d(ws, -1, CONST_BITS + PASS1_BITS + 3)
    # libjpeg's range limit: x + 128 clipped to 0..255 for x in -384..639 (masked to 10 bits)
    x = (out & 1023).where((out & 1023) < 512, (out & 1023) - 1024)
    return _unblocks((x + 128).clamp(0, 255))


def _fancy_up(c: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """libjpeg's h2v2 fancy upsampling of a B x ch x cw plane (ch = ceil(h/2), cw = ceil(w/2)) -> B x h x w."""
    above = torch.cat([c[:, :1], c[:, :-1]], 1)
    below = torch.cat([c[:, 1:], c[:, -1:]], 1)
    rows = torch.stack([3 * c + above, 3 * c + below], 2).reshape(c.shape[0], 2 * c.shape[1], c.shape[2])
    if c.shape[2] == 1:
        cols = torch.stack([(rows * 4 + 8) >> 4, (rows * 4 + 7) >> 4], 3)
    else:
        left = torch.cat([rows[:, :, :1], rows[:, :, :-1]], 2)
        right = torch.cat([rows[:, :, 1:], rows[:, :, -1:]], 2)
        cols = torch.stack([(3 * rows + left + 8) >> 4, (3 * rows + right + 7) >> 4], 3)
        # first and last output columns use the sample itself on the missing side: 4 * s (+8 / +7)
        cols[:, :, 0, 0] = (rows[:, :, 0] * 4 + 8) >> 4
        cols[:, :, -1, 1] = (rows[:, :, -1] * 4 + 7) >> 4
    return cols.reshape(c.shape[0], 2 * c.shape[1], 2 * c.shape[2])[:, :h, :w]


_CHUNK_PIXELS = 1 << 22  # images per pass: about 4 M pixels (the int64 intermediates stay near 3 GB)


def jpeg_round_trip_tensor(x: torch.Tensor, quality: int) -> torch.Tensor:
    """Pillow's ``save(JPEG, quality)`` + ``open`` of a B x 3 x H x W uint8 batch (4:2:0), on its device."""
    b, _, h, w = x.shape
    step = max(1, _CHUNK_PIXELS // (h * w))
    if b > step:
        return torch.cat([_round_trip(x[i : i + step], quality) for i in range(0, b, step)])
    return _round_trip(x, quality)


def _round_trip(x: torch.Tensor, quality: int) -> torch.Tensor:
    b, _, h, w = x.shape
    dev = x.device
    hp, wp = -(-h // 16) * 16, -(-w // 16) * 16
    # pad to whole MCUs by repeating the last row and column (libjpeg's edge expansion)
    rows = torch.arange(hp, device=dev).clamp_(max=h - 1)
    cols = torch.arange(wp, device=dev).clamp_(max=w - 1)
    p = x.to(torch.int64).index_select(2, rows).index_select(3, cols)
    r, g, bl = p[:, 0], p[:, 1], p[:, 2]
    y = (fix(0.299) * r + fix(0.587) * g + fix(0.114) * bl + HALF) >> SCALE
    off = (128 << SCALE) + HALF - 1
    cb = (-fix(0.16874) * r - fix(0.33126) * g + fix(0.5) * bl + off) >> SCALE
    cr = (fix(0.5) * r - fix(0.41869) * g - fix(0.08131) * bl + off) >> SCALE
    bias = torch.tensor([1, 2], dtype=torch.int64, device=dev).repeat(wp // 4).view(1, 1, wp // 2)
    ch, cw = (h + 1) // 2, (w + 1) // 2
    cbh, cbw = -(-ch // 8) * 8, -(-cw // 8) * 8
    chroma_rows = torch.arange(cbh, device=dev).clamp_(max=ch - 1)

    def down(c: torch.Tensor) -> torch.Tensor:
        # columns: the full-size rows were widened by repeating their last pixel; rows: the image is
        # completed to a pair of rows, and the subsampled plane then repeats its own last row
        s = c[:, : 2 * ch].reshape(b, ch, 2, wp // 2, 2).sum(dim=(2, 4))
        return ((s + bias) >> 2).index_select(1, chroma_rows)[:, :, :cbw]

    luma, chroma = quant_tables(quality)
    y_dec = _coded_plane(y[:, : -(-h // 8) * 8, : -(-w // 8) * 8], luma)[:, :h, :w]
    cb_dec = _coded_plane(down(cb), chroma)[:, :ch, :cw]
    cr_dec = _coded_plane(down(cr), chroma)[:, :ch, :cw]
    cb_up = _fancy_up(cb_dec, h, w) - 128
    cr_up = _fancy_up(cr_dec, h, w) - 128
    # libjpeg's decoding tables: round(1.402 cr), round(1.772 cb), and the green sum shifted once
    r_out = y_dec + ((fix(1.40200) * cr_up + HALF) >> SCALE)
    b_out = y_dec + ((fix(1.77200) * cb_up + HALF) >> SCALE)
    g_out = y_dec + ((-fix(0.34414) * cb_up - fix(0.71414) * cr_up + HALF) >> SCALE)
    return torch.stack([r_out, g_out, b_out], 1).clamp_(0, 255).to(torch.uint8)
