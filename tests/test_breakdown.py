"""flopplan.breakdown: FLOPs by term, summed exactly, grouped by module."""

from __future__ import annotations

import sympy

from flopplan.breakdown import Breakdown, component


def test_total_is_the_exact_sum_of_every_term():
    big = 2**62  # two of these overflow int64; Python ints do not
    b = Breakdown({"forward/q_proj": big, "forward/k_proj": big, "backward/q_proj.dgrad": 3})
    assert b.total == 2**63 + 3 and isinstance(b.total, int)
    assert Breakdown().total == 0


def test_add_accumulates_a_term_and_creates_a_new_one():
    b = Breakdown({"forward/o_proj": 10})
    b.add("forward/o_proj", 5)
    b.add("forward/lm_head", 7)
    assert b == {"forward/o_proj": 15, "forward/lm_head": 7}


def test_prefixed_scaled_and_combined_keep_every_term():
    a = Breakdown({"q_proj": 2, "v_proj": 3})
    assert a.prefixed("prefill") == {"prefill/q_proj": 2, "prefill/v_proj": 3}
    assert a.scaled(4) == {"q_proj": 8, "v_proj": 12} and a == {"q_proj": 2, "v_proj": 3}
    both = Breakdown.combine([a, Breakdown({"v_proj": 10, "lm_head": 1})])
    assert both == {"q_proj": 2, "v_proj": 13, "lm_head": 1} and both.total == a.total + 11


def test_terms_group_by_the_module_they_belong_to():
    assert component("backward/q_proj.lora_a.wgrad") == "q_proj"
    assert component("prefill/forward/mlp.gate_proj") == "mlp"
    assert component("lm_head") == "lm_head"
    b = Breakdown({"forward/q_proj": 4, "backward/q_proj.dgrad": 4, "backward/q_proj.lora_b.wgrad": 1,
                   "forward/lm_head": 9})
    assert b.grouped(component) == {"q_proj": 9, "lm_head": 9}


def test_terms_may_be_symbols():
    n, d = sympy.symbols("n d", positive=True)
    b = Breakdown({"forward/q_proj": 2 * n * d * d})
    b.add("forward/q_proj", n)
    assert sympy.simplify(b.total - (2 * n * d**2 + n)) == 0
