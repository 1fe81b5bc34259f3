"""Write the per-figure documentation pages (docs/figures/<fig>.md, the manual's Figures section) with an example image.

    PYTHONPATH=workflow python workflow/tools/figure_docs.py --results results/smoke
    PYTHONPATH=workflow python workflow/tools/figure_docs.py --synthetic   # no trained runs needed

Each page says what the figure draws, which panels it takes and what each panel's filter should
select (all from the registry, ``coolsampler.spec.targets``), the selection the smoke study and the paper
study use, and shows an example drawn by this script: from the smoke study's run directories under
``--results`` where the smoke study defines the figure, else from the paper-shaped synthetic study
(``coolsampler.testkit.synthetic``). Each page states the commit, the study and the data the image was drawn
from. ``--synthetic`` writes the smoke study's runs as synthetic run directories first (for a
machine that has not trained); the page then says so.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from coolsampler.paper import labels as L
from coolsampler.paper import style as S
from coolsampler.paper.render import render
from coolsampler.results.loaders import load_metrics, load_status
from coolsampler.spec.layout import Layout
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.study import load_study
from coolsampler.spec.targets import TARGETS, panel_filters
from coolsampler.testkit.synthetic import DEMO_FIGURES, demo_panels, demo_runs, write_study_results

REPO = Path(__file__).resolve().parents[2]
# example images keep the width the figure is drawn at (coolsampler.paper.style: the docs column shows
# them scaled to DOCS_WIDTH_PX, and their text sizes are chosen for that); a wider one is scaled to this
WIDTH_PX = round(S.MAX_WIDTH_IN * S.DPI)


def _shrink(png: Path, out: Path) -> None:
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    with Image.open(png) as im:
        width = min(WIDTH_PX, im.width)
        h = round(im.height * width / im.width)
        info = PngInfo()  # keep the stamp (study, commit, script): the README reads its commit from here
        for key in ("Title", "Description"):
            if key in im.info:
                info.add_text(key, str(im.info[key]))
        im.convert("RGB").resize((width, h), Image.LANCZOS).save(out, optimize=True, pnginfo=info)


def _study_panels(study, target: str) -> dict:
    runs = study.runs
    layout = Layout(str(study.results))
    out = {}
    for panel, filt in panel_filters(study.figures[target]).items():
        out[panel] = [
            (
                r.settings(),
                load_metrics(layout.run_file(r.key, "metrics.parquet")),
                load_status(layout.run_file(r.key, "status.json")),
            )
            for r in runs
            if r in study.select(filt)
        ]
    return out


REAL = "the smoke study's toy runs"
SYNTHETIC = "layout only, on synthetic data"


def page_title(target: str, shows: str) -> str:
    """A page's title: the figure's number and what its example shows (``REAL`` or ``SYNTHETIC``), not
    what the paper's figure claims."""
    number = TARGETS[target].title.split(":")[0]
    return f"{number}: {shows}"


def _claim(target: str) -> str:
    """What the paper's figure shows, as its title says (without the figure number)."""
    title = TARGETS[target].title
    return title.partition(": ")[2] or title


def page(target: str, smoke, paper, example: str, shows: str = REAL) -> str:
    """The Markdown page of one figure: how to draw it, what it draws, then its panels."""
    t = TARGETS[target]
    claim = _claim(target)
    lines = [f"# {page_title(target, shows)}", ""]
    lines += [
        f"Draw it: `snakemake --cores 2 results/smoke/{target}.pdf` (the smoke study)"
        if target in smoke.figures
        else f"Draw it: `snakemake --profile profiles/gpu-box --configfile=config/paper.yaml results/{target}.pdf`"
        " (the paper study; the smoke study does not define it)",
        "",
        f"The paper's figure: *{claim}*. The example below is {shows}; it neither supports nor tests that claim.",
        "",
        f"Target `{target}`, drawn by `{t.fn}`.",
        "",
        "## Example",
        "",
        example,
        "",
        "## What it draws",
        "",
        t.draws,
        "",
    ]
    lines += ["## Panels", "", "| panel | what its filter should select |", "|---|---|"]
    lines += [f"| `{p}` | {t.panel_help.get(p, '')} |" for p in t.panels]
    lines += [""]
    if t.options:
        opts = "; ".join(f"`{k}`: {' / '.join(v)} (default {v[0]})" for k, v in t.options.items())
        lines += [f"Options (`figures: {target}: options:`): {opts}.", ""]
    lines += [
        "A panel name the target does not have is refused when the study is read, naming the allowed ones.",
        "The selection each panel uses is printed under the figure and in the report's caption.",
        "",
        "## Selections",
        "",
    ]
    for study in (smoke, paper):
        if target in study.figures:
            sel = L.selection_lines(panel_filters(study.figures[target]), t.panels)
            lines += [f"- `{study.name}` study: " + "; ".join(f"`{s}`" for s in sel)]
        else:
            lines += [f"- `{study.name}` study: not defined"]
    return "\n".join([*lines, ""])


