"""RACE: the pilot-grid protocol's statistics and analysis, torch-free (numpy, scipy; matplotlib for plots only).

* :mod:`.curves`: the ScaleRL curve over FLOPs, fitted the ScaleRL way (arXiv 2510.13786, appendix A.5), with the
  power-law and monotone-envelope checks;
* :mod:`.bootstrap`: the paired bootstrap over seeds and evaluation prompts: predicted rewards, intervals, P(best),
  identifiability, the temporal holdout;
* :mod:`.analysis` (inputs and :func:`~flopplan.race.analysis.analyze`), :mod:`.checks`, :mod:`.regime` (the regime
  rules and the recommendation), :mod:`.results` (race.json; :mod:`.legacy` reads version 1), :mod:`.report` and
  :mod:`.plots` (the outputs).
"""
