"""Files to attach in tests, made on the spot: images of a given size, PDFs with text."""

from __future__ import annotations

import hashlib
import io
import os

from PIL import Image


def png(width: int, height: int, *, noise: bool = False, seed: int = 0) -> bytes:
    """A PNG: a smooth gradient (compresses well), noise (compresses hardly at all: 800×600
    is about 1.4 MB), or with `seed` a pattern of its own (the same bytes every time)."""
    if seed:
        pixels = bytes((i * seed) % 251 for i in range(width * height * 3))
        image = Image.frombytes("RGB", (width, height), pixels)
    elif noise:
        image = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    else:
        image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)
    return out.getvalue()


def encoded(width: int, height: int, fmt: str) -> bytes:
    """A small image in another format (GIF, WEBP, JPEG)."""
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def pdf(*pages: str) -> bytes:
    """A PDF with one line of text per page (Helvetica), readable by pypdf."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        safe = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 18 Tf 72 720 Td ({safe}) Tj ET".encode()
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents "
                       f"{4 + 2 * i} 0 R /Resources << /Font << /F1 {font} 0 R >> >> >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
