"""A verl overrides file read as Hydra's compose reads it: values in Hydra's override grammar (hydra-core 1.3:
``hydra/grammar/OverrideLexer.g4``, ``OverrideParser.g4``, ``core/override_parser/overrides_visitor.py``), not YAML.
Every expected value here is what hydra-core's ``OverridesParser`` or ``compose`` over verl 0.9.1's
``ppo_trainer.yaml`` gave for the same text (a held-out user's reproductions)."""

from __future__ import annotations

import math

import pytest
from test_verl import BASE_OVERRIDES, RM, M

from flopplan.engines.hydra import format_override, parse_override, parse_value
from flopplan.engines.verl import recipe_from_verl
from flopplan.errors import UserError


def overrides_file(tmp_path, *lines: str, base: dict | None = None):
    path = tmp_path / "run.txt"
    path.write_text("\n".join([*(format_override(k, v) for k, v in (BASE_OVERRIDES if base is None else base)
                                 .items()), *lines]) + "\n", encoding="utf-8")
    return path


# -- values: Hydra's grammar ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("off", "off"), ("no", "no"), ("yes", "yes"), ("on", "on"),  # YAML 1.1 bools; ID to Hydra: strings
    ("010", "010"), ("0x10", "0x10"), ("1__0", "1__0"), ("1.0.0", "1.0.0"),  # INT has no leading 0: two tokens
    ("", ""),  # key= : the empty string (overrides_visitor.py:170-172)
    ("tRuE", True), ("FALSE", False), ("nUll", None),  # BOOL and NULL are case-insensitive
    ("1_000", 1000), ("+5", 5), ("-3", -3), ("1e-3", 0.001), ("1E5", 1e5), (".5", 0.5), ("5.", 5.0),
    ("1e5_0", 1e50), ("-inf", -math.inf), ("infinity", "infinity"),
    ('"a\\"b"', 'a"b'), ("'x y'", "x y"), ("'abc\\\\'", "abc\\"), ("a\\,b", "a,b"), ("a b", "a b"), (" 3 ", 3),
    ("foo:bar", "foo:bar"), ("${oc.env:X,1}", "${oc.env:X,1}"), ("path/to-x.py", "path/to-x.py"),
    ("[1,[2,3],{b:c}]", [1, [2, 3], {"b": "c"}]), ("{x: 1, y: {z: true}}", {"x": 1, "y": {"z": True}}),
    ("[ 'x' , 'y' ]", ["x", "y"]), ("{a:b:c}", {"a": "b:c"}), ("[]", []), ("{}", {}),
])
def test_values_read_as_hydras_override_grammar(text, value):
    read = parse_value(text)
    assert read == value and type(read) is type(value)


@pytest.mark.parametrize(("text", "message"), [
    ("console,wandb", "Ambiguous value"),  # a sweep: compose refuses it outside --multirun
    ("~/models/x", "token recognition error at: '~'"), ("#x", "token recognition error at: '#'"),
    ("a=b", "mismatched input '='"), ("[a,]", "mismatched input"), ("'x' ", "mismatched input"),
    ("int(3)", "the function int"),  # Hydra evaluates it; flopplan asks for the value
])
def test_what_hydras_grammar_refuses_is_refused(text, message):
    with pytest.raises(UserError, match=message):
        parse_value(text)


def test_override_prefixes_and_keys():
    assert math.isnan(parse_value("NaN"))
    assert parse_override("+a.b=3") == ("+", "a.b", 3)
    assert parse_override("++a= 3") == ("++", "a", 3)
    assert parse_override("~a") == ("~", "a", None)
    for bad in ("+++a=3", "a b=1", "=3"):
        with pytest.raises(UserError):
            parse_override(bad)


@pytest.mark.parametrize("value", ["~/models/x", "off", "010", "", "a,b", "tRuE", "é", "it's", "1e3", math.inf,
                                   -math.inf, ["off", "a b"], "a\\"])
def test_a_written_override_reads_back_as_the_value(value):
    assert parse_override(format_override("k", value)).value == value


# -- values in a file, as verl's keys receive them ---------------------------------------------------------------------

@pytest.mark.parametrize(("line", "message"), [
    ("algorithm.use_kl_in_reward=off", r"algorithm.use_kl_in_reward must be true or false, not 'off'"),
    ("actor_rollout_ref.actor.ppo_epochs=010", r"actor_rollout_ref.actor.ppo_epochs must be an integer >= 1, not "
                                               r"'010'"),
    ("trainer.logger=console,wandb", r"run.txt:\d+: Ambiguous value .* in 'trainer.logger=console,wandb'"),
])
def test_a_file_value_is_what_hydra_composes(tmp_path, line, message):
    with pytest.raises(UserError, match=message):
        recipe_from_verl(overrides_file(tmp_path, line))


