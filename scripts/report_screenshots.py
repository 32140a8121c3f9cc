"""Look at <out>/report.html in a real headless browser: screenshots at two widths, and whether the page
overflows sideways (a table or figure wider than the window).

Uses Debian's Chromium (``apt-get install chromium``); the page has no scripts of its own, so the
overflow check loads a copy with one line of script that writes the document's width into the DOM.

    $ python scripts/report_screenshots.py --out out --name demo [--width 1400 --width 800] [--dest docs/screenshots]

Writes <dest>/report-<name>-<width>.png (palette PNG, under 300 KB) and prints one line per width:
the page width against the window's.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
PROBE = ("<script>document.body.setAttribute('data-page-width', document.documentElement.scrollWidth);"
         "document.body.setAttribute('data-window-width', window.innerWidth);</script>")


def browser() -> str:
    """The headless browser's executable; one line when there is none."""
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        raise SystemExit("error: no Chromium found: install Debian's package (apt-get install chromium)")
    return found


def _run(args: list[str], timeout: int = 180) -> str:
    base = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
            "--no-first-run", "--disable-dev-shm-usage"]
    done = subprocess.run(base + args, capture_output=True, text=True, timeout=timeout)
    return done.stdout


def page_width(page: Path, width: int) -> tuple[int, int]:
    """(document scroll width, window width) of ``page`` shown in a window ``width`` pixels wide."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "page.html"
        probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
        dom = _run([f"--window-size={width},1000", "--dump-dom", probe.as_uri()])
    found = re.search(r'data-page-width="(\d+)"[^>]*data-window-width="(\d+)"', dom)
    if found is None:
        raise SystemExit(f"error: the browser did not load {page}")
    return int(found[1]), int(found[2])


def screenshot(page: Path, dest: Path, width: int, height: int, max_bytes: int = 300_000) -> Path:
    """A screenshot of the top ``height`` pixels of ``page`` at ``width``, as a palette PNG under ``max_bytes``."""
    from PIL import Image

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "shot.png"
        _run([f"--window-size={width},{height}", f"--screenshot={raw}", page.as_uri()])
        if not raw.is_file():
            raise SystemExit(f"error: the browser wrote no screenshot of {page}")
        img = Image.open(raw).convert("RGB")
    for colours, scale in ((128, 1.0), (64, 1.0), (64, 0.8), (32, 0.7), (32, 0.5)):
        small = img if scale == 1.0 else img.resize((int(img.width * scale), int(img.height * scale)))
        small.quantize(colours, method=Image.Quantize.MEDIANCUT).save(dest, optimize=True)
        if dest.stat().st_size <= max_bytes:
            break
    return dest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="out", help="output root holding report.html")
    parser.add_argument("--name", default="report", help="screenshot names: report-<name>-<width>.png")
    parser.add_argument("--width", type=int, action="append", help="window widths (default: 1400 and 800)")
    parser.add_argument("--height", type=int, default=2200, help="screenshot height in pixels")
    parser.add_argument("--dest", default="docs/screenshots", help="folder for the screenshots")
    cfg = parser.parse_args(argv)
    page = Path(cfg.out).resolve() / "report.html"
    if not page.is_file():
        raise SystemExit(f"error: no {page}: run python -m analyses.summary.figures --out {cfg.out} first")
    overflow = False
    for width in cfg.width or [1400, 800]:
        shot = screenshot(page, Path(cfg.dest) / f"report-{cfg.name}-{width}.png", width, cfg.height)
        page_w, window_w = page_width(page, width)
        overflow |= page_w > window_w
        print(f"{shot} ({shot.stat().st_size // 1024} KB): page {page_w} px wide in a {window_w} px window"
              + (" -- OVERFLOWS" if page_w > window_w else ""))
    sys.exit(1 if overflow else 0)


if __name__ == "__main__":
    main()
