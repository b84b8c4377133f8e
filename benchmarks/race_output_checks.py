"""What a RACE analysis must never state, whatever its input: NaN or inf anywhere, a P(best) outside [0, 1], a point
outside its interval or an interval outside [0, 1], comparable P(best)s that do not sum to 1, a curve fitted through
one evaluation position per seed, a recommended arm that is unknown, eliminated without a word, or "fitted" on an
unfitted curve. Used by benchmarks/race_degenerate_probe.py."""

from __future__ import annotations

import math

import numpy as np

from flopplan.race.analysis import RaceInput
from flopplan.race.results import RaceAnalysis


def nonfinite(obj, path="$"):
    """Paths of NaN/inf floats (and strings 'nan'/'inf') in a JSON-like object."""
    out = []
    if isinstance(obj, float):
        if not math.isfinite(obj):
            out.append(f"{path}={obj}")
    elif isinstance(obj, str):
        if obj.strip().lower() in {"nan", "inf", "-inf", "infinity"}:
            out.append(f"{path}='{obj}'")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out += nonfinite(v, f"{path}.{k}")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            out += nonfinite(v, f"{path}[{i}]")
    return out


def fin(*v):
    return all(x is not None and math.isfinite(x) for x in v)


def nonsense(inp: RaceInput, an: RaceAnalysis) -> list[str]:
    bad = []
    for t in an.targets:
        if not t.fitted:
            continue
        for b in t.budgets:
            for p in b.predictions:
                tag = f"{b.label}:{p.arm}"
                if not fin(p.reward, p.lo, p.hi, p.p_best, p.gain, p.gain_lo, p.gain_hi):
                    bad.append(f"{tag} non-finite prediction {(p.reward, p.lo, p.hi, p.p_best)}")
                    continue
                if p.ledger_flops < 0 or p.extrapolation < 0:
                    bad.append(f"{tag} negative ledger FLOPs {p.ledger_flops:.3g} / extrapolation "
                               f"{p.extrapolation:.2f}")
                if not -1e-9 <= p.p_best <= 1 + 1e-9:
                    bad.append(f"{tag} P(best) {p.p_best}")
                if not p.lo - 1e-9 <= p.reward <= p.hi + 1e-9:
                    bad.append(f"{tag} reward {p.reward:.4f} outside [{p.lo:.4f}, {p.hi:.4f}]")
                if p.lo < -1e-9 or p.hi > 1 + 1e-9:
                    bad.append(f"{tag} interval outside [0,1]: [{p.lo:.4f}, {p.hi:.4f}]")
                if not p.gain_lo - 1e-9 <= p.gain <= p.gain_hi + 1e-9:
                    bad.append(f"{tag} gain {p.gain:.4f} outside [{p.gain_lo:.4f}, {p.gain_hi:.4f}]")
            comp = [p.p_best for p in b.predictions if p.comparable]
            if comp and abs(sum(comp) - 1) > 0.02:
                bad.append(f"{b.label}: comparable P(best) sum {sum(comp):.3f}")
            d = b.decision
            for k, v in d.p_best_of.items():
                if v is not None and not (math.isfinite(v) and -1e-9 <= v <= 1 + 1e-9):
                    bad.append(f"{b.label}: decision p_best_of[{k}] = {v}")
            if d.p_best is not None and not (math.isfinite(d.p_best) and -1e-9 <= d.p_best <= 1 + 1e-9):
                bad.append(f"{b.label}: decision P(best) {d.p_best}")
            if fin(d.margin, d.margin_lo, d.margin_hi) and not d.margin_lo - 1e-9 <= d.margin <= d.margin_hi + 1e-9:
                bad.append(f"{b.label}: margin {d.margin} outside [{d.margin_lo}, {d.margin_hi}]")
        for c in t.curves:
            if c.band is not None:
                lo, pt, hi = (np.array(x) for x in (c.band.lo, c.band.point, c.band.hi))
                if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(np.isfinite(pt))):
                    bad.append(f"band of {c.arm} not finite")
                elif np.any(lo > pt + 1e-9) or np.any(pt > hi + 1e-9) or lo.min() < -1e-9 or hi.max() > 1 + 1e-9:
                    bad.append(f"band of {c.arm}: point outside band or band outside [0,1] "
                               f"(lo {lo.min():.3f}, hi {hi.max():.3f})")
        arms_in = {a.name: a for a in inp.targets[t.name].arms}
        for c in t.curves:  # a curve through one evaluation position per seed (the >= 3 distinct FLOPs rule met by
            a = arms_in.get(c.arm)  # the seeds' ledger jitter alone)
            if c.fitted and a is not None and max(sum(p.flops > 0 for p in run.points) for run in a.runs) < 2:
                pr = [p for p in t.budgets[-1].predictions if p.arm == c.arm]
                desc = "" if not pr else (f": usable={pr[0].usable}, R={pr[0].reward:.3f} "
                                          f"[{pr[0].lo:.3f}, {pr[0].hi:.3f}], P(best) {pr[0].p_best:.2f}")
                bad.append(f"{c.arm} fitted from one evaluation position per seed{desc}")
        r = t.recommendation
        if r is None:
            bad.append("no recommendation object")
            continue
        names = {a.name for a in inp.arms}
        if r.p_best is not None and not (math.isfinite(r.p_best) and -1e-9 <= r.p_best <= 1 + 1e-9):
            bad.append(f"rec P(best) {r.p_best}")
        for k in ("p_best_curves", "p_best_seen", "p_best_anchored"):
            v = getattr(r, k)
            if v is not None and not (math.isfinite(v) and -1e-9 <= v <= 1 + 1e-9):
                bad.append(f"rec {k} {v}")
        if fin(r.reward, r.lo, r.hi):
            if not r.lo - 1e-9 <= r.reward <= r.hi + 1e-9:
                bad.append(f"rec reward {r.reward} outside [{r.lo}, {r.hi}]")
            if r.lo < -1e-9 or r.hi > 1 + 1e-9:
                bad.append(f"rec interval outside [0,1]: [{r.lo}, {r.hi}]")
        if r.arm is not None:
            if r.arm not in names:
                bad.append(f"rec arm {r.arm!r} unknown")
            curves = {c.arm: c for c in t.curves}
            said = " ".join([*t.warnings, *r.reasons, r.naive_note]).lower()
            survived = {a.info.name: a.survived for a in an.arms}  # reached the highest rung any arm reached
            if not survived[r.arm] and not any(k in said for k in ("eliminat", "dropped", "not reach", "surviv")):
                bad.append(f"rec arm {r.arm} was eliminated (survived: no) and no reason/warning says so "
                           f"(P(best) {r.p_best}, seen best {r.p_best_seen}; naive note: {r.naive_note[:90]!r})")
            if r.mode == "fitted" and not curves[r.arm].fitted:
                bad.append(f"rec arm {r.arm} mode fitted but its curve is not fitted")
        if r.mode == "fitted" and r.arm is not None and not fin(r.reward, r.lo, r.hi, r.p_best):
            bad.append(f"fitted rec with missing numbers {(r.reward, r.lo, r.hi, r.p_best)}")
        if t.holdout_summary is not None:
            hs = t.holdout_summary
            if not (fin(hs.coverage, hs.mean_abs_error) and 0 <= hs.coverage <= 1):
                bad.append(f"holdout summary {hs}")
    return bad
