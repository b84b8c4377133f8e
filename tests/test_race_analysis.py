"""RACE analysis (flopplan.race.analysis, regime, report) on synthetic pilots drawn from known ScaleRL curves.

Pilots come from flopplan.race.curves.synthetic_scores: 0/1 scores on 200 shared prompts (Gaussian-copula prompt
difficulty), 3 seeds, seed sd 0.02 on A, step 0 plus 5 log-spaced evaluations up to the arm's last rung. Every draw
is seeded, so each test is deterministic; each asserts a property a wrong analysis breaks.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
from race_inputs import F_PILOT, REPS, RUNGS, TRUTH, info, pilots, race, size_race_input, two_arms
from scipy.special import ndtr

from flopplan.errors import UserError
from flopplan.race.analysis import RaceInput, analyze
from flopplan.race.curves import scalerl_curve, synthetic_scores
from flopplan.race.pilot_data import ArmPilots, EvalPoint, PilotData, SeedRun
from flopplan.race.report import render_markdown
from flopplan.race.results import RaceAnalysis


@pytest.fixture(scope="module")
def size_race() -> tuple[RaceInput, RaceAnalysis]:
    inp = size_race_input()
    return inp, analyze(inp, n_replicates=REPS)


# ---------------------------------------------------------------- recommendation and regimes


def test_a_large_gap_recovers_the_true_best_arm(size_race):
    _, an = size_race
    rec = an.recommendations[0]
    assert (rec.arm, rec.mode, rec.confidence, rec.runner_up) == ("strong", "fitted", "high", "weak")
    assert rec.p_best > 0.99 and rec.margin_lo > 0.1
    truth = scalerl_curve(2 * F_PILOT, 0.75, 1.5, F_PILOT / 4, 0.2)
    assert rec.lo <= truth <= rec.hi and rec.gain == pytest.approx(rec.reward - an.target("math").curves[1].fit.r0)
    assert rec.extrapolation == pytest.approx(2.0, rel=0.02) and rec.budget_left_flops == pytest.approx(1.6 * F_PILOT)
    t = an.target("math")
    assert [b.label for b in t.budgets] == ["rung 0", "rung 1", "target"]
    assert all(b.decision.regime == "size-bound" and b.decision.best == "strong" for b in t.budgets)
    assert "policy" in t.budgets[-1].decision.rule and "larger parameters" in t.budgets[-1].decision.rule
    assert an.axes == ("policy",) and an.pilot_share == pytest.approx(0.2)


@pytest.mark.parametrize(("axis", "weak", "strong", "regime"), [
    ("policy", {"policy": "1.5B", "params": 1_500_000_000}, {"policy": "0.5B", "params": 500_000_000},
     "learning-bound"),
    ("group_size", {"group_size": 4}, {"group_size": 16}, "search-bound"),
    ("group_size", {"group_size": 16}, {"group_size": 4}, "learning-bound"),
    ("iterations", {"iterations": 1}, {"iterations": 2}, "learning-bound"),
    ("iterations", {"iterations": 2}, {"iterations": 1}, "search-bound"),
    ("reward", {"reward": "rule"}, {"reward": "prm", "split": {"rollout": 0.5, "learning": 0.3, "feedback": 0.2}},
     "feedback-bound"),
    ("reward", {"reward": "prm", "split": {"rollout": 0.5, "learning": 0.3, "feedback": 0.2}}, {"reward": "rule"},
     "learning-bound"),
])
def test_the_axis_that_differs_names_the_regime(axis, weak, strong, regime):
    inp = two_arms(2, axis, weak, strong)
    at_f = analyze(inp, n_replicates=REPS).target("math").budgets[-1]
    assert (at_f.decision.regime, at_f.decision.best) == (regime, "strong")
    assert [c.axis for c in at_f.decision.comparisons] == [axis] and at_f.decision.comparisons[0].names == regime


def test_the_costliest_axis_decides_among_several():
    rng = np.random.default_rng(3)
    eta = rng.standard_normal(200)
    pairs = [(info("best", 1_500_000_000, policy="1.5B", group_size=16), pilots(rng, eta, "best", a=0.8)),
             (info("small", policy="0.5B", group_size=16), pilots(rng, eta, "small", a=0.5)),
             (info("g4", 1_500_000_000, policy="1.5B", group_size=4), pilots(rng, eta, "g4", a=0.68)),
             (info("other", policy="0.5B", group_size=4), pilots(rng, eta, "other", a=0.45))]
    at_f = analyze(race(pairs), n_replicates=REPS).target("math").budgets[-1]
    assert at_f.decision.best == "best" and at_f.decision.runner_up == "g4"
    costs = {c.axis: (c.neighbour, c.cost, c.names) for c in at_f.decision.comparisons}
    assert costs["policy"][0] == "small" and costs["group_size"][0] == "g4"
    assert costs["policy"][1] > costs["group_size"][1] > 0 and at_f.decision.regime == "size-bound"


def test_identical_arms_are_undecided():
    rng = np.random.default_rng(4)
    same = pilots(rng, rng.standard_normal(200), "x")
    pairs = [(info("g8", group_size=8), ArmPilots("g8", same.runs)),
             (info("g16", group_size=16), ArmPilots("g16", same.runs))]
    an = analyze(race(pairs), n_replicates=REPS)
    t = an.target("math")
    for d in (b.decision for b in t.budgets):
        assert d.regime == "undecided" and d.p_best == pytest.approx(0.5) and "P(best)" in d.rule
        assert d.margin == 0.0
    rec = an.recommendations[0]
    assert rec.confidence == "cannot tell" and set(rec.tied) == {"g8", "g16"} and rec.separate_flops > 0
    assert any("undecided" in r for r in rec.reasons) and rec.naive_arm in rec.tied
    # the reason quotes the decision's P(best), the curves' at F, which may differ from the anchored one stated
    assert f"the curves' P(best) of {rec.arm} {t.budgets[-1].decision.p_best_of[rec.arm]:.2f}" in rec.reasons[0]


@pytest.mark.slow
def test_arms_with_the_same_truth_are_rarely_called():
    """Two arms drawn from the same curve, 12 times: a named regime at the target budget is a false call; with the
    interval rule it should happen in about 10 % of the cases (P(best) >= 0.8 alone: about 40 %)."""
    rng = np.random.default_rng(12)
    regimes, rules_seen = [], []
    for i in range(12):
        eta = rng.standard_normal(200)
        pairs = [(info("g4", group_size=4), pilots(rng, eta, "g4")), (info("g16", group_size=16),
                                                                       pilots(rng, eta, "g16"))]
        t = analyze(race(pairs), n_replicates=100, seed=i).target("math")
        regimes.append(t.budgets[-1].decision.regime)
        rules_seen += [b.decision.rule for b in t.budgets if b.decision.regime == "undecided"]
    assert sum(r in ("search-bound", "learning-bound") for r in regimes) <= 2
    assert any("P(best)" in r for r in rules_seen) and any("within the" in r for r in rules_seen)


def test_a_decreasing_best_group_size_is_flagged():
    """G = 16 learns fast and saturates low; G = 4 is slower and higher: the best G drops from 16 to 4."""
    rng = np.random.default_rng(6)
    eta = rng.standard_normal(200)
    pairs = [(info("g16", group_size=16), pilots(rng, eta, "g16", a=0.55, b=2.0, f_mid=F_PILOT / 16)),
             (info("g4", group_size=4), pilots(rng, eta, "g4", a=0.75, f_mid=F_PILOT / 4))]
    t = analyze(race(pairs), n_replicates=REPS).target("math")
    first, last = t.budgets[0].decision, t.budgets[-1].decision
    assert first.best == "g16" and last.best == "g4" and last.regime == "learning-bound"
    flagged = [w for w in t.warnings if "best G decreases" in w]
    assert len(flagged) == 1 and "G = 16" in flagged[0] and "G = 4" in flagged[0]
    assert first.regime in flagged[0]  # undecided budgets count too, and the warning says which
    # an increasing best G is no warning
    pairs = [(info("g4", group_size=4), pilots(rng, eta, "g4", a=0.55, b=2.0, f_mid=F_PILOT / 16)),
             (info("g16", group_size=16), pilots(rng, eta, "g16", a=0.75, f_mid=F_PILOT / 4))]
    assert not [w for w in analyze(race(pairs), n_replicates=REPS).target("math").warnings if "best G" in w]


def test_confidence_is_downgraded_beyond_twice_the_pilots(size_race):
    inp, _ = size_race
    rec = analyze(replace(inp, budget_flops=4 * F_PILOT), n_replicates=REPS).recommendations[0]
    assert rec.arm == "strong" and rec.confidence == "low" and rec.extrapolation == pytest.approx(4, rel=0.02)
    assert any("extrapolation" in r for r in rec.reasons)


def test_unbent_arms_are_predicted_by_the_model_average_with_wider_intervals():
    """Curves that have not bent (F_mid = 4 x the pilots): ScaleRL's A is unidentified, yet the model average over
    curve families predicts them at F, with intervals wider beyond the pilots than within."""
    rng = np.random.default_rng(7)
    eta = rng.standard_normal(200)
    pairs = [(info("lo", group_size=4), pilots(rng, eta, "lo", a=0.6, b=1.0, f_mid=4 * F_PILOT)),
             (info("hi", group_size=16), pilots(rng, eta, "hi", a=0.95, b=1.0, f_mid=4 * F_PILOT))]
    an = analyze(race(pairs), n_replicates=REPS)
    t = an.target("math")
    assert not any(c.identified for c in t.curves)
    assert all(p.usable for b in t.budgets for p in b.predictions)
    rec = an.recommendations[0]
    assert (rec.arm, rec.mode, rec.runner_up) == ("hi", "fitted", "lo")
    for arm in ("lo", "hi"):
        within, beyond = (next(p for p in t.budgets[i].predictions if p.arm == arm) for i in (1, 2))
        assert beyond.hi - beyond.lo > within.hi - within.lo


def test_a_p_best_among_arms_still_climbing_says_what_it_assumes(size_race):
    """Straight rises in F (convex in ln F to the end of the pilots): the recommendation's P(best) assumes both
    keep climbing to F, and a warning names them, with the pick's P(best) were it to stop at its largest pilot
    while the other goes on; arms that bent before their largest pilot get no such warning."""
    rng = np.random.default_rng(0)
    eta = rng.standard_normal(200)
    grid = np.concatenate([[0.0], F_PILOT * 2.0 ** np.arange(-4, 1)])
    pairs = []
    for name, slope in (("slow", 0.2), ("fast", 0.35)):
        f = np.tile(grid, (3, 1)) * (1 + 0.01 * rng.uniform(-1, 1, (3, grid.size)))
        p = 0.2 + slope * f / F_PILOT
        z = np.sqrt(0.5) * eta + np.sqrt(0.5) * rng.standard_normal((3, grid.size, eta.size))
        pairs.append((info(name), ArmPilots.from_arrays(name, f, (ndtr(z) < p[:, :, None]).astype(float))))
    t = analyze(race(pairs), n_replicates=REPS).target("math")
    assert t.recommendation.mode == "fitted" and t.recommendation.arm == "fast"
    assert all(c.ensemble.reach_at_budget is not None for c in t.curves)
    caveat = [w for w in t.warnings if "still accelerating" in w]
    assert len(caveat) == 1 and caveat[0].startswith("slow, fast: ")
    assert f"P(best) of {t.recommendation.p_best_anchored:.2f}" in caveat[0]
    stopped = float(caveat[0].rsplit("that P(best) would be ", 1)[1])  # slow, going on, may pass a stopped fast
    assert stopped < t.recommendation.p_best_anchored
    assert not [w for w in size_race[1].target("math").warnings if "still accelerating" in w]


def test_under_cannot_tell_the_climb_warning_compares_the_anchored_p_best_with_its_stopped_twin():
    """A straight rise in F beside a saturating arm: the pick still accelerates, and the evidence cannot tell. The
    stated P(best) averages the anchored one with the curves'; "were it to stop" is a twin of the anchored one, so
    the warning prints that (a stopped climb read beside the average seemed to raise the P(best))."""
    rng = np.random.default_rng(0)
    eta = rng.standard_normal(200)
    grid = np.concatenate([[0.0], F_PILOT * 2.0 ** np.arange(-4, 1)])
    f = np.tile(grid, (3, 1)) * (1 + 0.01 * rng.uniform(-1, 1, (3, grid.size)))
    z = np.sqrt(0.5) * eta + np.sqrt(0.5) * rng.standard_normal((3, grid.size, eta.size))
    scores = (ndtr(z) < (0.38 + 0.15 * f / F_PILOT)[:, :, None]).astype(float)
    pairs = [(info("fast"), ArmPilots.from_arrays("fast", f, scores)), (info("sat"), pilots(rng, eta, "sat", a=0.47))]
    t = analyze(race(pairs), n_replicates=REPS).target("math")
    rec = t.recommendation
    assert rec.arm == "fast" and rec.confidence == "cannot tell"
    assert rec.p_best == pytest.approx((rec.p_best_anchored + rec.p_best_curves) / 2)
    assert f"{rec.p_best:.2f}" != f"{rec.p_best_anchored:.2f}"  # the two numbers the warning must not mix
    caveat = [w for w in t.warnings if "still accelerating" in w]
    assert len(caveat) == 1 and f"P(best) of {rec.p_best_anchored:.2f} (the anchored forecast's" in caveat[0]
    assert float(caveat[0].rsplit("that P(best) would be ", 1)[1]) < rec.p_best_anchored


def test_a_p_best_far_beyond_the_pilots_says_it_was_not_checked_there(size_race):
    """The stated P(best) was checked against simulated truths at F = 2x the largest pilot: at 2x no caveat; the same
    pilots read at 16x carry one, naming the pick, the horizon and the P(best) it qualifies."""
    inp, near = size_race
    assert near.target("math").recommendation.horizon == pytest.approx(2.0)
    assert not [w for w in near.target("math").warnings if "x its largest pilot" in w]
    far = analyze(replace(inp, budget_flops=16 * F_PILOT), n_replicates=REPS).target("math")
    rec = far.recommendation
    assert rec.mode == "fitted" and rec.horizon == pytest.approx(16.0)
    caveat = [w for w in far.warnings if "x its largest pilot" in w]
    assert rec.extrapolation == pytest.approx(16.0, rel=0.02)  # over the training FLOPs the analysis read
    assert len(caveat) == 1 and caveat[0].startswith(f"{rec.arm}: F is {rec.extrapolation:.1f}x its largest pilot")
    assert f"P(best) of {rec.p_best:.2f}" in caveat[0]


def test_a_pool_with_an_arm_on_a_learned_reward_says_what_over_optimisation_would_hide(size_race):
    """An arm trained on an orm: reward beside a rule-reward arm: the fitted recommendation's warnings name it
    (over-optimisation after the largest pilot is in no pilot); the size race, with no reward axis, has none."""
    rng = np.random.default_rng(3)
    eta = rng.standard_normal(200)
    pairs = [(info("rule", reward="rule"), pilots(rng, eta, "rule", a=0.5)),
             (info("orm", reward="orm:tiny-rm"), pilots(rng, eta, "orm", a=0.8))]
    t = analyze(race(pairs), n_replicates=REPS).target("math")
    assert t.recommendation.mode == "fitted" and t.recommendation.p_best is not None
    caveat = [w for w in t.warnings if "learned reward model" in w]
    assert len(caveat) == 1 and caveat[0].startswith("orm: trained on a learned reward model")
    assert not [w for w in size_race[1].target("math").warnings if "learned reward model" in w]
    # a script's pilots that trained on a reward model the design calls "rule" (their ledgers say so)
    pairs[1] = (info("orm", reward="rule"), pairs[1][1])
    assert not [w for w in analyze(race(pairs), n_replicates=REPS).target("math").warnings if "learned reward" in w]
    scripted = analyze(replace(race(pairs), trained_rewards={"orm": "orm:my-rm"}), n_replicates=REPS).target("math")
    assert [w for w in scripted.warnings if w.startswith("orm (by its pilots' ledgers): trained on a learned reward")]


def test_a_target_on_fewer_prompts_than_checked_says_so(size_race):
    """The intervals and P(best) were checked against simulated truths at 100-200 evaluation prompts per target: the
    same truths scored on 60 prompts carry one caveat naming the target and its count; on 200, none."""
    _, full = size_race
    assert not [w for w in full.target("math").warnings if "evaluation prompts" in w]
    rng = np.random.default_rng(1)
    eta = rng.standard_normal(60)
    few = race([(info("weak"), pilots(rng, eta, "weak", a=0.45)), (info("strong"), pilots(rng, eta, "strong", a=0.75))])
    caveat = [w for w in analyze(few, n_replicates=50).target("math").warnings if "evaluation prompts" in w]
    assert len(caveat) == 1 and caveat[0].startswith("math: 60 evaluation prompts")


def test_a_grid_of_more_arms_than_checked_says_so(size_race):
    """P(best) and the intervals were checked against simulated truths on grids of up to 6 arms: a 7-arm grid's
    target carries one caveat naming the target and its arm count; the 2-arm race, none."""
    _, full = size_race
    assert not [w for w in full.target("math").warnings if " arms; " in w]
    rng = np.random.default_rng(2)
    eta = rng.standard_normal(200)
    many = race([(info(f"a{i}"), pilots(rng, eta, f"a{i}", a=0.45 + 0.05 * i)) for i in range(7)])
    caveat = [w for w in analyze(many, n_replicates=50).target("math").warnings if " arms; " in w]
    assert len(caveat) == 1 and caveat[0].startswith("math: 7 arms")


def test_the_analysis_assumes_the_races_seed_sd_for_one_seed_arms():
    """One seed per arm: the interval's method names the seed sd assumed, the race's own (``one_seed_sd``, from
    ``race design --seed-sd``) where it sets one; a value outside [0, 1] is refused."""
    rng = np.random.default_rng(31)
    eta = rng.standard_normal(200)
    pairs = [(info(n, policy=n), pilots(rng, eta, n, n_seeds=1, a=a)) for n, a in (("a", 0.6), ("b", 0.55))]
    methods = {sd: analyze(replace(race(pairs), one_seed_sd=sd), n_replicates=40, seed=2).target("math")
               .interval_method for sd in (0.05, 0.3)}
    assert "tau 0.050 assumed" in methods[0.05] and "tau 0.300 assumed" in methods[0.3]
    from flopplan.race.runner import _digest  # a recorded promotion stands only for the seed sd it was made with

    assert _digest(replace(race(pairs), one_seed_sd=0.3)) != _digest(race(pairs)) == _digest(race(pairs))
    with pytest.raises(UserError, match="one_seed_sd must be a relative sd above 0 and at most 1"):
        replace(race(pairs), one_seed_sd=1.5)


def test_an_eliminated_arm_stays_in_the_analysis_with_a_wide_interval():
    """An arm the halving dropped at rung 0, whose curve has not bent, stays in play at F: predicted by the model
    average over its short pilots, with an interval wider than the survivors'; it competes in the decision's
    P(best), not in the recommendation's (among the finalists)."""
    rng = np.random.default_rng(13)
    eta = rng.standard_normal(200)
    pairs = [(info("dropped", 3_000_000_000, policy="3B"),
              pilots(rng, eta, "dropped", reach=RUNGS[0], a=0.95, b=1.0, f_mid=4 * F_PILOT)),
             (info("small", policy="0.5B"), pilots(rng, eta, "small", a=0.45)),
             (info("large", 1_500_000_000, policy="1.5B"), pilots(rng, eta, "large", a=0.75))]
    t = analyze(race(pairs, reached={"dropped": 0, "small": 1, "large": 1}), n_replicates=REPS).target("math")
    assert not t.curves[0].identified
    at_f = {p.arm: p for p in t.budgets[-1].predictions}
    assert at_f["dropped"].usable and at_f["dropped"].comparable and at_f["dropped"].extrapolation > 7
    assert at_f["dropped"].hi - at_f["dropped"].lo > max(at_f[a].hi - at_f[a].lo for a in ("small", "large"))
    assert sum(p.p_best for p in at_f.values()) == pytest.approx(1.0)
    assert [h.arm for h in t.holdout] == ["small", "large"]
    # the recommendation's P(best) is among the finalists (small, large): the dropped arm's share moves to them
    rec = t.recommendation
    assert rec.mode == "fitted" and rec.arm in ("small", "large") and at_f["dropped"].p_best > 0
    others = at_f["small"].p_best + at_f["large"].p_best
    assert at_f[rec.arm].p_best < rec.p_best <= at_f[rec.arm].p_best + at_f["dropped"].p_best and others < 1


