"""Rule world_screen: the study's candidate worlds judged by its screen, and the one it trains in."""

import sys
from pathlib import Path

from coolsampler.paper.figures import screen_figure
from coolsampler.results.world_screen import chosen_world, read_probes, screen_markdown, screen_table
from coolsampler.spec.provenance import Provenance
from coolsampler.spec.world import Screen

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821
screen = Screen(**snakemake.params.screen)  # noqa: F821
probes = {name: snakemake.input[name] for name in screen.probed}  # noqa: F821
table = screen_table(screen, read_probes(probes))
table.to_csv(snakemake.output.tsv, sep="\t", index=False)  # noqa: F821
Path(snakemake.output.md).write_text(screen_markdown(screen, table))  # noqa: F821
provenance = Provenance.here(snakemake.params.study, script="workflow/scripts/world_screen.py")  # noqa: F821
screen_figure(table, provenance, [snakemake.output.png, snakemake.output.pdf])  # noqa: F821
print(f"screen: chosen {chosen_world(table)}", file=sys.stderr)
