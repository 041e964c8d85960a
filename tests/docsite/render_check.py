# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""render_check.py INDEX ROLE_PAGE OPTION: the docsite as a browser shows it (make docs).

A headless Chromium renders each page to a PNG (beside the page: index.png, ROLE.png) and dumps its
DOM as rendered. Checked:
- neither picture is blank: enough of it differs from the background, in enough colours (text);
- the index links every guide and the collection's pages;
- the role page's DOM has its argument spec as a table that names OPTION, and its picture shows a
  table: at least five thin horizontal rules across the content (the table's row borders), which a
  page of text alone does not have.
Exits 1 naming what is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from PIL import Image

WIDTH, HEIGHT = 1280, 2400


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    sys.exit("ERROR: no Chromium on the PATH (tests/scripts/ensure-chromium.sh installs one)")


def render(page, png):
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--allow-file-access-from-files", f"--window-size={WIDTH},{HEIGHT}"]  # fmt: skip
    shot = subprocess.run([*base, f"--screenshot={png}", page.as_uri()], capture_output=True, text=True, check=False,
                          timeout=120)  # fmt: skip
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, check=False, timeout=120)
    for done in (shot, dom):
        if done.returncode != 0 or not png.exists():
            sys.exit(f"ERROR: {' '.join(done.args)} failed (rc {done.returncode}): {done.stderr.strip()[-800:]}")
    return Image.open(png).convert("RGB"), dom.stdout


def ink(picture):
    """(share of pixels that are not the background, how many colours there are)."""
    pixels = list(picture.get_flattened_data())
    background = Counter(pixels).most_common(1)[0][0]
    share = sum(1 for p in pixels if sum(abs(a - b) for a, b in zip(p, background, strict=True)) > 60) / len(pixels)
    return share, len(set(pixels))


def rules(picture, left=360, right=1230):
    """Thin horizontal rules across the content column: rows that are at least 70 % one colour, a
    colour neither neighbouring row is mostly of (a table's row borders; a page's background, a
    banner or a box is many rows of its colour, and text is no row's 70 %)."""
    width = right - left

    def mode(y):
        colour, count = Counter(picture.getpixel((x, y)) for x in range(left, right)).most_common(1)[0]
        return colour if count >= 0.7 * width else None

    modes = [mode(y) for y in range(picture.height)]
    return sum(
        1
        for y in range(1, picture.height - 1)
        if modes[y] is not None and modes[y - 1] != modes[y] and modes[y + 1] != modes[y]
    )


def main():
    index, role_page, option = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), sys.argv[3]
    problems = []
    pictures = {}
    for page in (index, role_page):
        png = page.with_suffix(".png")
        picture, dom = render(page, png)
        share, colours = ink(picture)
        pictures[page] = (picture, dom)
        print(f"{page.name}: {picture.width}x{picture.height}, {share:.1%} ink, {colours} colours -> {png}")
        if share < 0.02 or colours < 16:
            problems.append(f"{page.name} renders blank ({share:.1%} ink, {colours} colours): {png}")
    dom = pictures[index][1]
    for target in ("guide/readme.html", "guide/operating.html", "collections/index.html"):
        if f'href="{target}' not in dom:
            problems.append(f"{index.name} does not link {target}")
    picture, dom = pictures[role_page]
    if "<table" not in dom or option not in dom.split("<table", 1)[1]:
        problems.append(f"{role_page.name} has no table naming {option}")
    lines = rules(picture)
    print(f"{role_page.name}: {lines} table rules in the picture (the index: {rules(pictures[index][0])})")
    if lines < 5:
        problems.append(f"{role_page.name}'s picture shows no table ({lines} thin rules, 5 or more expected)")
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
