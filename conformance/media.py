"""Tiny valid media files the fixtures serve: a 1x1 PNG and a short silent WAV."""

from __future__ import annotations

import base64
import struct
import zlib


def _png_1x1() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 1x1, 8-bit RGBA
    pixels = zlib.compress(b"\x00\xff\x00\x00\xff")  # filter byte + one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav_silence(samples: int = 800, rate: int = 8000) -> bytes:
    data = b"\x00\x00" * samples  # 16-bit mono silence, 0.1 s
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data"
    body += struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


PNG = _png_1x1()
WAV = _wav_silence()
PNG_BASE64 = base64.b64encode(PNG).decode("ascii")
WAV_BASE64 = base64.b64encode(WAV).decode("ascii")
