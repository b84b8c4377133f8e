"""Budgets: exactly one of FLOPs, GPU-hours or dollars, positive and finite."""

from __future__ import annotations

import math

import pytest

from flopplan.budget import Budget
from flopplan.errors import UserError


def test_budget_validation():
    for bad in ({}, {"flops": -1}, {"flops": 1, "gpu_hours": 2}, {"gpu_hours": math.inf}):
        with pytest.raises(UserError):
            Budget(**bad)