def test_an_eliminated_arm_that_leads_at_f_is_recommended_as_what_it_is():
    """An arm eliminated after rung 1 whose own pilots put it far above the finalists at F is recommended, and the
    statements say it was eliminated: read on its own pilots, not seen at the top rung, not among the finalists
    alone; the naive pick's note does not say the curves cross, which no pilot showed (a review's probe found all
    three said wrongly)."""
    rng = np.random.default_rng(0)
    eta = rng.standard_normal(200)
    pairs = [(info("early", group_size=4), pilots(rng, eta, "early", reach=RUNGS[0], a=0.9, f_mid=F_PILOT / 20)),
             *((info(n, group_size=g), pilots(rng, eta, n, a=a, f_mid=f)) for n, g, a, f in (
                 ("g8", 8, 0.55, F_PILOT / 8), ("g16", 16, 0.6, F_PILOT / 4), ("g32", 32, 0.65, F_PILOT / 2)))]
    inp = race(pairs, reached={"early": 0, "g8": 1, "g16": 1, "g32": 1})
    an = analyze(inp, n_replicates=REPS)
    rec = an.target("math").recommendation
    assert rec.arm == "early" and rec.naive_arm != "early"
    extrapolation = next(p for p in an.target("math").budgets[-1].predictions if p.arm == "early").extrapolation
    assert any(r.startswith("early was eliminated by the halving after rung 1 of 2: it is read on its pilots so far")
               and f"{extrapolation:.1f}x before" in r for r in rec.reasons)
    assert "cross" not in rec.naive_note and "where early did not run (eliminated after rung 1)" in rec.naive_note
    text = render_markdown(an)
    assert "among early (it did not reach the finalists' rung: read at its own largest pilot) and the finalists" in text
    assert "not seen there: early did not run that rung" in text and "seen best there" not in text
    # midway through a race an arm promoted past rung 1 whose pilots are still running is not called eliminated
    rec = analyze(replace(inp, running=frozenset({"early"})), n_replicates=REPS).target("math").recommendation
    assert any("early was promoted past rung 1 of 2 and its pilots there are still running" in r for r in rec.reasons)
    assert not any("eliminated" in r for r in rec.reasons) and "(still running)" in rec.naive_note


