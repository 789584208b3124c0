"""Build skqbnorm's bundled emoji reranking data (``emoji_reranking.npz``).

Not run in CI: it needs Debian's ``unicode-data`` (the Unicode 15.0 emoji test file,
with every emoji's CLDR short name, group and subgroup) and ``fonts-noto-color-emoji``
(Noto Color Emoji's bitmaps), and Pillow to draw them::

    apt-get install unicode-data fonts-noto-color-emoji
    python -m venv /tmp/build && /tmp/build/bin/pip install pillow numpy
    /tmp/build/bin/python scripts/build_emoji_reranking.py

Kept: every fully-qualified emoji of ``emoji-test.txt`` that the font draws, less the
skin-tone and hair-style variants (drawings of the same emoji in other colours) and
the component subgroup. Stored per emoji: its short name (the text the initial ranker
reads), its subgroup and group (the relevance), and its drawing, composited on white
and averaged down to 16 x 16 RGB pixels (the visual features), as uint8.
"""

import re
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

TEST_FILE = Path("/usr/share/unicode/emoji/emoji-test.txt")
FONT = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")
OUTPUT = Path(__file__).resolve().parents[1] / "skqbnorm" / "datasets" / "data" / "emoji_reranking.npz"
SIDE = 16  # pixels per side of the stored drawing
MAX_BYTES = 2_000_000
#: Skin tones (U+1F3FB-F) and hair styles (U+1F9B0-3): variants of another emoji.
VARIANTS = {0x1F3FB, 0x1F3FC, 0x1F3FD, 0x1F3FE, 0x1F3FF, 0x1F9B0, 0x1F9B1, 0x1F9B2, 0x1F9B3}
LINE = re.compile(r"^([0-9A-F ]+?)\s*; fully-qualified\s*# \S+ E\d+\.\d+ (.+)$")


def emoji_entries(path=TEST_FILE):
    """(code points, short name, group, subgroup) of every kept emoji, in CLDR order."""
    group = subgroup = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# group: "):
            group = line.removeprefix("# group: ").strip()
        elif line.startswith("# subgroup: "):
            subgroup = line.removeprefix("# subgroup: ").strip()
        elif (match := LINE.match(line)) and group != "Component":
            points = [int(point, 16) for point in match.group(1).split()]
            if not VARIANTS & set(points):
                yield points, match.group(2), group, subgroup


def draw(points, font):
    """The emoji over white, averaged down to SIDE x SIDE RGB, or None if the font lacks it."""
    text = "".join(map(chr, points))
    canvas = Image.new("RGBA", (160, 160), (255, 255, 255, 0))
    ImageDraw.Draw(canvas).text((0, 0), text, font=font, embedded_color=True)
    box = canvas.getbbox()
    if box is None:
        return None
    white = Image.new("RGBA", canvas.size, (255, 255, 255, 255))
    image = Image.alpha_composite(white, canvas).convert("RGB").crop((0, 0, 136, 128))
    return np.asarray(image.resize((SIDE, SIDE), Image.Resampling.BOX), dtype=np.uint8)


def main():
    font = ImageFont.truetype(str(FONT), 109)  # the size of Noto Color Emoji's bitmaps
    names, groups, subgroups, images, codes = [], [], [], [], []
    for points, name, group, subgroup in emoji_entries():
        image = draw(points, font)
        if image is None:
            continue
        names.append(name)
        groups.append(group)
        subgroups.append(subgroup)
        images.append(image)
        codes.append(" ".join(f"{point:04X}" for point in points))
    images = np.stack(images)
    # One drawing per name: the font draws some sequences as their parts (a tofu-free
    # fallback), which would repeat another emoji's pixels under a new name.
    _, first = np.unique(images.reshape(len(images), -1), axis=0, return_index=True)
    keep = np.sort(first)
    arrays = {
        "names": np.array(names)[keep],
        "groups": np.array(groups)[keep],
        "subgroups": np.array(subgroups)[keep],
        "code_points": np.array(codes)[keep],
        "images": images[keep],
    }
    temporary = OUTPUT.with_suffix(".tmp.npz")
    np.savez_compressed(temporary, **arrays)
    size = temporary.stat().st_size
    if size > MAX_BYTES:
        temporary.unlink()
        raise SystemExit(f"{size} bytes exceeds {MAX_BYTES}; the old file is kept.")
    temporary.replace(OUTPUT)
    print(f"{len(keep)} emoji ({len(images) - len(keep)} repeated drawings dropped), "
          f"{len(set(arrays['subgroups']))} subgroups, {size} bytes -> {OUTPUT}")


if __name__ == "__main__":
    main()
