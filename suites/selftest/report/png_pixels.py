"""The pixels of a PNG file as a numpy array (8-bit RGB or RGBA, not interlaced: what Chromium's
``--screenshot`` writes), so a browser test can look at the colours a page was drawn in."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def read_png(path: Path) -> np.ndarray:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    channels = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), dtype=np.uint8)
    stride = width * channels
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.int32)
    previous = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if kind == 0:
            current = line
        elif kind == 2:
            current = (line + previous) & 0xFF
        else:  # Sub, Average and Paeth depend on the pixel to the left: one pixel at a time
            current = np.zeros(stride, dtype=np.int32)
            for x in range(stride):
                left = current[x - channels] if x >= channels else 0
                up = previous[x]
                if kind == 1:
                    predictor = left
                elif kind == 3:
                    predictor = (left + up) // 2
                else:
                    corner = previous[x - channels] if x >= channels else 0
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                current[x] = (line[x] + predictor) & 0xFF
        out[y] = current
        previous = current
    return out.reshape(height, width, channels)[:, :, :3].astype(np.uint8)


def count_colour(pixels: np.ndarray, hex_colour: str) -> int:
    rgb = tuple(int(hex_colour.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
    return int(np.all(pixels == np.array(rgb, dtype=np.uint8), axis=-1).sum())