def test_a_non_monotone_top_arm_makes_the_budget_unstable():
    rng = np.random.default_rng(8)
    eta = rng.standard_normal(200)
    flops, scores = synthetic_scores(rng, prompt_latent=eta, f_pilot=F_PILOT, **(TRUTH | {"a": 0.85}))
    scores[:, -1] = scores[:, -2]  # the last evaluation loses 40 of the 200 prompts: a fall of about 0.14
    scores[:, -1, :40] = 0.0
    pairs = [(info("collapse", group_size=16), ArmPilots.from_arrays("collapse", flops, scores)),
             (info("steady", group_size=4), pilots(rng, eta, "steady", f_mid=F_PILOT / 8))]
    an = analyze(race(pairs), n_replicates=REPS)
    t = an.target("math")
    curve = t.curves[0]
    assert not curve.envelope.monotone and not curve.stable and "non-monotone" in curve.checks_failed[0]
    assert t.budgets[0].decision.regime == "unstable" and "collapse" in t.budgets[0].decision.rule
    # the pilots fall at their largest position: the steep fall is fitted and carries the fall on to the target,
    # where the collapsing arm is no longer the top prediction
    assert curve.ensemble.fall_share >= 0.9 and {f.family: f.weight for f in curve.ensemble.families}["steep-fall"] > 0
    reward = {b.label: {p.arm: p.reward for p in b.predictions} for b in t.budgets}
    assert reward["target"]["collapse"] < min(reward["rung 1"]["collapse"], reward["target"]["steady"])
    rec = an.recommendations[0]
    assert rec.arm == "steady" and rec.confidence == "low"


