"""Open a results folder's report.html in headless Chromium, check it, and save a screenshot.

    python scripts/report_screenshot.py results/default            # -> results/default/report.png

Needs Chromium (Debian: `apt-get install chromium`) and Playwright (`pip install -e '.[dev]'`). Exits 1
when the page logs a console error or warning, fails a request, or a figure does not decode.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

VIEWPORT = {"width": 1280, "height": 1600}


def chromium() -> str | None:
    """The system's Chromium, or None."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def open_page(html: Path, png: Path | None) -> dict:
    """Load ``html`` in headless Chromium; return the problems it logged, whether each image decoded,
    the boxes of the answer and of the first figure, the answer's text, the page's height in pixels (as
    opened: folded sections folded); save a first-screen ``png``."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url[:80]}"))
        page.goto(html.resolve().as_uri())
        seen = {
            "problems": problems,
            "decoded": page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete && i.naturalWidth > 0)"),
            "answer": page.locator("#answer").bounding_box(),
            "figure": page.locator("figure img").first.bounding_box() if page.locator("figure img").count() else None,
            "answer_text": page.locator("#answer").inner_text(),
            "height": page.evaluate("document.documentElement.scrollHeight"),
        }
        if png is not None:
            page.screenshot(path=str(png))
        browser.close()
    return seen


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or any(a.startswith("-") for a in argv):
        print("usage: " + __doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    folder = Path(argv[0])
    if not (folder / "report.html").is_file():
        print(f"error: {folder / 'report.html'}: no such file; write it with `suite report {folder}` (make tables)",
              file=sys.stderr)
        return 2
    png = Path(argv[1]) if len(argv) == 2 else folder / "report.png"
    if chromium() is None:
        print("error: no Chromium on PATH; install it (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    seen = open_page(folder / "report.html", png)
    bad = seen["problems"] + [f"image {i} did not decode" for i, ok in enumerate(seen["decoded"]) if not ok]
    for line in bad:
        print(f"problem: {line}", file=sys.stderr)
    print(f"wrote {png}; the page is {seen['height']} px tall at {VIEWPORT['width']} px wide"
          + ("" if not bad else f" ({len(bad)} problems)"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