def committed_example(page_md: Path) -> str | None:
    """The Example section of a committed figure page drawn from real runs (its image and its
    "Drawn at" line), or None: kept when this machine has not trained the smoke study."""
    if not page_md.is_file():
        return None
    text = page_md.read_text()
    start = text.find("## Example\n")
    if start < 0:
        return None
    body = text[start + len("## Example\n") :].split("\n## ")[0].strip()
    return body if "results/smoke" in body and "synthetic" not in body else None


def _has_runs(study, target: str) -> bool:
    return any(entry[1] is not None for entries in _study_panels(study, target).values() for entry in entries)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", default=str(REPO / "config/config.yaml"))
    ap.add_argument("--paper", default=str(REPO / "config/paper.yaml"))
    ap.add_argument("--results", help="the smoke study's results dir (default: the study's own)")
    ap.add_argument("--synthetic", action="store_true", help="draw from synthetic smoke runs (no training)")
    ap.add_argument("--out", default=str(REPO / "docs/figures"))
    args = ap.parse_args(argv)

    out = Path(args.out)
    (out / "img").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="figure_docs_"))
    results = args.results
    if args.synthetic:
        results = str(tmp / "smoke")
        write_study_results(load_study(args.smoke, results=results))
    smoke = load_study(args.smoke, results=results)
    paper = load_study(args.paper)
    prov = Provenance.here(smoke.name, script="workflow/tools/figure_docs.py", cwd=REPO)
    demo = None
    kind = "synthetic runs shaped like the smoke study (`coolsampler.testkit.synthetic.write_study_results`)"
    source = kind if args.synthetic else f"the run directories under `{smoke.results}`"
    index = [
        "# Figures",
        "",
        "One page per figure target (`coolsampler.spec.targets`). A page's example is drawn from the smoke",
        "study's real toy runs where that study defines the figure; every other example is synthetic data",
        "that exercises the drawing code, marked SYNTHETIC on the image itself. No example is a result of the",
        "paper study: no GPU run exists yet.",
        "",
    ]
    for target, t in TARGETS.items():
        if t.kind != "figure" or not t.paper:  # a study's own figure (guard_frontier) is on its study's page
            continue
        png = tmp / f"{target}.png"
        shows = REAL
        if target in smoke.figures and (args.synthetic or _has_runs(smoke, target)):
            panels = _study_panels(smoke, target)
            render(
                target, panels, prov, None, [png], None, panel_filters(smoke.figures[target]), synthetic=args.synthetic
            )
            where = f"the `{smoke.name}` study, from {source}"
            shows = SYNTHETIC if args.synthetic else REAL
        elif target in smoke.figures and committed_example(out / f"{target}.md"):
            example = committed_example(out / f"{target}.md")
            (out / f"{target}.md").write_text(page(target, smoke, paper, example, REAL))
            index.append(f"- [{page_title(target, REAL)}]({target}.md): the paper's *{_claim(target)}*")
            print(f"{target}: no runs under {smoke.results}; kept the committed image drawn from real runs")
            continue
        else:
            demo = demo or demo_runs()
            demo_prov = Provenance("paper-shaped synthetic", prov.commit, prov.dirty, "workflow/tools/figure_docs.py")
            render(
                target, demo_panels(target, demo), demo_prov, None, [png], None, DEMO_FIGURES[target], synthetic=True
            )
            where = (
                "the paper-shaped synthetic study (`coolsampler.testkit.synthetic.demo_runs`, 55 runs with known "
                f"answers, made up to exercise the drawing code): the smoke study does not define {target}"
            )
            shows = SYNTHETIC
        _shrink(png, out / "img" / f"{target}.png")
        example = (
            f"![{page_title(target, shows)}](img/{target}.png)\n\nDrawn at commit `{prov.revision}` by "
            f"`workflow/tools/figure_docs.py` from {where}."
        )
        (out / f"{target}.md").write_text(page(target, smoke, paper, example, shows))
        index.append(f"- [{page_title(target, shows)}]({target}.md): the paper's *{_claim(target)}*")
    index += [
        "",
        "Regenerate these pages and their images: `python workflow/tools/figure_docs.py "
        "--results results/smoke` (after `snakemake --cores 2`), or `--synthetic` on a machine that has not trained.",
        "",
    ]
    (out / "index.md").write_text("\n".join(index))
    print(f"wrote {out}/index.md and one page per figure (commit {prov.revision})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