def test_upfront_flops_are_charged_at_every_budget():
    rng = np.random.default_rng(9)
    eta = rng.standard_normal(200)
    upfront = int(F_PILOT / 2)
    pairs = [(info("rule", reward="rule"), pilots(rng, eta, "rule", a=0.5)),
             (info("prm", reward="prm", upfront=upfront, split={"rollout": 0.5, "learning": 0.3, "feedback": 0.2}),
              pilots(rng, eta, "prm", a=0.8))]
    t = analyze(race(pairs), n_replicates=REPS).target("math")
    prm = {b.label: next(p for p in b.predictions if p.arm == "prm") for b in t.budgets}
    assert not prm["rung 0"].usable and "upfront" in prm["rung 0"].note
    assert prm["rung 0"].reward == pytest.approx(t.curves[1].fit.r0, abs=1e-9) and prm["rung 0"].gain == 0.0
    assert prm["target"].ledger_flops == pytest.approx(1.5 * F_PILOT)
    assert t.budgets[0].decision.best == "rule" and t.budgets[-1].decision.best == "prm"
    assert t.budgets[-1].decision.regime == "feedback-bound"


def test_an_arm_whose_upfront_flops_use_up_the_budget_is_read_at_its_start_never_at_negative_flops():
    """A learned reward model whose training costs more than F: the arm trains none of F. It had been read at
    -4e20 ledger FLOPs and -3.99x extrapolation in race.json and the report (a review's probe)."""
    rng = np.random.default_rng(9)
    eta = rng.standard_normal(200)
    pairs = [(info("rule", reward="rule"), pilots(rng, eta, "rule", a=0.5)),
             (info("prm", reward="prm", upfront=int(6 * F_PILOT), split={"rollout": 0.5, "learning": 0.3,
                                                                          "feedback": 0.2}),
              pilots(rng, eta, "prm", a=0.8))]
    an = analyze(race(pairs), n_replicates=REPS)
    t = an.target("math")
    for b in t.budgets:
        prm = next(p for p in b.predictions if p.arm == "prm")
        assert prm.ledger_flops == 0 and prm.extrapolation == 0 and not prm.usable
        assert prm.reward == pytest.approx(t.curves[1].fit.r0, abs=1e-9)
    assert any(w.startswith("prm: its upfront FLOPs (600 EFLOP) use up the target budget") for w in t.warnings)
    assert an.recommendations[0].arm == "rule" and "-" not in render_markdown(an).split("| prm | target |")[1][:20]


# ---------------------------------------------------------------- curves, holdout, held-out targets


def test_curves_carry_both_fits_and_the_checks(size_race):
    _, an = size_race
    for c in an.target("math").curves:
        assert c.fitted and c.n_seeds == 3 and c.identified and c.stable and c.envelope.monotone
        wf = c.without_first.fit
        assert wf.dropped_first == 1 and wf.n_points == c.fit.n_points - 3 and c.fit is c.arm_fit.fit
        assert c.arm_fit.a_lo <= c.fit.a <= c.arm_fit.a_hi and c.power_law is not None and c.power_law.law.n_used > 0
        assert c.predicted_at_budget == pytest.approx(c.fit.predict(2 * F_PILOT))
        assert len(c.band.flops) == len(c.band.lo) == 40 and all(
            lo <= p <= hi for lo, p, hi in zip(c.band.lo, c.band.point, c.band.hi, strict=True))
        assert c.noise > 0 and "seed sd" in c.noise_method and len(c.observations) == 18


def test_temporal_holdout_reports_error_and_coverage():
    rng = np.random.default_rng(10)
    eta = rng.standard_normal(200)
    pairs = [(info("a", group_size=4), pilots(rng, eta, "a", a=0.5, reach=RUNGS[0])),
             (info("b", group_size=8), pilots(rng, eta, "b", a=0.7, f_mid=F_PILOT / 8)),
             (info("c", group_size=16), pilots(rng, eta, "c", a=0.65, f_mid=F_PILOT / 8))]
    ragged = ArmPilots("c", (pairs[2][1].runs[0], SeedRun(1, pairs[2][1].runs[1].points[:-1]), pairs[2][1].runs[2]))
    pairs[2] = (pairs[2][0], ragged)
    an = analyze(race(pairs, reached={"a": 0, "b": 1, "c": 1}), n_replicates=REPS)
    t = an.target("math")
    assert [h.arm for h in t.holdout] == ["b", "c"]  # survivors only
    b, c = t.holdout
    assert b.ok and len(b.points) == 1 and b.split_flops == pytest.approx(F_PILOT / 2, rel=0.03)
    assert b.mean_abs_error == pytest.approx(abs(b.points[0].error)) and b.mean_abs_error < 0.1
    assert b.coverage in (0.0, 1.0) and b.points[0].lo <= b.points[0].predicted <= b.points[0].hi
    assert not c.ok and "same number" in c.reason
    s = t.holdout_summary
    assert (s.n_arms, s.n_points) == (1, 1) and s.coverage == b.coverage and "coverage" in s.method
    # b and c (truths 0.70 and 0.65) are predicted within 0.01 of each other: the best is one of them, not the
    # eliminated arm, which is still predicted, with more extrapolation
    assert t.budgets[-1].decision.best in ("b", "c")
    pa = next(p for p in t.budgets[-1].predictions if p.arm == "a")
    assert pa.extrapolation == pytest.approx(8, rel=0.02)


