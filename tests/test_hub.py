"""Hugging Face Hub ids (flopplan.hub): registry names offline, configs from the local cache, unknown ids one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT, cli, one_line_error

from flopplan.arch import REGISTRY, resolve
from flopplan.catalog import CONFIGS
from flopplan.errors import Note
from flopplan.hf_config import to_hf_config


def test_hub_names_resolve_from_the_registry_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert resolve("Qwen/Qwen3-30B-A3B") is REGISTRY["qwen3-30b-a3b"]
    assert resolve("meta-llama/Llama-3.1-8B").name == "llama-3.1-8b"
    out = cli("plan", "--model", "Qwen/Qwen3-30B-A3B", "--budget", "1e18", "--json")
    assert out.returncode == 0, out.stderr


def test_hub_id_from_the_local_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    folder = tmp_path / "models--acme--moe-small"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("abc123")
    snapshot = folder / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    cfg = dict(CONFIGS["Qwen/Qwen1.5-MoE-A2.7B"], num_hidden_layers=2)
    (snapshot / "config.json").write_text(json.dumps(cfg))
    spec = resolve("acme/moe-small")
    assert spec.num_layers == 2 and spec.moe is not None and spec.moe.shared_gate
    assert cli("plan", "--model", "acme/moe-small", "--budget", "1e18", "--json").returncode == 0


def test_another_orgs_copy_of_a_registry_model_is_its_own_config_where_the_cache_holds_it(monkeypatch, tmp_path):
    """``myorg/Qwen2.5-0.5B-Instruct`` was read as the registry's qwen2.5-0.5b whatever the cache held (a held-out
    user's pruned fine-tune, counted as the base model): another organisation's config.json in the local cache is
    the one counted, as is the publisher's own id's (transformers reads the cache's file); without it the
    registry's shapes stand in (offline)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    pruned = json.dumps(dict(to_hf_config(REGISTRY["qwen2.5-0.5b"]), num_hidden_layers=3))
    for repo in ("myorg/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"):
        snapshot = tmp_path / f"models--{repo.replace('/', '--')}" / "snapshots" / "abc123"
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text(pruned)
    spec = resolve("myorg/Qwen2.5-0.5B-Instruct")
    assert spec.num_layers == 3 and spec.name == "qwen2.5-0.5b-instruct"
    assert resolve("Qwen/Qwen2.5-0.5B-Instruct").num_layers == 3
    with pytest.warns(Note, match="otherorg/Qwen2.5-0.5B-Instruct has no config.json .* registry's qwen2.5-0.5b"):
        assert resolve("otherorg/Qwen2.5-0.5B-Instruct") is REGISTRY["qwen2.5-0.5b"]  # not cached: the registry's
    assert resolve("qwen2.5/0.5b") is REGISTRY["qwen2.5-0.5b"]  # an alias, not a Hub id


def test_another_orgs_copy_is_found_in_the_cache_whatever_its_case_and_a_fallback_is_a_note(monkeypatch, tmp_path):
    """The Hub reads ids case-insensitively but huggingface_hub names the cache folder as the id was spelt: a
    held-out user's ``myorg/qwen2.5-0.5b-instruct`` missed ``models--myorg--Qwen2.5-0.5B-Instruct`` and was counted
    as the registry's model with no word said. A local folder of that name is read first (as from_pretrained
    reads it); the registry's shapes, where taken, are one ``note:`` line on stderr."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    pruned = dict(to_hf_config(REGISTRY["qwen2.5-0.5b"]), num_hidden_layers=3)
    snapshot = tmp_path / "hub" / "models--myorg--Qwen2.5-0.5B-Instruct" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(pruned))
    assert resolve("MyOrg/qwen2.5-0.5b-instruct").num_layers == 3
    local = tmp_path / "work" / "ckpt" / "qwen2.5-0.5b"
    local.mkdir(parents=True)
    (local / "config.json").write_text(json.dumps(dict(pruned, num_hidden_layers=5)))
    monkeypatch.chdir(tmp_path / "work")
    assert resolve("ckpt/qwen2.5-0.5b").num_layers == 5
    out = cli("plan", "--model", "otherorg/Qwen2.5-0.5B-Instruct", "--budget", "1e18", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)
    notes = [line for line in out.stderr.splitlines() if line]
    assert len(notes) == 1 and notes[0].startswith("flopplan: note: otherorg/Qwen2.5-0.5B-Instruct has no config")
    assert "HF_HUB_OFFLINE is set" in notes[0]


def test_a_registry_models_own_id_reads_a_local_folder_then_the_cache_as_from_pretrained_does(monkeypatch, tmp_path):
    """``Qwen/Qwen3-30B-A3B`` was the registry's whatever a local folder of that name held, where transformers'
    from_pretrained reads the folder: a folder (or a file) of that name first, then the cache's config.json (no
    download), else the registry's, with no note (the publisher's id names the registry's model)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    small = dict(CONFIGS["Qwen/Qwen3-30B-A3B"], num_hidden_layers=2, hidden_size=64, num_experts=8)
    assert resolve("Qwen/Qwen3-30B-A3B") is REGISTRY["qwen3-30b-a3b"]
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-30B-A3B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(dict(small, num_hidden_layers=3)))
    assert resolve("Qwen/Qwen3-30B-A3B").num_layers == 3
    (tmp_path / "Qwen" / "Qwen3-30B-A3B").mkdir(parents=True)
    (tmp_path / "Qwen" / "Qwen3-30B-A3B" / "config.json").write_text(json.dumps(small))
    spec = resolve("Qwen/Qwen3-30B-A3B")
    assert (spec.num_layers, spec.hidden_size, spec.moe.experts) == (2, 64, 8)
    by_id, by_path = (cli("estimate", "--model", model, "--phase", "forward", "--seq", "7", "--json")
                      for model in ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B/config.json"))
    assert by_id.returncode == 0 and by_id.stderr == "", by_id.stderr
    assert json.loads(by_id.stdout)["flops"] == json.loads(by_path.stdout)["flops"]


def test_unknown_hub_id_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    line = one_line_error(cli("plan", "--model", "acme/nothing-here", "--budget", "1e18"), "config.json")
    assert str(tmp_path) in line


def test_an_unreachable_hub_is_one_line_without_retries(tmp_path):
    """Online mode with nothing listening at the Hub's address: the probe fails at once, huggingface_hub's retry
    loop (a printed line per retry, about 20 s) never starts, and the answer is the one line."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "flopplan", "plan", "--model", "acme/nothing-here"], env=env,
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "could not be downloaded" in out.stderr and str(tmp_path) in out.stderr
