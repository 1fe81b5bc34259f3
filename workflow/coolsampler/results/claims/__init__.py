"""The paper's quantitative statements as checkable claims, computed on a study's runs.

``config/claims.yaml`` lists every number of Sections 3-4, the captions and Tables 1-4 that a run can
check: which runs (a settings filter, the grammar of a study's ``figures:`` filters), which per-run
measure (``QUANTITIES``, each a thin call into ``coolsampler.results.analysis``), how it is reduced over the
runs (``reduce``), the paper's value and a tolerance. ``evaluate`` turns that into one verdict per
claim:

* ``reproduced``: the computed value is within the tolerance of the paper's;
* ``differs``: it is not (or it cannot be measured from the logs: NaN);
* ``not run``: no run of the study matches the filter, or a matching run has no metrics yet;
* ``incomplete``: every run has metrics but one stopped early (its ``status.json``); the value over
  the logged steps is still shown;
* ``reported``: a claim marked ``reported: true`` has no paper value to agree with: its value is
  computed and shown, never judged. The lead of each staleness diagnostic over the onset is such a
  quantity (the paper reports the diagnostics "as descriptions of the degradation"; Section 4).

Before any training the report still says, for each claim, which runs would check it.

The staleness budget (Section 3.3: "degrades at about 120 steps of staleness uncooled and 180 cooled,
so 144 should sit between") comes from *observed* onsets (Section 3.2: KL extrapolation does not
forecast the cliff): ``staleness_at_onset`` is the staleness at the onset step (``spec.guard.staleness``), and
``staleness_budget`` tabulates it per model, task and sampler temperature.

One concern per module:

* ``measures``: ``RunData`` and the per-run measures (``QUANTITIES``, ``PAIRED``), the columns they read;
* ``judge``: reducing per-run values over a claim's runs and comparing with the paper's value;
* ``claims_file``: loading, validating, selecting and relaxing the claims file (``ClaimError``);
* ``evaluation``: one ``Result`` (verdict, value, runs) per claim, and the dry listing (``plan``);
* ``budget``: the staleness budget table.

The Markdown report and the Snakemake rule's glue are in the paper layer
(``coolsampler.paper.claims_report``, ``coolsampler.paper.claims_rule``). This package re-exports the
names its users need, so ``from coolsampler.results import claims as C`` reads as one module.

Only numpy, pandas, yaml and jsonschema: no verl, vLLM or torch.
"""

from __future__ import annotations

from coolsampler.results.claims import budget, claims_file, evaluation, judge, measures
from coolsampler.results.claims.budget import *  # noqa: F403
from coolsampler.results.claims.claims_file import *  # noqa: F403
from coolsampler.results.claims.evaluation import *  # noqa: F403
from coolsampler.results.claims.judge import *  # noqa: F403
from coolsampler.results.claims.judge import _tol as _tol
from coolsampler.results.claims.measures import *  # noqa: F403
from coolsampler.results.claims.measures import _order as _order

# Each module's own __all__ is the package's, once: not public besides, _order and _tol, the helpers
# that the tests and coolsampler.testkit.synthetic_claims call one by one (C._tol, ...).
__all__ = [*budget.__all__, *claims_file.__all__, *evaluation.__all__, *judge.__all__, *measures.__all__]