def test_a_held_out_target_is_observed_and_never_fitted(size_race):
    inp, _ = size_race
    held = PilotData(tuple(ArmPilots(a.name, a.runs) for a in inp.targets["math"].arms))
    an = analyze(replace(inp, targets=inp.targets | {"math-heldout": held}), n_replicates=REPS)
    t = an.target("math-heldout")
    assert not t.fitted and t.recommendation is None and t.budgets == () and t.holdout == ()
    assert all(not c.fitted and c.fit is None and "held-out" in c.reason for c in t.curves)
    assert t.curves[1].observed_at_rungs[1] == pytest.approx(an.target("math").curves[1].observed_at_rungs[1])
    assert len(an.recommendations) == 1 and "Held-out evaluation targets" in render_markdown(an)


@pytest.mark.parametrize("points, jitter", [(2, 0.0), (1, 0.01)])
def test_an_arm_that_cannot_be_fitted_is_reported_not_dropped(size_race, points, jitter):
    """Two evaluation points, or one whose seeds' FLOPs differ by their ledgers' 1 % jitter (it had been fitted
    from the jitter alone, and recommended: a review's probe), are too few for a curve."""
    inp, _ = size_race
    rng = np.random.default_rng(11)
    short = ArmPilots.from_arrays("short", *synthetic_scores(rng, **TRUTH, f_pilot=RUNGS[0], n_points=points,
                                                             flops_jitter=jitter))
    assert len({p.flops for r in short.runs for p in r.points if p.flops > 0}) >= (3 if jitter else points)
    arms = (*inp.arms, info("short", policy="3B", params=3_000_000_000))
    data = PilotData((*inp.targets["math"].arms, short))
    an = analyze(replace(inp, arms=arms, targets={"math": data}, reached=inp.reached | {"short": 0}),
                 n_replicates=REPS)
    t = an.target("math")
    assert not t.curves[2].fitted and "3 distinct" in t.curves[2].reason and t.curves[2].observations
    assert any(w.startswith("short: not fitted") for w in t.warnings)
    assert an.recommendations[0].arm == "strong"


def test_pilots_at_the_scale_of_large_policies_read_as_the_same_race_with_no_numeric_warning():
    """FLOPs are a unit: the same pilots at 1e5 x the FLOPs (top rung 1e25, a 72B policy's RL run) give the same
    recommendation and interval. R0 is read at 1e-300 FLOPs, and ln(1e-300 / f_ref) was ln 0 once f_ref passed ~2e23
    (a RuntimeWarning on stderr for every analysis of such a race)."""
    read = []
    for scale in (1.0, 1e5):
        rng = np.random.default_rng(3)
        eta = rng.standard_normal(200)
        arms = [pilots(rng, eta, n, reach=F_PILOT * scale, a=a, f_mid=F_PILOT / 4 * scale)
                for n, a in (("small", 0.5), ("large", 0.7))]
        inp = RaceInput((info("small", policy="0.5B"), info("large", 1_500_000_000, policy="1.5B")),
                        {"math": PilotData(tuple(arms))}, ("math",), 2 * F_PILOT * scale,
                        tuple(r * scale for r in RUNGS), {"small": 1, "large": 1}, int(0.4 * F_PILOT * scale), "t")
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            rec = analyze(inp, n_replicates=100).recommendations[0]
        read.append((rec.arm, rec.reward, rec.lo, rec.hi, rec.p_best))
    assert read[0][0] == read[1][0] == "large"
    assert read[1][1:] == pytest.approx(read[0][1:], abs=1e-6)


def test_a_seed_that_stopped_before_its_first_evaluation_leaves_its_arm_fitted_on_the_others(size_race):
    """A pilot seed that crashed after its step-0 evaluation refused the whole grid ("no evaluation point with FLOPs >
    0 left"); it is now left out of every target (a held-out one too), which each says."""
    inp, an = size_race
    weak = inp.targets["math"].arms[0]
    stopped = ArmPilots(weak.name, (weak.runs[0], SeedRun(weak.runs[1].seed, weak.runs[1].points[:1]), weak.runs[2]))
    data = PilotData((stopped, *inp.targets["math"].arms[1:]))
    again = analyze(replace(inp, targets={"math": data, "math-heldout": data}), n_replicates=REPS)
    left_out = f"{weak.name}: seed {weak.runs[1].seed} with no evaluation after step 0"
    for t in again.targets:
        assert t.curves[0].n_seeds == 2 and any(w.startswith(left_out) for w in t.warnings)
    assert again.target("math").curves[0].fitted and an.target("math").curves[0].n_seeds == 3
    assert again.recommendations[0].arm == an.recommendations[0].arm == "strong"


def test_a_barely_learning_arm_never_stops_the_analysis(size_race):
    """Points above R0 only at two near-identical FLOPs made the power-law check divide by zero: the arm is now
    reported (its power law not fitted, and why) and the grid is analysed."""
    inp, _ = size_race
    solved = {0.0: 40, 1e19: 41, 1e19 * (1 + 1e-12): 42, 4e19: 40, 8e19: 40}
    runs = tuple(SeedRun(s, tuple(EvalPoint(f, (np.arange(200) < n).astype(float)) for f, n in solved.items()))
                 for s in range(3))
    arms = (*inp.arms, info("flat", policy="3B", params=3_000_000_000))
    data = PilotData((*inp.targets["math"].arms, ArmPilots("flat", runs)))
    an = analyze(replace(inp, arms=arms, targets={"math": data}, reached=inp.reached | {"flat": 0}),
                 n_replicates=50)
    t = an.target("math")
    flat = t.curves[2]
    assert flat.power_law is None and "degenerate" in flat.power_law_reason
    assert an.recommendations[0].arm == "strong" and len(t.budgets[-1].predictions) == 3


def test_an_arm_whose_pilots_never_moved_is_not_bounded_by_them(size_race):
    """An arm that scored 0 on every prompt at every evaluation: every curve family reads it flat to F and the
    bootstrap has nothing to resample, so its interval at F was [0, 0] at any horizon and the other arm's P(best)
    1.000 over it (a review's LoRA race). Now its interval runs to 1, it is not comparable (left out of the P(best),
    and said so), and it is not usable; an arm whose pilots vary as little but do vary is read as before."""
    inp, before = size_race
    zeros = tuple(SeedRun(s, tuple(EvalPoint(f, np.zeros(200)) for f in (0.0, 1e19, 2e19, 4e19, 8e19)))
                  for s in range(3))
    arms = (*inp.arms, info("still", policy="3B", params=3_000_000_000))
    data = PilotData((*inp.targets["math"].arms, ArmPilots("still", zeros)))
    an = analyze(replace(inp, arms=arms, targets={"math": data}, reached=inp.reached | {"still": 0}), n_replicates=50)
    t = an.target("math")
    still = next(p for p in t.budgets[-1].predictions if p.arm == "still")
    assert (still.lo, still.hi, still.usable, still.comparable, still.p_best) == (0.0, 1.0, False, False, 0.0)
    assert still.gain_hi == pytest.approx(1.0 - (still.reward - still.gain)) and "never rose" in still.note
    assert any(w.startswith("still: its pilots never rose above their start") for w in t.warnings)
    assert an.recommendations[0].arm == before.recommendations[0].arm == "strong"
    one = tuple(SeedRun(s, tuple(EvalPoint(f, (np.arange(200) < (1 if f == 8e19 else 0)).astype(float))
                                 for f in (0.0, 1e19, 2e19, 4e19, 8e19))) for s in range(3))
    moved = analyze(replace(inp, arms=arms, targets={"math": PilotData((*inp.targets["math"].arms,
                                                                        ArmPilots("still", one)))},
                            reached=inp.reached | {"still": 0}), n_replicates=50).target("math")
    assert next(p for p in moved.budgets[-1].predictions if p.arm == "still").note == ""


