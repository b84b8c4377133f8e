"""The ledger charges a round from the one description of it (torch-free): a simulated runtime asks `step_passes`
which passes to charge, fills them with the lengths it ran (`ran`) and charges each unit by `charge`; the charges
of a round equal the planner's step cost and the budget guard's worst case at the same lengths, over random
recipes (eval rounds, beta > 0, mu > 1, vllm, ORM and PRM, every log-prob head)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_passes import recipes

from flopplan.cost import step_cost, worst_case_round
from flopplan.formulas import forward_flops, generate_flops, train_flops
from flopplan.ledger import Ledger, PhaseCharge, charge, ran, unit_of
from flopplan.passes import RoundLengths, RoundShape, reward_extra_tokens, step_passes
from flopplan.recipe import Recipe


def simulated_round(r: Recipe, prompts: list[int], completions: list[int],
                    evaluation: tuple[list[int], list[int]] | None = None) -> list[PhaseCharge]:
    """The units a runtime charges in one round, batched as the engines run them: HF generate calls of the
    generation batch padded to their longest (vLLM: each sequence alone, the prefill once per prompt with prefix
    sharing); scoring and update micro-batches padded to the generation batch's longest (vLLM: the round's), or
    each sequence alone when packed; the reward model a group at a time; the evaluation's generate calls."""
    passes = {p.phase: p for p in step_passes(RoundShape.of(r), RoundLengths.of(r))}
    rows, group = r.rollouts_per_step, r.group_size
    lengths = list(zip(prompts, completions, strict=True))

    def widest(block: list[tuple[int, int]]) -> tuple[int, int]:
        return max(p for p, _ in block), max(k for _, k in block)

    def generate(prefix: str, block: list[tuple[int, int]], prefill: bool = True) -> PhaseCharge:
        phases = [f"{prefix}.prefill"] * prefill + [f"{prefix}.decode"]
        return charge(*(ran(passes[phase], block, widest(block)) for phase in phases))

    out: list[PhaseCharge] = []
    if r.engine == "hf":
        n = r.generation_batch_size
        out += [generate("rollout", lengths[s:s + n]) for s in range(0, rows, n)]
    else:
        for i, row in enumerate(lengths):
            first = i % group == 0
            out.append(generate("rollout", [row], prefill=first or not r.prefix_sharing))
    padded_rows = r.generation_batch_size if r.engine == "hf" else rows
    micro: list[tuple[list[tuple[int, int]], tuple[int, int]]] = []
    if r.update_padding == "batch":
        m = r.micro_batch_size
        padded = [widest(lengths[i - i % padded_rows:i - i % padded_rows + padded_rows]) for i in range(rows)]
        micro = [(lengths[t:t + m], widest(padded[t:t + m])) for t in range(0, rows, m)]
    else:
        micro = [([row], row) for row in lengths]
    units = [phase for phase in ("old_logprobs", "reference") if phase in passes] + ["update"] * r.iterations
    out += [charge(*(ran(passes[unit], block, width) for block, width in micro)) for unit in units]
    if "reward" in passes:
        extra = reward_extra_tokens(r.reward.kind, r.reward_overhead_tokens, r.prm_steps)
        read = [(p + k + extra, 0) for p, k in lengths]  # the tokens the reward model reads, each row
        out.append(charge(*(ran(passes["reward"], read[s:s + group], widest(read[s:s + group]))
                            for s in range(0, rows, group))))
    if evaluation is not None:
        eval_lengths = list(zip(*evaluation, strict=True))
        b = r.evaluation_batch_size if r.engine == "hf" else 1
        out += [generate("eval", eval_lengths[s:s + b]) for s in range(0, len(eval_lengths), b)]
    return out


def by_phase(charges: list[PhaseCharge], what: str = "executed") -> dict[str, int]:
    out: dict[str, int] = {}
    for c in charges:
        for phase, value in getattr(c, what).items():
            out[phase] = out.get(phase, 0) + value
    return out


@settings(max_examples=60, deadline=None)
@given(recipes())
def test_charges_of_a_fixed_length_round_are_the_step_cost_and_the_worst_case(recipe):
    r = recipe
    rows, p, k = r.rollouts_per_step, r.prompt_len.max, r.completion_len.max
    evaluation = None
    if r.eval_every is not None:
        e = r.eval_prompts
        evaluation = ([r.evaluation_prompt_len.max] * e, [r.evaluation_completion_len.max] * e)
    charges = simulated_round(r, [p] * rows, [k] * rows, evaluation)
    cost = step_cost(r)
    assert by_phase(charges) == {**cost.step_phases, **cost.eval_phases}
    assert by_phase(charges, "useful") == by_phase(charges)  # nothing is padded when every length is the same
    assert sum(c.executed_total for c in charges) == worst_case_round(r, [p] * rows, k,
                                                                      evaluation=evaluation is not None)
    ledger = Ledger()
    for c in charges:
        ledger.charge(c)
    assert ledger.totals()["flops"]["total"] == cost.step_flops + cost.eval_flops