def test_case_insensitive_bools_and_an_empty_path(tmp_path):
    assert recipe_from_verl(overrides_file(tmp_path, "actor_rollout_ref.actor.use_kl_loss=tRuE",
                                           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8"))[0].beta > 0
    # reward.custom_reward_function.path= is '' to Hydra, which verl treats as set (reward_loop.py:146)
    orm = {k: v for k, v in BASE_OVERRIDES.items() if not k.startswith("reward.custom_reward_function")}
    orm.update({RM + "enable": True, RM + "model_path": "Qwen/Qwen2.5-0.5B", RM + "rollout.name": "vllm"})
    assert recipe_from_verl(overrides_file(tmp_path, base=orm))[0].reward.kind == "orm"
    with pytest.raises(UserError, match=r"reward.custom_reward_function.path '' with reward.reward_model.enable"):
        recipe_from_verl(overrides_file(tmp_path, "reward.custom_reward_function.path=", base=orm))


# -- overrides applied in order, as compose applies them (hydra/_internal/config_loader_impl.py:336-390) ---------------

A = "actor_rollout_ref.actor."


@pytest.mark.parametrize(("lines", "field", "value"), [
    # a section set as a mapping is merged into it (OmegaConf.update(merge=True)): Hydra composed these values
    (["algorithm.rollout_correction={bypass_mode:true}"], "old_logprobs", "off"),  # bypass_mode = True
    ([f"{A[:-1]}={{ppo_epochs:4}}"], "iterations", 4),  # ppo_epochs = 4
    ([f"'{A[:-1]}={{ppo_epochs: 3, optim: {{lr: 2e-6}}}}'"], "iterations", 3),  # nested, shell-quoted
    ([f"{A}ppo_epochs=2", f"++{A}ppo_epochs=3", f"{A}ppo_epochs=4"], "iterations", 4),  # the last value wins
    ([f"{A}ppo_epochs=3", f"{A[:-1]}={{ppo_epochs:2}}"], "iterations", 2),
    (["+trainer.my_tag=a", "trainer.my_tag=b"], "iterations", 1),  # the key exists after the append
    (["+trainer.sec={a:1}", "+trainer.sec={b:1}"], "iterations", 1),  # + merges a mapping, even where one is
])
def test_overrides_apply_in_order_as_hydra_composes(tmp_path, lines, field, value):
    assert getattr(recipe_from_verl(overrides_file(tmp_path, *lines))[0], field) == value


def test_a_section_set_as_a_mapping_changes_the_trainer(tmp_path):
    with pytest.raises(UserError, match=r"trainer.v1.trainer_mode 'colocate_async': flopplan prices the sync"):
        recipe_from_verl(overrides_file(tmp_path, "trainer.v1={trainer_mode:colocate_async}"))


@pytest.mark.parametrize(("lines", "message"), [
    (["+trainer.my_tag=a", "+trainer.my_tag=b"], r"run.txt:\d+: .*Could not append to config. An item is already "
                                                 r"at 'trainer.my_tag'"),
    ([f"+{A}ppo_epochs=3"], rf"Could not append to config. An item is already at '{A}ppo_epochs'"),
    (["trainer.v1={trainer_mod:x}"], r"Could not override 'trainer.v1'"),  # struct: the merged key must exist
    (["+trainer.sec={a:1}", "trainer.sec={b:2}"], r"Could not override 'trainer.sec'"),
    (["trainer.v1=null"], r"trainer.v1 is a section of verl's config"),  # compose: trainer_mode None
    ([f"~{M}lora_rank"], r"flopplan does not read deletions"),
    ([f"~{A}use_kl_loss=false"], r"flopplan does not read deletions"),
])
def test_what_compose_refuses_or_flopplan_cannot_follow_is_refused(tmp_path, lines, message):
    with pytest.raises(UserError, match=message):
        recipe_from_verl(overrides_file(tmp_path, *lines))


def test_a_null_key_takes_an_append(tmp_path):
    # select() is None for a null: +trainer.total_training_steps=5 composes 5 (config_loader_impl.py:370-373)
    base = {k: v for k, v in BASE_OVERRIDES.items() if k != "trainer.total_training_steps"}
    assert recipe_from_verl(overrides_file(tmp_path, "+trainer.total_training_steps=5", base=base))[1] == 5


def test_a_mapping_of_overrides_applies_in_order_too():
    assert recipe_from_verl({**BASE_OVERRIDES, "+trainer.my_tag": "a", "trainer.my_tag": "b"})[0].iterations == 1
    assert recipe_from_verl({**BASE_OVERRIDES, A[:-1]: {"ppo_epochs": 3}})[0].iterations == 3


def test_a_yaml_config_with_a_duplicate_key_is_refused(tmp_path):
    # OmegaConf's YAML loader refuses it ("found duplicate key"); PyYAML kept the last
    path = tmp_path / "run.yaml"
    path.write_text("data: {train_batch_size: 64}\ntrainer: {total_training_steps: 10}\ntrainer: {nnodes: 2}\n",
                    encoding="utf-8")
    with pytest.raises(UserError, match=r"run.yaml:3:1: found duplicate key 'trainer'"):
        recipe_from_verl(path)
    path.write_text("data:\n  train_batch_size: 64\n  train_batch_size: 32\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"run.yaml:3:3: found duplicate key 'train_batch_size'"):
        recipe_from_verl(path)


# -- interpolations: as OmegaConf resolves them ---------------------------------------------------------------------

@pytest.mark.parametrize(("line", "message"), [
    # rollout.response_length: ${oc.select:data.max_response_length,512} (gen:303); oc.select gives the default only
    # for a missing key, so a null composes None (Hydra: response_length = None), not 512
    ("data.max_response_length=null", r"actor_rollout_ref.rollout.response_length must be an integer >= 1, not "
                                      r"None \(\$\{oc.select:data.max_response_length,512\}"),
    ("data.max_prompt_length=null", r"actor_rollout_ref.rollout.prompt_length must be an integer >= 1, not None"),
    ("actor_rollout_ref.rollout.response_length=null", r"rollout.response_length must be an integer >= 1, not None"),
    ("actor_rollout_ref.rollout.n=${oc.env:N,8}", r"rollout.n '\$\{oc.env:N,8\}': flopplan follows only"),
])
def test_a_null_length_or_an_unresolvable_interpolation_is_refused(tmp_path, line, message):
    base = {k: v for k, v in BASE_OVERRIDES.items() if not k.endswith(("_length", "response_length"))}
    with pytest.raises(UserError, match=message):
        recipe_from_verl(overrides_file(tmp_path, line, base=base))


# -- what verl runs that flopplan does not price -----------------------------------------------------------------------

@pytest.mark.parametrize(("lines", "message"), [
    # trainer/main_ppo.py:183-191: use_v1 false runs main_ppo_v0's TaskRunner, whatever v1.trainer_mode says
    (["trainer.use_v1=false"], r"trainer.use_v1 false: verl runs the legacy trainer"),
    (["trainer.use_v1=false", "trainer.v1.trainer_mode=colocate_async"], r"trainer.use_v1 false"),
    (["trainer.use_v1=false", "trainer.v1.trainer_mode=fast"], r"trainer.use_v1 false"),
    # workers/config/model.py:127 -> LoraConfig(target_parameters=...) (fsdp/transformer_impl.py:364)
    (["+actor_rollout_ref.model.target_parameters=[mlp.experts.gate_up_proj,mlp.experts.down_proj]"],
     r"actor_rollout_ref.model.target_parameters: LoRA on nn.Parameters"),
])
def test_the_legacy_trainer_and_lora_on_parameters_are_refused(tmp_path, lines, message):
    with pytest.raises(UserError, match=message):
        recipe_from_verl(overrides_file(tmp_path, *lines))


@pytest.mark.parametrize(("line", "message"), [
    # Hydra reads a target where flopplan's defaults did not carry it, and the fallback was priced unsaid (a re-check:
    # rollout.n=${oc.select:actor_rollout_ref.rollout.val_kwargs.n,4} composes 1 in Hydra, was priced G=4)
    ("actor_rollout_ref.rollout.n=${oc.select:actor_rollout_ref.rollout.val_kwargs.n,4}",
     r"val_kwargs.n is at verl's default, which flopplan does not carry"),
    ("actor_rollout_ref.actor.ppo_epochs=${oc.select:.ppo_mini_batch_size,2}", r"does not follow relative"),
    ("actor_rollout_ref.actor.ppo_epochs=${actor_rollout_ref.rollout.agent.num_workers}",
     r"agent.num_workers is at verl's default"),  # (was "must be an integer >= 1, not None")
    ("actor_rollout_ref.actor.ppo_epochs=${trainer.no_such_key}", r"trainer.no_such_key is not a key of verl's"),
    ("actor_rollout_ref.rollout.n=8#4", r"n=8#4"),  # one word to bash and Hydra (refused there); was cut at the #
])
def test_an_interpolation_flopplan_cannot_resolve_or_a_hash_inside_a_word_is_refused(tmp_path, line, message):
    with pytest.raises(UserError, match=message):
        recipe_from_verl(overrides_file(tmp_path, line))


def test_a_comment_starts_at_a_word_and_a_missing_key_takes_oc_selects_default(tmp_path):
    recipe, _ = recipe_from_verl(overrides_file(tmp_path, f"{A}ppo_epochs=3 # three passes",
                                                f"{A}ppo_mini_batch_size=${{oc.select:trainer.nowhere,16}}"))
    assert recipe.iterations == 3 and recipe.optimizer_batch_size == 16 * recipe.group_size


def test_a_dotted_yaml_key_is_refused_not_merged_into_the_tree(tmp_path):
    # OmegaConf keeps "actor_rollout_ref.actor.ppo_epochs: 4" as one literal top-level key: verl reads the nested one
    path = tmp_path / "run.yaml"
    path.write_text("actor_rollout_ref:\n  actor:\n    ppo_epochs: 1\nactor_rollout_ref.actor.ppo_epochs: 4\n",
                    encoding="utf-8")
    with pytest.raises(UserError, match=r"actor_rollout_ref.actor.ppo_epochs holds a dot"):
        recipe_from_verl(path)