def test_an_arm_whose_pilots_never_rose_above_their_start_is_not_bounded_by_them(size_race):
    """The CPU demo's tiny-l + rule arm: one prompt solved on one seed at step 0, then 0 on every prompt at every
    evaluation; it reached 0.93-1.00 at F in the exhaustive sweep, yet its curves bounded it at 0.015 and the
    halving set it aside, because its pilots were not exactly constant. Now no prompt above its step-0 score counts
    as never moved: interval to 1, not comparable. The start is pooled over the seeds (one initial policy): a seed
    that later solves a prompt another seed solved at step 0 has not risen above the start; a prompt above every
    seed's step-0 score has."""
    from flopplan.race.checks import unmoved

    inp, before = size_race
    flops = (0.0, 1e19, 2e19, 4e19, 8e19)
    first = (np.arange(200) == 7).astype(float)

    def runs(later: np.ndarray) -> tuple[SeedRun, ...]:
        return tuple(SeedRun(s, tuple(EvalPoint(f, first if (f == 0 and s == 0) else later if f > 0 else
                                                np.zeros(200)) for f in flops)) for s in range(3))

    floored, again, above = (ArmPilots("floored", runs(x)) for x in (np.zeros(200), first, np.roll(first, 1)))
    assert (unmoved(floored), unmoved(again), unmoved(above)) == (True, True, False)
    arms = (*inp.arms, info("floored", policy="3B", params=3_000_000_000))
    data = PilotData((*inp.targets["math"].arms, floored))
    an = analyze(replace(inp, arms=arms, targets={"math": data}, reached=inp.reached | {"floored": 0}),
                 n_replicates=50)
    t = an.target("math")
    p = next(p for p in t.budgets[-1].predictions if p.arm == "floored")
    assert (p.hi, p.usable, p.comparable, p.p_best) == (1.0, False, False, 0.0) and "never rose" in p.note
    assert an.recommendations[0].arm == before.recommendations[0].arm == "strong"


def test_an_arm_whose_pilots_fell_below_half_their_start_is_not_bounded_by_them(size_race):
    """Round 40's blind lenblow: answers cut at the generation limit take an arm from R0 down to a floor that
    sampling lifts now and then, and it recovers after the pilots. Its curves read the fall and bounded it low (the
    halving dropped the best arm in 70-74 % of repetitions). Now an arm every seed of which ends below half its
    step-0 reward (from at least 0.05) is not bounded by its pilots: interval to 1, not comparable, a note saying
    so. A fall to 60 % of the start, or one seed that did not fall, is read as before."""
    from flopplan.race.checks import FELL, fell, unbounded

    inp, before = size_race
    rng = np.random.default_rng(4)
    flops = (0.0, 1e19, 2e19, 4e19, 8e19)

    def runs(levels: tuple[float, ...], last: tuple[float, float, float]) -> tuple[SeedRun, ...]:
        return tuple(SeedRun(s, tuple(EvalPoint(f, (rng.uniform(size=200) < (last[s] if i == len(flops) - 1 else p))
                                               .astype(float)) for i, (f, p) in enumerate(zip(flops, levels,
                                                                                             strict=True))))
                     for s in range(3))

    down = ArmPilots("down", runs((0.25, 0.15, 0.05, 0.02, 0.01), (0.01, 0.02, 0.01)))
    assert fell(down) and unbounded(down) == FELL
    assert not fell(ArmPilots("some", runs((0.25, 0.2, 0.18, 0.16, 0.15), (0.15, 0.16, 0.15))))  # 60 % of start
    assert not fell(ArmPilots("one", runs((0.25, 0.15, 0.05, 0.02, 0.01), (0.01, 0.02, 0.3))))  # one seed did not
    assert not fell(ArmPilots("low", runs((0.03, 0.02, 0.01, 0.0, 0.0), (0.0, 0.0, 0.0))))  # from below 0.05
    arms = (*inp.arms, info("down", policy="3B", params=3_000_000_000))
    data = PilotData((*inp.targets["math"].arms, down))
    an = analyze(replace(inp, arms=arms, targets={"math": data}, reached=inp.reached | {"down": 0}), n_replicates=50)
    t = an.target("math")
    p = next(p for p in t.budgets[-1].predictions if p.arm == "down")
    assert (p.hi, p.usable, p.comparable, p.p_best, p.note) == (1.0, False, False, 0.0, FELL)
    assert any(w == f"down: {FELL}" for w in t.warnings)
    assert an.recommendations[0].arm == before.recommendations[0].arm == "strong"


def _falling_arm(seed: int = 4) -> ArmPilots:
    """Three seeds that fall from 0.25 at step 0 to 0.01 at 8e19 FLOPs (200 prompts)."""
    rng = np.random.default_rng(seed)
    flops, levels = (0.0, 1e19, 2e19, 4e19, 8e19), (0.25, 0.15, 0.05, 0.02, 0.01)
    return ArmPilots("down", tuple(SeedRun(s, tuple(EvalPoint(f, (rng.uniform(size=200) < p).astype(float))
                                                    for f, p in zip(flops, levels, strict=True))) for s in range(3)))


@pytest.fixture(scope="module")
def fall_race(size_race):
    """size_race's grid with a fourth arm whose every seed fell (:func:`_falling_arm`), analysed."""
    inp, _ = size_race
    arms = (*inp.arms, info("down", policy="3B", params=3_000_000_000))
    data = PilotData((*inp.targets["math"].arms, _falling_arm()))
    return analyze(replace(inp, arms=arms, targets={"math": data}, reached=inp.reached | {"down": 0}),
                   n_replicates=50)


def test_a_fall_in_one_arm_lowers_the_other_arms_lower_ends_beyond_their_pilots(size_race, fall_race):
    """Round 40's lenblow again: the large-group arms reach the cut after their pilots, their curves read a rise,
    and 24 of 50 usable intervals at F lay above the truth. When a seed's pilots fell, every arm's lower end beyond
    its pilots goes down to where the fallen seeds ended (the mean of an arm's fallen seeds); within the pilots,
    and the points, upper ends and P(best), stay the curves'. Without the fall the same arms' lower ends at F are
    far above it."""
    from flopplan.race.checks import SUPPORT_TOL
    from flopplan.race.grid_fall import fallen_seeds, grid_fall

    inp, before = size_race
    down = _falling_arm()
    floor = float(np.mean([r.points[-1].scores.mean() for r in down.runs]))
    fall = grid_fall((*inp.targets["math"].arms, down))
    assert fall is not None and (fall.arms, fall.seeds) == (("down",), 3) and fall.floor == pytest.approx(floor)
    assert grid_fall(inp.targets["math"].arms) is None
    one = ArmPilots("one", (*inp.targets["math"].arms[0].runs[:2], down.runs[2]))  # one seed of three fell
    assert fallen_seeds(one) == [pytest.approx(float(down.runs[2].points[-1].scores.mean()))]
    assert grid_fall((*inp.targets["math"].arms, one)).seeds == 1
    t = fall_race.target("math")
    old = {p.arm: p for p in before.target("math").budgets[-1].predictions}
    beyond = [p for p in t.budgets[-1].predictions if p.arm != "down" and p.extrapolation > SUPPORT_TOL]
    assert beyond and all(p.lo <= floor + 1e-12 and p.gain_lo <= floor - (p.reward - p.gain) + 1e-12 for p in beyond)
    assert all(p.hi > p.reward >= p.lo for p in beyond)
    assert all(old[p.arm].lo > floor + 0.05 for p in beyond)  # what the rule lowers: far above the fall's end
    within = [p for b in t.budgets for p in b.predictions if p.arm != "down" and p.extrapolation <= SUPPORT_TOL]
    assert within and any(p.lo > floor + 0.05 for p in within)
    assert any(w.startswith("down: 3 seeds fell below half their start; a fall that comes from the shared set-up")
               and f"{floor:.3f}" in w for w in t.warnings)


