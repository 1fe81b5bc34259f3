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
from coolsampler.paper.render import render
from coolsampler.results.loaders import load_metrics, load_status
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.study import load_study
from coolsampler.spec.targets import TARGETS, panel_filters
from coolsampler.testkit.synthetic import DEMO_FIGURES, demo_panels, demo_runs, write_study_results

REPO = Path(__file__).resolve().parents[2]
WIDTH_PX = 1000  # example images are scaled to this width: small enough to commit


def _shrink(png: Path, out: Path) -> None:
    from PIL import Image

    with Image.open(png) as im:
        h = round(im.height * WIDTH_PX / im.width)
        im.convert("RGB").resize((WIDTH_PX, h), Image.LANCZOS).save(out, optimize=True)


def _study_panels(study, target: str) -> dict:
    runs = study.runs
    out = {}
    for panel, filt in panel_filters(study.figures[target]).items():
        out[panel] = [
            (
                r.settings(),
                load_metrics(Path(study.results) / "runs" / r.key / "metrics.parquet"),
                load_status(Path(study.results) / "runs" / r.key / "status.json"),
            )
            for r in runs
            if r in study.select(filt)
        ]
    return out


def page(target: str, smoke, paper, example: str) -> str:
    """The Markdown page of one figure."""
    t = TARGETS[target]
    lines = [f"# {t.title}", "", f"Target `{target}`, drawn by `{t.fn}`.", "", "## What it draws", "", t.draws, ""]
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
    lines += ["", "## Example", "", example, ""]
    return "\n".join(lines)


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
    index = ["# Figures", "", "One page per figure target (`coolsampler.spec.targets`):", ""]
    for target, t in TARGETS.items():
        if t.kind != "figure":
            continue
        png = tmp / f"{target}.png"
        if target in smoke.figures:
            panels = _study_panels(smoke, target)
            render(target, panels, prov, None, [png], None, panel_filters(smoke.figures[target]))
            where = f"the `{smoke.name}` study, from {source}"
        else:
            demo = demo or demo_runs()
            demo_prov = Provenance("paper-shaped synthetic", prov.commit, prov.dirty, "workflow/tools/figure_docs.py")
            render(target, demo_panels(target, demo), demo_prov, None, [png], None, DEMO_FIGURES[target])
            where = (
                "the paper-shaped synthetic study (`coolsampler.testkit.synthetic.demo_runs`, 55 runs with known "
                f"answers): the smoke study does not define {target}"
            )
        _shrink(png, out / "img" / f"{target}.png")
        example = (
            f"![{t.title}](img/{target}.png)\n\nDrawn at commit `{prov.revision}` by "
            f"`workflow/tools/figure_docs.py` from {where}."
        )
        (out / f"{target}.md").write_text(page(target, smoke, paper, example))
        index.append(f"- [{t.title}]({target}.md)")
    index += [
        "",
        "Regenerate these pages and their images: `PYTHONPATH=workflow python workflow/tools/figure_docs.py "
        "--results results/smoke` (after `snakemake --cores 2`), or `--synthetic` on a machine that has not trained.",
        "",
    ]
    (out / "index.md").write_text("\n".join(index))
    print(f"wrote {out}/index.md and one page per figure (commit {prov.revision})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
