"""Reading a verl config the way verl 0.9.1 reads it (flopplan.engines.verl_read and recipe_from_verl): Hydra's key
check, the lengths verl can produce, the LoRA the FSDP actor builds, what flopplan cannot price. The Hydra behaviour
asserted here was checked with hydra-core composing verl's own ``ppo_trainer.yaml``."""

from __future__ import annotations

import pytest
from test_verl import BASE_OVERRIDES, RM, A, M, R, verl_keys, verl_wheel  # noqa: F401  (the fixtures)

from flopplan.engines.verl import recipe_from_verl
from flopplan.engines.verl_keys import verl_leaves
from flopplan.engines.verl_read import check_keys, read_overrides
from flopplan.errors import UserError
from flopplan.lengths import Length

# -- keys: Hydra's compose ----------------------------------------------------------------------------------------


def test_the_shipped_key_set_is_the_wheels(verl_keys):  # noqa: F811
    # the wheel's _generated_ppo_trainer.yaml, plus model_engine (ppo_trainer.yaml:10, model_engine/dp.yaml)
    assert verl_leaves() == set(verl_keys) | {"model_engine"}


@pytest.mark.parametrize("key", [A + "ppo_epoch", "actor_rollout_ref.rollout.nn", M + "lora_rnk",
                                 M + "override_config.attn_implementation"])  # under {}: Hydra needs + there too
def test_a_key_verl_lacks_is_refused(key, tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("\n".join(f"{k}={v}" for k, v in {**BASE_OVERRIDES, key: 4}.items()
                              if not isinstance(v, list)) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"Could not override '{key}'. To append to your config use \+{key}="):
        recipe_from_verl(path)


def test_plus_appends_only_a_new_key_and_plus_plus_forces():
    with pytest.raises(UserError, match=rf"An item is already at '{A}ppo_epochs'"):
        recipe_from_verl({**BASE_OVERRIDES, f"+{A}ppo_epochs": 3})
    with pytest.raises(UserError, match=r"An item is already at 'actor_rollout_ref.model'"):  # a node exists too
        check_keys([f"+{M[:-1]}"])
    assert recipe_from_verl({**BASE_OVERRIDES, f"++{A}ppo_epochs": 3})[0].iterations == 3
    back, _ = recipe_from_verl({**BASE_OVERRIDES, f"+{M}override_config.attn_implementation": "sdpa"})
    assert back.iterations == 1
    check_keys([f"++{A}not_in_verl", A + "optim", "model_engine"])  # a node takes a mapping: a.b={c:1}
    with pytest.raises(UserError, match="not a Hydra override key"):
        check_keys([f"+++{A}ppo_epochs"])


def test_a_yaml_config_is_checked_key_by_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("actor_rollout_ref:\n  actor: {ppo_epoch: 4}\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"actor_rollout_ref.actor.ppo_epoch is not a key of verl 0.9.1's config"):
        read_overrides(path)
    # a run's dump holds what its + overrides added under verl's open dicts and nulls
    path.write_text("actor_rollout_ref:\n  model: {override_config: {attn_implementation: sdpa}}\n  actor: "
                    "{ppo_epochs: 2, optim: {override_optimizer_config: {foreach: false}}}\n", encoding="utf-8")
    assert read_overrides(path) == {f"++{M}override_config.attn_implementation": "sdpa", A + "ppo_epochs": 2,
                                    f"++{A}optim.override_optimizer_config.foreach": False}


def test_a_yaml_syntax_error_names_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("data:\n  train_batch_size: 64\n   bad_indent: 1\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad.yaml:3:\d+: not valid YAML: mapping values are not allowed here"):
        read_overrides(path)


# -- LoRA: the FSDP actor's adapter ---------------------------------------------------------------------------------

def test_the_fsdp_actor_trains_model_lora_rank_not_megatrons_lora_rank():
    # fsdp/transformer_impl.py:359-368 builds LoraConfig(r=model_config.lora_rank); model.lora is Megatron's
    notes: list[str] = []
    both = {**BASE_OVERRIDES, M + "lora_rank": 64, M + "lora.rank": 16}
    assert recipe_from_verl(both, notes=notes)[0].lora_rank == 64
    assert any("model.lora.rank 16 is Megatron's LoRA: the FSDP actor trains a rank-64 adapter" in n for n in notes)
    notes.clear()
    only_megatron = {**BASE_OVERRIDES, M + "lora_rank": 0, M + "lora.rank": 16}
    assert recipe_from_verl(only_megatron, notes=notes)[0].lora_rank is None
    assert any("the FSDP actor trains every weight" in n for n in notes)
    assert not any("unmerged" in n for n in notes)  # no adapter to serve


# -- lengths: what verl can produce ---------------------------------------------------------------------------------

def test_lengths_are_the_rollouts_caps_and_none_above():
    # a completion is cut at rollout.response_length (single_turn_agent_loop.py:96), which only defaults to
    # data.max_response_length (gen:303); a prompt at rollout.prompt_length (agent_loop.py:437-445)
    back, _ = recipe_from_verl({**BASE_OVERRIDES, R + "response_length": 4096, R + "prompt_length": 100})
    assert (back.prompt_len.max, back.completion_len.max) == (100, 4096)
    assert BASE_OVERRIDES["data.max_response_length"] == 256  # the export's, which the rollout reads by default
    with pytest.raises(UserError, match=r"--completion-len reaches 1024 tokens, longer than verl produces with this "
                                        r"config: actor_rollout_ref.rollout.response_length 256"):
        recipe_from_verl(BASE_OVERRIDES, completion_len=Length.mean_max(300, 1024))
    with pytest.raises(UserError, match=r"--prompt-len reaches 129 tokens.*rollout.prompt_length 128"):
        recipe_from_verl(BASE_OVERRIDES, prompt_len=129)
    assert recipe_from_verl(BASE_OVERRIDES, prompt_len=64, completion_len=Length.mean_max(100, 256))[0] \
        .completion_len.max == 256
    # overlong prompts dropped by the dataset (rl_dataset.py:199-271) cap the prompts at data.max_prompt_length
    only = {**BASE_OVERRIDES, R + "prompt_length": 1024, "data.filter_overlong_prompts": True}
    assert recipe_from_verl(only)[0].prompt_len.max == 128


# -- what flopplan cannot price ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "message"), [
    ({"trainer.v1.trainer_mode": "colocate_async"}, r"trainer.v1.trainer_mode 'colocate_async': flopplan prices the "
                                                    r"sync trainer"),
    ({"trainer.v1.trainer_mode": "separate_async"}, r"trainer.v1.trainer_mode 'separate_async'"),
    # get_trainer_cls (trainer_base.py:2017-2023) over the three @register_trainer names of trainer/ppo/v1/
    ({"trainer.v1.trainer_mode": "fast"}, r"Unknown trainer 'fast'. Available trainers: colocate_async, "
                                          r"separate_async, sync."),
    # trainer_base.py:608 updates the actor only once critic_warmup <= global_steps
    ({"trainer.critic_warmup": 3}, r"trainer.critic_warmup 3: the first steps run without the actor update"),
])
def test_a_trainer_flopplan_does_not_price_is_refused(changes, message):
    with pytest.raises(UserError, match=message):
        recipe_from_verl({**BASE_OVERRIDES, **changes})