def test_an_arm_whose_pilots_fell_is_stated_at_what_they_showed_down_to_where_they_ended(fall_race):
    """An arm whose every seed fell is read as unbounded (its interval runs to 1), but its point and lower end were
    the curves': ScaleRL's sigmoid cannot fall, reads such pilots as flat at R0, and the arm, seen at 0.01 at its
    rung, was stated 0.237 [0.202, 1] there and 0.237 [0.162, 1] at F. It is now stated at what its pilots showed
    (its observed reward at a rung, where they ended beyond them: checks.shown_at), with a lower end no higher than
    where they ended (checks.ended: the mean of its seeds' last evaluations), at every budget."""
    from flopplan.race.checks import FELL, ended

    down = _falling_arm()
    end = ended(down)
    assert end == pytest.approx(np.mean([r.points[-1].scores.mean() for r in down.runs])) and end < 0.05
    t = fall_race.target("math")
    preds = [p for b in t.budgets for p in b.predictions if p.arm == "down"]
    assert len(preds) == len(t.budgets) and all(p.note == FELL and p.hi == 1.0 for p in preds)
    assert all(p.lo <= end + 1e-12 and p.gain_lo <= end - (p.reward - p.gain) + 1e-12 for p in preds)
    assert all(p.reward == pytest.approx(end if p.observed is None else p.observed) for p in preds)
    assert sum(p.observed is None for p in preds) == 1 and any(p.observed > end + 0.03 for p in preds if p.observed)
    assert all(p.lo <= min(p.reward, end) + 1e-12 and p.gain == pytest.approx(p.reward - t.curves[-1].fit.r0)
               for p in preds) and t.curves[-1].arm == "down"


def test_an_arm_that_fell_from_the_top_still_unsettles_the_regime_while_stated_at_what_it_showed(size_race):
    """A review of the change above: the regime reads the highest predicted arm among those in play, and an arm
    whose pilots fell from above the others (0.9 at step 0 to 0.05) had been that arm by its curves' reading (its
    start: a dip it recovers from returns there), which made every budget "unstable" and the pick's confidence
    low. Stating it at what its pilots showed must not change that: the decision keeps the curves' reading, and its
    curves, which are not read, no longer raise a "without the first evaluation points" warning against it."""
    inp, _ = size_race
    rng = np.random.default_rng(9)
    flops, levels = (0.0, 1e19, 2e19, 4e19, 8e19), (0.9, 0.6, 0.3, 0.1, 0.05)
    high = ArmPilots("high", tuple(SeedRun(s, tuple(EvalPoint(f, (rng.uniform(size=200) < p).astype(float))
                                                    for f, p in zip(flops, levels, strict=True))) for s in range(3)))
    arms = (*inp.arms, info("high", policy="3B", params=3_000_000_000))
    t = analyze(replace(inp, arms=arms, targets={"math": PilotData((*inp.targets["math"].arms, high))},
                        reached=inp.reached | {"high": 0}), n_replicates=50).target("math")
    at_f = {p.arm: p for p in t.budgets[-1].predictions}
    assert at_f["high"].reward < 0.1 and at_f["high"].hi == 1.0 and not at_f["high"].comparable
    assert all(b.decision.regime == "unstable" and b.decision.top == "high" for b in t.budgets)
    assert "the arm with the highest predicted reward by its curves, which its pilots do not bound, high (0." \
        in t.budgets[-1].decision.rule
    assert t.recommendation.confidence != "high"
    assert not [w for w in t.warnings if w.startswith("high: R at the target budget moves")]


def test_the_curves_plot_draws_the_intervals_the_decision_read_where_they_leave_the_band(fall_race, tmp_path,
                                                                                          monkeypatch):
    """The band of race_curves_<target>.png is the model average's calibrated percentiles; the decision reads
    intervals with two more adjustments (a seed's fall lowers every arm's lower end beyond its pilots; an arm whose
    pilots never rose or fell runs to 1). The plot showed only the band, narrower than what race.json and the report
    state at F: it now draws each arm's interval at every budget beyond its pilots as the decision read it."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from flopplan.race import plots

    t = fall_race.target("math")
    figures = []
    monkeypatch.setattr(plots, "_save", lambda _plt, fig, path: figures.append(fig) or path)
    plots._curves(plt, fall_race, t, tmp_path / "curves.png")
    at_f = {p.arm: p for p in t.budgets[-1].predictions}
    axes = {ax.get_title().split(" (")[0]: ax for ax in figures[0].axes if ax.get_title()}
    checked = 0
    for c in t.curves:
        if c.arm == "down" or c.band is None or at_f[c.arm].extrapolation <= 1.05:
            continue
        p = at_f[c.arm]
        band_lo = float(np.interp(np.log(p.ledger_flops), np.log(c.band.flops), c.band.lo))
        assert band_lo > p.lo + 0.05  # the band alone would show a lower end far above the stated one
        bars = [ct for ct in axes[c.arm].containers if type(ct).__name__ == "ErrorbarContainer"]
        segments = [seg for ct in bars for seg in ct.lines[2][0].get_segments()]
        assert any(abs(seg[0][0] - t.budgets[-1].flops) <= 1e-6 * t.budgets[-1].flops
                   and seg[:, 1].min() == pytest.approx(p.lo) and seg[:, 1].max() == pytest.approx(p.hi)
                   for seg in map(np.asarray, segments))
        checked += 1
    assert checked
    from matplotlib.collections import PolyCollection

    down = axes["down"]  # its pilots fell: its curves are not read, so no band; its intervals at every budget
    bands = {arm: [c for c in ax.collections if isinstance(c, PolyCollection)] for arm, ax in axes.items()}
    assert not bands["down"] and all(bands[arm] for arm in axes if arm != "down")
    assert {ln.get_label() for ln in down.get_lines()}.isdisjoint({"model average"})
    bars = [ct for ct in down.containers if type(ct).__name__ == "ErrorbarContainer"]
    assert bars and len(bars[0].lines[2][0].get_segments()) == len(t.budgets)
    assert any(c.band is not None for c in t.curves if c.arm == "down")  # race.json keeps its band
    plt.close("all")


def test_pilots_too_short_to_hold_a_point_out_say_their_interval_is_not_calibrated_on_them(size_race):
    """The model average weighs its families and calibrates its interval on held-out evaluation positions, and holds
    none out below 5 (race design --evals 2 gives the top rung 4 or 5): the analysis now says so per arm, where
    race.json's method alone described weights and a calibration it had not made (a review)."""
    inp, full = size_race
    assert not [w for w in full.target("math").warnings if "too few to hold one out" in w]  # 6 positions
    short = PilotData(tuple(ArmPilots(a.name, tuple(SeedRun(r.seed, r.points[:4]) for r in a.runs))
                            for a in inp.targets["math"].arms))
    t = analyze(replace(inp, targets={"math": short}), n_replicates=50).target("math")
    few = [w for w in t.warnings if "too few to hold one out" in w]
    assert sorted(w.split(":")[0] for w in few) == ["strong", "weak"]
    assert all("evaluated at 3 positions after step 0" in w for w in few)  # step 0 and 3 more
    assert all(c.ensemble is not None and c.ensemble.held_out == 0 for c in t.curves)


