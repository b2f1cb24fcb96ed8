"""Draws the extension's icon, icon.png (128x128 RGBA; the Marketplace asks for at least
128x128): a magnifying glass over PyTorch's orange, with the small dot of its logo. No image
library needed: the shapes are sampled 4x4 per pixel for smooth edges and written as a PNG with
zlib. Run it again (python client-vscode/images/make_icon.py) after changing the drawing."""
import math
import struct
import zlib
from pathlib import Path

SIZE = 128
SAMPLES = 4
ORANGE = (238, 76, 44)  # PyTorch's orange, #EE4C2C
WHITE = (255, 255, 255)


def inside_rounded_square(x, y, margin=4, radius=26):
    low, high = margin, SIZE - margin
    cx = min(max(x, low + radius), high - radius)
    cy = min(max(y, low + radius), high - radius)
    return low <= x <= high and low <= y <= high and math.hypot(x - cx, y - cy) <= radius


def near_segment(x, y, a, b, half_width):
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(x - (ax + t * dx), y - (ay + t * dy)) <= half_width


def white(x, y):
    lens = math.hypot(x - 54, y - 54)
    ring = 22 <= lens <= 33
    handle = near_segment(x, y, (79, 79), (104, 104), 8)
    dot = math.hypot(x - 63, y - 43) <= 5  # the dot of the torch logo, inside the lens
    return ring or handle or dot


def pixel(px, py):
    background = foreground = 0
    for sx in range(SAMPLES):
        for sy in range(SAMPLES):
            x, y = px + (sx + 0.5) / SAMPLES, py + (sy + 0.5) / SAMPLES
            if inside_rounded_square(x, y):
                background += 1
                foreground += white(x, y)
    total = SAMPLES * SAMPLES
    alpha = background / total
    if background == 0:
        return (0, 0, 0, 0)
    share = foreground / background
    rgb = tuple(round(o * (1 - share) + w * share) for o, w in zip(ORANGE, WHITE))
    return rgb + (round(255 * alpha),)


def png(width, height, rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes(value for rgba in row for value in rgba) for row in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


if __name__ == "__main__":
    rows = [[pixel(x, y) for x in range(SIZE)] for y in range(SIZE)]
    target = Path(__file__).resolve().parent / "icon.png"
    target.write_bytes(png(SIZE, SIZE, rows))
    print("wrote %s (%d bytes)" % (target, target.stat().st_size))