def test_a_reward_model_with_a_custom_function_is_refused():
    # reward_loop.py:145-153: a custom_reward_function.path is called instead of the discriminative forward
    orm = {**BASE_OVERRIDES, RM + "enable": True, RM + "model_path": "Qwen/Qwen2.5-0.5B", RM + "rollout.name": "vllm"}
    orm.pop("reward.custom_reward_function.path")
    orm.pop("reward.custom_reward_function.name")
    assert recipe_from_verl(orm)[0].reward.kind == "orm"
    with pytest.raises(UserError, match=r"reward.custom_reward_function.path 'genrm.py' with reward.reward_model."
                                        r"enable: verl scores with the custom function"):
        recipe_from_verl({**orm, "reward.custom_reward_function.path": "genrm.py"})


# -- export verl: the command that prices the export ----------------------------------------------------------------

def test_the_printed_round_trip_command_prices_the_plans_lengths(tmp_path):
    import json
    import shlex

    from helpers import cli

    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-0.5b", "--steps", "5", "--prompts-per-step", "16", "-G", "8", "--engine", "vllm",
        "--logprob-head", "all", "--update-padding", "none", "--prompt-len", "100:256", "--completion-len", "300:1024",
        "--out", str(plan), check=True)
    written = json.loads(cli("export", "verl", str(plan), "--gpus-per-node", "4", "--out", str(tmp_path / "v"),
                             "--json", check=True).stdout)
    command = written["price_command"]
    assert any(command in note for note in written["notes"])
    assert command in (tmp_path / "v" / "overrides.txt").read_text().splitlines()[0]
    back = json.loads(cli(*shlex.split(command)[1:], "--json", check=True).stdout)["plans"][0]
    planned = json.loads(plan.read_text())["plans"][0]
    assert (back["steps"], back["step_flops"]) == (planned["steps"], planned["step_flops"])  # nothing else changed