def test_an_arm_whose_reward_model_training_puts_it_beyond_the_top_rung_is_set_aside_there_not_called_short():
    """At a rung's budget an arm is read at equal FLOPs, its reward model's training included: one whose upfront
    FLOPs exceed the top rung is set aside there (no observation, not the naive pick). Its pilots ran the whole rung
    in training FLOPs, so they did not stop short: the demo's reward-model arms were said to have "stopped at -61 %"
    and were read at their last evaluation as though they had."""
    rng = np.random.default_rng(3)
    eta = rng.standard_normal(200)
    pairs = [(info("rule"), pilots(rng, eta, "rule", a=0.5)),
             (info("orm", upfront=int(1.5 * F_PILOT)), pilots(rng, eta, "orm", a=0.7))]
    t = analyze(race(pairs, budget=4 * F_PILOT), n_replicates=REPS).target("math")
    assert not [w for w in t.warnings if "stopped at" in w]
    orm = next(c for c in t.curves if c.arm == "orm")
    assert orm.observed_at_rungs[-1] is None and orm.max_flops >= 0.8 * F_PILOT
    assert t.recommendation.naive_arm == "rule"
    short = ArmPilots("rule", tuple(SeedRun(r.seed, r.points[:-2]) for r in pairs[0][1].runs))  # stopped at ~F_P/4
    t = analyze(race([(pairs[0][0], short), pairs[1]], budget=4 * F_PILOT), n_replicates=REPS).target("math")
    assert [w.split(":")[0] for w in t.warnings if "stopped at" in w] == ["rule"]


# ---------------------------------------------------------------- synthetic-truth acceptance


def end_to_end_coverage(reps: int, seed: int = 2024, n_replicates: int = 100) -> dict[str, float]:
    """Coverage of the analysis end to end on random synthetic truths (the slow test below; also a measurement:
    ``PYTHONPATH=$PWD python -c "import sys; sys.path.insert(0, 'tests'); import test_race_analysis as t;
    print(t.end_to_end_coverage(500))"``)."""
    rng = np.random.default_rng(seed)
    inside, inside_ident, a_err, bias, bias_average, ident, width = [], [], [], [], [], [], []
    for _ in range(reps):
        a, b, r0 = rng.uniform(0.5, 0.8), rng.uniform(1.0, 2.5), rng.uniform(0.1, 0.3)
        f_mid = F_PILOT * 2.0 ** rng.uniform(-4, -1)
        arm = pilots(rng, rng.standard_normal(200), "arm", a=a, b=b, f_mid=f_mid, r0=r0)
        inp = RaceInput((info("arm"),), {"math": PilotData((arm,))}, ("math",), 2 * F_PILOT, (F_PILOT,),
                        {"arm": 0}, int(F_PILOT), "test")
        t = analyze(inp, n_replicates=n_replicates, seed=int(rng.integers(2**31)), holdout=False).target("math")
        p, curve = t.budgets[-1].predictions[0], t.curves[0]
        truth = float(scalerl_curve(2 * F_PILOT, a, b, f_mid, r0))
        inside.append(p.lo <= truth <= p.hi)
        if curve.identified:
            inside_ident.append(inside[-1])
            a_err.append(curve.fit.a - a)
        ident.append(curve.identified)
        bias.append(curve.predicted_at_budget - truth)
        bias_average.append(p.reward - truth)
        width.append(p.hi - p.lo)
    return {"coverage": float(np.mean(inside)), "coverage_identified": float(np.mean(inside_ident)),
            "identified": float(np.mean(ident)), "median_abs_a_error_identified": float(np.median(np.abs(a_err))),
            "mean_bias": float(np.mean(bias)), "mean_bias_model_average": float(np.mean(bias_average)),
            "mean_width": float(np.mean(width)), "reps": reps}


@pytest.mark.slow
def test_synthetic_truth_end_to_end_coverage_at_twice_the_pilot_budget():
    """SYNTHETIC TRUTH, through analyze end to end: 200 repetitions, each a new truth drawn at random (A in
    [0.5, 0.8], B in [1, 2.5], F_mid in F_pilot x [1/16, 1/2] log-uniform, R0 in [0.1, 0.3]), realistic noise
    (3 seeds, seed sd 0.02 on A, 200 0/1 prompts with prompt difficulty), pilots to F_pilot, target budget
    2 x F_pilot. The ScaleRL fit recovers the truth (A within a few grid steps, its prediction unbiased; the model
    average over families, which decides, is not asserted unbiased here: measured +0.02), and the 90 %
    interval of R at the target budget covers the true value in 80-97 % of the repetitions (binomial sd of the
    share about 0.02), over all of them and over those flagged identified."""
    out = end_to_end_coverage(200)
    assert 0.80 <= out["coverage"] <= 0.97, out
    assert 0.80 <= out["coverage_identified"] <= 0.97, out
    assert out["identified"] > 0.8 and out["median_abs_a_error_identified"] < 0.03, out
    assert abs(out["mean_bias"]) < 0.01, out


def test_leaving_out_the_holdout_changes_no_prediction():
    """``holdout=False`` (the coverage simulation above) skips the temporal holdout's refits only: every budget's
    predictions are those of the full analysis, and no holdout is reported."""
    rng = np.random.default_rng(5)
    arm = pilots(rng, rng.standard_normal(200), "arm", a=0.7, b=1.5, f_mid=F_PILOT / 4, r0=0.2)
    inp = RaceInput((info("arm"),), {"math": PilotData((arm,))}, ("math",), 2 * F_PILOT, (F_PILOT,), {"arm": 0},
                    int(F_PILOT), "test")
    full, lean = (analyze(inp, n_replicates=50, seed=3, holdout=h).target("math") for h in (True, False))
    assert full.holdout and full.holdout_summary is not None
    assert lean.holdout == () and lean.holdout_summary is None
    assert lean.budgets == full.budgets and lean.curves == full.curves


def test_an_arm_no_replicate_puts_first_is_not_named_in_a_tie_though_it_reaches_a_lower_bound_of_0():
    """An arm at 0 everywhere beside two arms that cannot be told apart: its pilots never moved, so its interval
    runs to 1 (its curves read [0, ~1e-37]) and it is not comparable; it reaches the leader's lower bound, yet no
    replicate puts it first; the tie (and the price of one more rung for it) names the two only."""
    from flopplan.race.regime import tied_arms

    rng = np.random.default_rng(1)
    eta = rng.standard_normal(200)
    low, high = pilots(rng, eta, "g8", r0=0.0, a=0.03), pilots(rng, eta, "g16", r0=0.0, a=0.03)
    zero = ArmPilots("g4", tuple(SeedRun(r.seed, tuple(EvalPoint(p.flops, np.zeros_like(p.scores))
                                                       for p in r.points)) for r in low.runs))
    pairs = [(info("g8", group_size=8), low), (info("g16", group_size=16), high), (info("g4", group_size=4), zero)]
    at_f = analyze(race(pairs), n_replicates=REPS).target("math").budgets[-1]
    by_arm = {p.arm: p for p in at_f.predictions}
    assert by_arm["g4"].hi == 1.0 and by_arm["g4"].p_best == 0.0 and not by_arm["g4"].comparable
    lead = at_f.decision.best
    assert set(tied_arms(at_f, lead)) == {"g8", "g16"}
    wide = replace(at_f, predictions=tuple(replace(p, lo=0.0) if p.arm == lead else p for p in at_f.predictions))
    assert set(tied_arms(wide, lead)) == {"g8", "g16"}
