"""RACE: the pilot-grid protocol's statistics and analysis, torch-free (numpy, scipy; matplotlib for plots only).

* :mod:`.curves`: the ScaleRL curve over FLOPs, fitted the ScaleRL way (arXiv 2510.13786, appendix A.5), with the
  power-law and monotone-envelope checks;
* :mod:`.bootstrap`: the paired bootstrap over seeds and evaluation prompts: predicted rewards, intervals, P(best),
  identifiability, the temporal holdout;
* :mod:`.analysis` (inputs and :func:`~flopplan.race.analysis.analyze`), :mod:`.checks`, :mod:`.regime` (the regime
  rules and the recommendation), :mod:`.results` (race.json; :mod:`.legacy` reads version 1), :mod:`.report` and
  :mod:`.plots` (the outputs);
* :func:`pilot`: in a user's script started as a pilot (``flopplan race run DIR --pilot CMD``), its spec
  (:mod:`.script`; the runner's side: :mod:`.user_pilot`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flopplan.race.script import PilotSpec


def pilot() -> PilotSpec | None:
    """The spec of the RACE pilot this process runs (read from ``$FLOPPLAN_PILOT``), or None when the script was
    not started as a pilot: see :class:`flopplan.race.script.PilotSpec`."""
    from flopplan.race.script import pilot as read

    return read()
