"""RACE statistics: ScaleRL curves over FLOPs (:mod:`.curves`) and the paired bootstrap over seeds and evaluation
prompts that turns pilot runs into predicted rewards, intervals and P(arm is best) (:mod:`.bootstrap`).

numpy and scipy only (no torch). Curve form and fit: ScaleRL (Khatri et al., arXiv 2510.13786, appendix A.5).
"""
