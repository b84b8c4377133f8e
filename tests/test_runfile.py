"""Run files read without torch: the reward model card's reader (the card's round trip and corruptions are tested
in test_reward_model.py, on a trained model)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT

from flopplan.errors import UserError
from flopplan.runfile import load_reward_model_card


def test_a_missing_card_is_one_user_error(tmp_path):
    with pytest.raises(UserError, match="is not a flopplan reward model"):
        load_reward_model_card(tmp_path)
    with pytest.raises(UserError, match="no such file or folder"):
        load_reward_model_card(tmp_path / "absent")


def test_the_card_reader_is_torch_free():
    code = ("import sys, flopplan.runfile; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('torch', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         check=True)
    assert out.stdout.strip() == "[]"
