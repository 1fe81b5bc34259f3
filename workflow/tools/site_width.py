"""Build the manual and check every page at 1280 px in headless Chromium: no horizontal overflow.

    python workflow/tools/site_width.py [--width 1280] [--out /tmp/site_width] [--no-screenshots]

Builds the site with ``mkdocs build --strict`` into ``OUT/site``, then opens every page in headless
Chromium (``chromium``, ``chromium-browser`` or ``google-chrome`` on PATH, or ``$CHROMIUM``; Debian:
``apt-get install chromium``) at WIDTH px and reports, per page:

- the document's ``scrollWidth`` where it exceeds the window (the page scrolls sideways);
- every code block (``pre``) and table whose content is wider than its box (cut at the right edge,
  or hidden behind a scroll bar);
- every image shown narrower than ``coolsampler.paper.style.DOCS_WIDTH_PX`` while its file is wider: the
  figures' font sizes assume that column width (their text would render under 9 px).

It measures with a copy of each page that runs a small script writing the measurements into the DOM,
read back with ``--dump-dom``; the screenshots (``OUT/png/<page>.png``, full page height) are taken of
the pages as built. Exit status: 0 no page overflows, 1 some page does, 2 the build or Chromium failed.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workflow"))
from coolsampler.paper.style import DOCS_WIDTH_PX  # noqa: E402  (the checkout's package, installed or not)

MARK = "site-width-measure"
SCRIPT = """
<script>
window.addEventListener("load", () => {
  const W = window.innerWidth, out = {scrollWidth: document.documentElement.scrollWidth, width: W,
    height: document.documentElement.scrollHeight, cut: []};
  const boxes = ".md-content pre, .md-content pre > code, .md-content table, .md-content .md-typeset__scrollwrap";
  for (const el of document.querySelectorAll(boxes)) {
    if (el.scrollWidth > el.clientWidth + 1 || el.getBoundingClientRect().right > W + 1) {
      const text = (el.innerText || "").split("\\n").find(l => l.trim()) || "";
      out.cut.push({tag: el.tagName.toLowerCase(), over: el.scrollWidth - el.clientWidth, text: text.slice(0, 80)});
    }
  }
  out.images = [...document.querySelectorAll(".md-content img")].map(i =>
    ({src: i.getAttribute("src"), shown: i.clientWidth, natural: i.naturalWidth}));
  const div = document.createElement("div");
  div.id = "MARK";
  div.textContent = JSON.stringify(out);
  document.body.appendChild(div);
});
</script>
""".replace("MARK", MARK)


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    raise SystemExit("no headless Chromium found: apt-get install chromium (or set CHROMIUM=/path/to/it)")


def _chrome(browser: str, *args: str, timeout: int = 60) -> subprocess.CompletedProcess:
    argv = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    argv += ["--disable-dev-shm-usage", "--virtual-time-budget=3000"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def build(site: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(2)


def pages(site: Path) -> list[Path]:
    skip = {"404.html"}
    return sorted(p for p in site.rglob("*.html") if p.name not in skip and "assets" not in p.parts)


def measure(browser: str, page: Path, width: int) -> dict:
    probe = page.with_name(page.stem + ".measure.html")
    probe.write_text(page.read_text().replace("</body>", SCRIPT + "</body>"))
    try:
        res = _chrome(browser, f"--window-size={width},1000", "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    start = res.stdout.find(f'id="{MARK}">')
    if start < 0:
        raise SystemExit(f"{page}: Chromium gave no measurement: {res.stderr[-500:]}")
    text = res.stdout[start + len(f'id="{MARK}">') :].split("</div>", 1)[0]
    return json.loads(html.unescape(text))


def narrow_images(m: dict) -> list[str]:
    """Images shown narrower than the column the figures' font sizes assume, though their files are wider."""
    return [
        f"image {i['src']} shown {i['shown']} px wide (< {DOCS_WIDTH_PX}): its text renders under 9 px"
        for i in m.get("images", [])
        if i["natural"] > i["shown"] and i["shown"] < DOCS_WIDTH_PX - 1
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--out", default="/tmp/site_width", help="where the site and the screenshots go")
    ap.add_argument("--no-screenshots", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    site, png = out / "site", out / "png"
    shutil.rmtree(out, ignore_errors=True)
    png.mkdir(parents=True)
    browser = chromium()
    build(site)
    bad = 0
    for page in pages(site):
        name = str(page.relative_to(site))
        m = measure(browser, page, args.width)
        problems = []
        if m["scrollWidth"] > args.width:
            problems.append(f"document {m['scrollWidth']} px wide")
        problems += [f"{c['tag']} cut by {c['over']} px: {c['text']!r}" for c in m["cut"]]
        problems += narrow_images(m) if args.width >= 1280 else []  # the column the figures assume
        bad += bool(problems)
        print(f"{'OVERFLOW' if problems else 'ok'}  {name}  ({m['scrollWidth']} x {m['height']} px)")
        for p in problems:
            print(f"    {p}")
        if not args.no_screenshots:
            shot = png / (name.replace("/", "__").removesuffix(".html") + ".png")
            height = min(max(int(m["height"]), 600), 16000)
            _chrome(browser, f"--window-size={args.width},{height}", f"--screenshot={shot}", page.as_uri())
    print(f"{bad} of {len(pages(site))} pages overflow at {args.width} px; screenshots in {png}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