@settings(max_examples=60, deadline=None)
@given(recipes(evaluation=False), st.data())
def test_charges_of_a_round_at_its_worst_are_the_guards_bound(recipe, data):
    """Prompts of different lengths, every completion at the maximum: what the round charges is the guard's bound
    (each generate call and micro-batch padded as it runs)."""
    r = recipe
    per_prompt = [data.draw(st.integers(1, 30)) for _ in range(r.prompts_per_step)]
    prompts = [p for p in per_prompt for _ in range(r.group_size)]
    k = r.completion_len.max
    charges = simulated_round(r, prompts, [k] * len(prompts))
    assert sum(c.executed_total for c in charges) == worst_case_round(r, prompts, k)


@settings(max_examples=40, deadline=None)
@given(recipes(evaluation=False), st.data())
def test_useful_is_the_same_pass_unpadded(recipe, data):
    """A padded call's useful FLOPs are what its rows would cost each alone at their own lengths; its executed
    FLOPs are at least that."""
    r = recipe
    rows = r.rollouts_per_step
    lengths = [(data.draw(st.integers(1, 30)), data.draw(st.integers(1, 20))) for _ in range(rows)]
    charges = simulated_round(r, [p for p, _ in lengths], [k for _, k in lengths])
    for c in charges:
        assert all(c.executed[phase] >= c.useful[phase] for phase in c.executed)
    passes = {p.phase: p for p in step_passes(RoundShape.of(r), RoundLengths.of(r))}
    update = passes["update"]
    padded = charge(ran(update, lengths, (max(p for p, _ in lengths), max(k for _, k in lengths))))
    each = [charge(ran(update, [row], row)) for row in lengths]
    assert padded.useful["update"] == sum(c.executed["update"] for c in each)


def test_expert_lora_per_call_work_is_charged_once_per_call_executed_and_useful():
    """LoRA on Qwen3-MoE's routed experts: peft forms the merged expert weights in every forward call, whatever its
    rows (a generate call: its prefill and each decode step; a micro-batch: its forward, backward and recompute).
    Executed charges that once per call, and so does useful (it is not padding): useful never exceeds executed,
    and with every length equal they are the same."""
    r = Recipe(policy="tiny-moe", prompts_per_step=2, group_size=4, lora_rank=4, generation_batch=4, micro_batch=2,
               iterations=2, beta=0.04)
    per_call = forward_flops(r.policy_spec, 0, 0, 0, r.lora).total  # a forward call on no rows: its per-call work
    assert per_call > 0
    even = simulated_round(r, [6] * 8, [3] * 8)
    assert by_phase(even, "useful") == by_phase(even)
    lengths = [(5, 1), (5, 3), (5, 2), (5, 5), (9, 2), (9, 7), (9, 1), (9, 4)]
    charges = simulated_round(r, [p for p, _ in lengths], [k for _, k in lengths])
    for c in charges:
        assert all(c.useful[phase] <= c.executed[phase] for phase in c.executed)
    # a generate call: useful is each row alone at its own lengths, less the per-call work of the calls a row alone
    # would have made (1 + its decode steps), plus that of the calls made (1 + the longest row's decode steps)
    passes = {p.phase: p for p in step_passes(RoundShape.of(r), RoundLengths.of(r))}
    generate = ("rollout.prefill", "rollout.decode")
    block = lengths[:4]
    call = charge(*(ran(passes[phase], block, (5, 5)) for phase in generate))
    alone = [charge(*(ran(passes[phase], [row], row) for phase in generate)) for row in block]
    assert sum(call.useful.values()) == sum(c.executed_total for c in alone) - per_call * (1 + 3 + 2 + 5 - 5)
    assert call.executed["rollout.decode"] == generate_flops(r.policy_spec, 4, 5, 5, r.lora).total - forward_flops(
        r.policy_spec, 4, 5, 1, r.lora).total
    # a micro-batch of the update: one training call, whatever its rows
    training = train_flops(r.policy_spec, 0, 0, 0, RoundShape.of(r).training).total
    assert training > 0
    update = charge(ran(passes["update"], block[:2], (5, 3)))
    each = [charge(ran(passes["update"], [row], row)) for row in block[:2]]
    assert update.useful["update"] == sum(c.executed["update"] for c in each) - training


def test_a_unit_charges_its_phases_and_records_what_it_ran():
    r = Recipe(policy="tiny", prompts_per_step=2, group_size=2, lora_rank=4)
    passes = {p.phase: p for p in step_passes(RoundShape.of(r), RoundLengths.of(r))}
    rollout = charge(*(ran(passes[phase], [(5, 3), (7, 2)], (7, 3)) for phase in ("rollout.prefill",
                                                                                    "rollout.decode")))
    assert rollout.unit == "rollout" and set(rollout.executed) == {"rollout.prefill", "rollout.decode"}
    assert rollout.shapes == {"batch": 2, "prompt_padded": 7, "generated": 3}
    update = charge(ran(passes["update"], [(5, 3), (7, 2)], (7, 3)))
    assert update.shapes == {"micro_batches": [[2, 7, 3, 5]], "head": r.logprob_head}
    assert [unit_of(phase) for phase in ("rollout.decode", "eval.prefill", "reference")] == [
        "rollout", "eval", "reference"]