# -- messages name the flags and verl's keys ------------------------------------------------------------------------

def test_messages_name_the_cli_flags_and_verls_keys(tmp_path):
    from test_verl import BASE

    from flopplan.engines.verl import verl_overrides
    from flopplan.recipe import Recipe

    with pytest.raises(UserError, match=r"actor_rollout_ref.model.path .*\(pass --model, a model flopplan knows\)"):
        recipe_from_verl({**BASE_OVERRIDES, M + "path": str(tmp_path / "nowhere")})
    with pytest.raises(UserError, match=r"--model-path: .* has no Hugging Face repository: pass --model-path"):
        verl_overrides(Recipe(**{**BASE, "policy": "tiny"}), steps=1, gpus_per_node=8)  # no repository
    dynamic = {**BASE_OVERRIDES, A + "use_dynamic_bsz": True, A + "ppo_mini_batch_size": 24,
               "data.train_batch_size": 64}
    with pytest.raises(UserError, match=r"data.train_batch_size 64 is not a multiple of actor_rollout_ref.actor."
                                        r"ppo_mini_batch_size 24 \(with actor_rollout_ref.actor.use_dynamic_bsz\)"):
        recipe_from_verl(dynamic)


def test_a_config_without_total_training_steps_says_what_is_priced_instead(tmp_path):
    """verl runs ``total_epochs`` over the dataset's batches when ``trainer.total_training_steps`` is unset; the
    plan priced flopplan's default budget and did not say so (a held-out user)."""
    from helpers import cli
    from test_verl import BASE_OVERRIDES

    path = tmp_path / "run.txt"
    path.write_text("\n".join(f"{k}={v}" for k, v in BASE_OVERRIDES.items()
                              if not isinstance(v, list) and k != "trainer.total_training_steps") + "\n")
    out = " ".join(cli("plan", "--from-verl", str(path), check=True).stdout.split())
    assert "trainer.total_training_steps is not set" in out and "prices the budget instead" in out
    assert "What 10 EFLOP buys" in out
    steps = " ".join(cli("plan", "--from-verl", str(path), "--steps", "3", check=True).stdout.split())
    assert "is not set" not in steps and "What 3 steps cost" in steps


def test_the_printed_command_runs_when_the_model_path_is_a_folder_flopplan_cannot_read(tmp_path):
    import json
    import shlex

    from helpers import cli

    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-0.5b", "--steps", "3", "--prompts-per-step", "16", "-G", "8", "--engine", "vllm",
        "--logprob-head", "all", "--update-padding", "none", "--out", str(plan), check=True)
    written = json.loads(cli("export", "verl", str(plan), "--model-path", "/models/q05", "--out", str(tmp_path / "v"),
                             "--json", check=True).stdout)
    assert "--model qwen2.5-0.5b" in written["price_command"]
    back = json.loads(cli(*shlex.split(written["price_command"])[1:], "--json", check=True).stdout)["plans"][0]
    assert back["step_flops"] == json.loads(plan.read_text())["plans"][0]["step_flops"]


def test_the_prompt_cap_message_names_the_key_that_caps_and_a_registry_model_its_repository():
    from test_verl import BASE

    from flopplan.engines.verl import verl_overrides
    from flopplan.recipe import Recipe

    # data.filter_overlong_prompts drops prompts over data.max_prompt_length (rl_dataset.py:199-271), 2048 here;
    # rollout.prompt_length is 4096
    capped = {**BASE_OVERRIDES, "data.max_prompt_length": 2048, "data.filter_overlong_prompts": True,
              R + "prompt_length": 4096}
    with pytest.raises(UserError, match=r"--prompt-len reaches 3000 tokens, longer than verl produces with this "
                                        r"config: data.max_prompt_length 2048 \(data.filter_overlong_prompts\)"):
        recipe_from_verl(capped, prompt_len=3000)
    # the catalog's repositories (flopplan/catalog.py): Llama-3.2-1B, Gemma 3's -it
    for policy, repo in (("llama-3.2-1b", "meta-llama/Llama-3.2-1B"), ("gemma-3-1b", "google/gemma-3-1b-it")):
        assert verl_overrides(Recipe(**{**BASE, "policy": policy}), steps=1, gpus_per_node=8)[M + "path"] == repo
