"""Build skqbnorm's bundled glyph reranking data (``glyph_reranking.npz``).

Not run in CI: it needs the Debian font packages below and Pillow and fontTools to
draw and check the glyphs::

    apt-get install fonts-urw-base35 fonts-texgyre fonts-lmodern fonts-liberation \
        fonts-freefont-ttf fonts-croscore fonts-crosextra-carlito fonts-crosextra-caladea \
        fonts-lato fonts-open-sans fonts-roboto-unhinted fonts-cantarell \
        fonts-linuxlibertine fonts-ebgaramond fonts-inconsolata fonts-hack \
        fonts-comic-neue fonts-dejavu-core fonts-dejavu-extra
    python -m venv /tmp/build && /tmp/build/bin/pip install pillow fonttools numpy
    /tmp/build/bin/python scripts/build_glyph_reranking.py

Kept: every OpenType or TrueType font those packages install whose character map
holds all 62 characters ``a-z``, ``A-Z`` and ``0-9``, less the symbol and maths
fonts, and less any font that draws all 62 exactly as a font already kept (hinted
and unhinted copies of one design, say). Each character is drawn in black at 40
pixels per em on a 64 x 64 white canvas, on a fixed baseline (so capitals stand
taller than lower case), centred horizontally by its ink, then averaged down to
16 x 16; stored is the ink (255 minus the grey level) as uint8.
"""

import string
import subprocess
from pathlib import Path

import numpy as np
from fontTools.ttLib import TTFont
from PIL import Image, ImageDraw, ImageFont

ROOTS = (Path("/usr/share/fonts"), Path("/usr/share/texmf/fonts/opentype"))
OUTPUT = Path(__file__).resolve().parents[1] / "skqbnorm" / "datasets" / "data" / "glyph_reranking.npz"
CHARACTERS = string.ascii_lowercase + string.ascii_uppercase + string.digits
CANVAS, EM, BASELINE, SIDE = 64, 40, 46, 16
MAX_BYTES = 2_000_000
#: Fonts of symbols or maths, whose letters are not text letters (or are drawn as others).
EXCLUDED = ("math", "symbol", "d050000l", "dingbat")


def font_files():
    """Every OpenType/TrueType file under ``ROOTS``, sorted by path."""
    return sorted(path for root in ROOTS for path in root.rglob("*")
                  if path.suffix.lower() in (".otf", ".ttf"))


def covers(path):
    """Whether the font's character map holds every character of ``CHARACTERS``."""
    try:
        cmap = TTFont(str(path), lazy=True, fontNumber=0).getBestCmap() or {}
    except Exception:  # noqa: BLE001 (an unreadable file is skipped)
        return False
    return all(ord(ch) in cmap for ch in CHARACTERS)


def draw(character, font):
    """The character's ink on the fixed baseline, centred by its ink, SIDE x SIDE uint8."""
    canvas = Image.new("L", (CANVAS, CANVAS), 255)
    painter = ImageDraw.Draw(canvas)
    left, _, right, _ = painter.textbbox((0, BASELINE), character, font=font, anchor="ls")
    painter.text(((CANVAS - (right - left)) / 2 - left, BASELINE), character, font=font,
                 anchor="ls", fill=0)
    small = canvas.resize((SIDE, SIDE), Image.Resampling.BOX)
    return 255 - np.asarray(small, dtype=np.uint8)


def package_of(path):
    """The Debian package that installed ``path`` (``dpkg -S``), with its version."""
    name = subprocess.run(["dpkg", "-S", str(path)], capture_output=True, text=True,
                          check=True).stdout.split(":")[0]
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True,
                             text=True, check=True).stdout
    return f"{name} {version}"


def main():
    fonts, images, packages = [], [], []
    for path in font_files():
        if any(word in path.name.lower() for word in EXCLUDED) or not covers(path):
            continue
        font = ImageFont.truetype(str(path), EM)
        drawn = np.stack([draw(ch, font) for ch in CHARACTERS])
        if any(np.array_equal(drawn, kept) for kept in images) or drawn.reshape(len(drawn), -1).max(axis=1).min() == 0:
            continue  # a copy of a kept design, or a character without ink
        fonts.append(path.stem)
        images.append(drawn)
        packages.append(package_of(path))
    arrays = {"characters": np.array(list(CHARACTERS)), "fonts": np.array(fonts),
              "packages": np.array(packages), "images": np.stack(images)}
    temporary = OUTPUT.with_suffix(".tmp.npz")
    np.savez_compressed(temporary, **arrays)
    size = temporary.stat().st_size
    if size > MAX_BYTES:
        temporary.unlink()
        raise SystemExit(f"{size} bytes exceeds {MAX_BYTES}; the old file is kept.")
    temporary.replace(OUTPUT)
    print(f"{len(fonts)} fonts from {len(set(packages))} packages, {len(CHARACTERS)} characters, "
          f"{size} bytes -> {OUTPUT}")
    for package in sorted(set(packages)):
        print(f"  {package}: {packages.count(package)} fonts")


if __name__ == "__main__":
    main()
