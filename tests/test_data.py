"""A user's data and rewards in ``flopplan train``: JSONL, parquet and saved ``datasets`` rows (plain or chat
prompts), rows refused by line, chat templates applied offline, and reward functions with TRL's signature (sync,
async, weighted, math-verify)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, cli, one_line_error

from flopplan.errors import UserError
from flopplan.grpo.data import check_datasets, load_problems, read_rows, trl_rows
from flopplan.grpo.reward_funcs import RewardFuncs, load_reward_func

CHAT = [{"prompt": [{"role": "user", "content": f"{i} 2 3 4 >"}], "answer": str(i), "level": i % 3}
        for i in range(8)]
REWARDS = '''
def length_penalty(prompts, completions, completion_ids, level, **kwargs):
    return [-0.01 * len(ids) for ids in completion_ids]

async def constant(completions, **kwargs):
    return [1.0 for _ in completions]

def skip_all(completions, **kwargs):
    return [None for _ in completions]

def no_kwargs(completions, answer):
    return [0.0 for _ in completions]

def columns_only(prompts, completions, completion_ids, trainer_state, log_extra, log_metric, answer):
    return [0.0 for _ in completions]

def posonly(prompts, completions, /, **kwargs):
    return [0.0 for _ in completions]
'''


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The chat rows as JSONL, parquet and a saved datasets folder, and a module of reward functions."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Dataset

    folder = tmp_path_factory.mktemp("data")
    pq.write_table(pa.Table.from_pylist(CHAT), folder / "chat.parquet")
    Dataset.from_list(CHAT).save_to_disk(str(folder / "saved"))
    (folder / "user_rewards.py").write_text(REWARDS)
    return {"jsonl": _jsonl(folder / "chat.jsonl", CHAT), "parquet": folder / "chat.parquet",
            "saved": folder / "saved", "rewards": folder / "user_rewards.py"}


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "saved"])
def test_every_format_reads_the_same_rows(data, kind):
    rows = read_rows(data[kind])
    assert rows == [{**r, "answer": r["answer"]} for r in CHAT]


def test_answers_are_reduced_and_other_columns_kept(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [{"prompt": "1 >", "answer": "so 6 #### 42", "id": 7},
                                         {"prompt": "2 >", "solution": "x is \\boxed{\\frac{1}{2}}"},
                                         {"prompt": "3 >", "answer": 5}])
    rows = read_rows(path)
    assert [r["answer"] for r in rows] == ["42", "\\frac{1}{2}", "5"] and rows[0]["id"] == 7
    assert load_problems(path)[0].columns == {"answer": "42", "id": 7}


@pytest.mark.parametrize(("row", "fragment"), [
    ({"prompt": None, "answer": "1"}, "line 2: prompt is null"),
    ({"prompt": [{"role": "user", "content": None}], "answer": "1"}, "line 2: prompt message 1 content"),
    ({"prompt": [{"content": "1"}], "answer": "1"}, "line 2: prompt message 1 role"),
    ({"prompt": 12, "answer": "1"}, "line 2: prompt must be text"),
    ({"prompt": "1 >", "answer": None}, "line 2: answer is null"),
    ({"prompt": "1 >", "answer": ["1"]}, "line 2: answer must be text or a number"),
    ({"prompt": "1 >"}, "line 2: no answer"),
    ({"prompt": "1 >", "answer": float("nan")}, "line 2: answer is nan"),
    ({"prompt": "1 >", "solution": float("inf")}, "line 2: solution is inf"),
    ({"prompt": "1 >", "answer": ""}, "line 2: answer is empty$"),
    ({"prompt": "1 >", "answer": "the sum is #### "}, "line 2: answer is empty after reduction"),
    ({"prompt": "  ", "answer": "1"}, "line 2: prompt is empty"),
    ({"prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": ""}], "answer": "1"},
     "line 2: prompt message 2, the last, is empty"),
    ([1, 2], "line 2: expected an object"),
    ({"prompt": [{"role": "user", "content": "1"}], "answer": "1"}, "line 2: prompt is chat messages"),
])
def test_a_malformed_row_is_refused_by_its_line(tmp_path, row, fragment):
    path = _jsonl(tmp_path / "d.jsonl", [{"prompt": "1 >", "answer": "1"}, row])
    with pytest.raises(UserError, match=fragment):
        read_rows(path)


def test_a_parquet_row_with_a_null_is_refused_by_its_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"prompt": "1 >", "answer": "1"}, {"prompt": None, "answer": "2"}]),
                   tmp_path / "d.parquet")
    with pytest.raises(UserError, match="row 2: prompt is null"):
        read_rows(tmp_path / "d.parquet")


def test_chat_prompts_render_with_the_tokenizers_template_or_the_file_given(tmp_path):
    from flopplan.grpo.codecs import char_codec, hf_char_tokenizer
    from flopplan.grpo.tokenizer import CharTokenizer

    path = _jsonl(tmp_path / "d.jsonl", CHAT[:2])
    codec = char_codec(CharTokenizer())
    problems = load_problems(path, codec.renderer(), system="0")
    assert problems[1].prompt == "0\n1 2 3 4 >" and problems[1].messages[0] == {"role": "system", "content": "0"}
    assert codec.prompt_ids(problems[1]) == CharTokenizer().encode("0\n1 2 3 4 >", bos=False)  # no BOS added
    templated = load_problems(path, codec.renderer("{{ messages[-1]['content'] }}="))
    assert templated[0].prompt == "0 2 3 4 >="
    # TRL renders the same text with the same tokenizer (the character tokenizer carries the template)
    tokenizer = hf_char_tokenizer()
    assert tokenizer.apply_chat_template(list(problems[1].messages), tokenize=False, add_generation_prompt=True) == \
        problems[1].prompt
    assert trl_rows(path, "0")[1]["prompt"] == list(problems[1].messages)
    with pytest.raises(UserError, match="no chat template"):
        load_problems(path, None)


def test_the_hf_character_tokenizer_decodes_as_the_built_in_one_and_reads_its_text_back_in_no_more_tokens():
    """A reward model re-reads a completion's decoded text: the HF character tokenizer must decode any ids as the
    built-in one does (specials skipped: ``<sep>`` read back as text was 5 tokens where 1 was generated; ``?``, a
    character declared the unknown token, was dropped), and read that text back in no more tokens than were
    generated."""
    import numpy as np

    from flopplan.grpo.codecs import hf_char_tokenizer
    from flopplan.grpo.tokenizer import CharTokenizer

    hf, built_in = hf_char_tokenizer(), CharTokenizer()
    rng = np.random.default_rng(0)
    for ids in [list(range(len(built_in.vocab))), *rng.integers(0, len(built_in.vocab), (50, 12)).tolist()]:
        text = hf.decode(ids, skip_special_tokens=True)
        assert text == built_in.decode(ids)
        assert len(hf(text=text, add_special_tokens=False)["input_ids"]) <= len(ids)


def test_the_hf_character_tokenizer_saved_beside_a_model_loads_back_as_it_reads(tmp_path):
    """TRL and users' scripts load a folder's tokenizer with ``AutoTokenizer``, and transformers 5 gives a Qwen2
    folder its model type's class whatever the folder's tokenizer is: the character tokenizer (a WordLevel) came back
    as a byte-level BPE that drops spaces and newlines ("4 1 8 5 >" read as 5 tokens, not 9), so a reward model
    trained with it read other text in GRPO, and pilots ran more steps than planned. It is now the class that
    loads back, with the same ids, specials, padding side and chat template; and a folder an older flopplan wrote
    (its WordLevel tokenizer), or one whose BPE splits text by other rules than its model type's class, is loaded
    as it was saved."""
    pytest.importorskip("torch")
    from flopplan.grpo.codecs import hf_char_tokenizer
    from flopplan.grpo.tokenizer import CharTokenizer

    built_in, own = CharTokenizer(), hf_char_tokenizer()
    for family in ("qwen2", "llama"):  # a model type transformers gives its own class, and one it does not
        _loads_back(tmp_path / family, family, built_in, own)


def _loads_back(root, family, built_in, own):
    from helpers import old_char_tokenizer
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerFast

    from flopplan.grpo.codecs import load_tokenizer
    from flopplan.grpo.tokenizer import CHAT_TEMPLATE

    config = AutoConfig.for_model(family, vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=1, intermediate_size=32)
    texts = ["4 1 8 5 >", "0\n1 2 3 4 >\n", " 12 + 3 = 15, 7 * 8 - 9 ?", "1<sep>2<eos>"]
    for folder in (root / "new", root / "old"):
        config.save_pretrained(folder)
    own.save_pretrained(root / "new")
    loaded = AutoTokenizer.from_pretrained(root / "new", local_files_only=True)
    for tokenizer in (own, loaded, load_tokenizer(root / "new")):
        for text in texts[:3]:
            assert tokenizer(text, add_special_tokens=False).input_ids == built_in.encode(text, bos=False)
        assert tokenizer(texts[3]).input_ids == [5, 3, 6, 1]  # specials whole, no BOS added
        assert tokenizer.decode([5, 3, 18, 22, 6, 1], skip_special_tokens=True) == "1 \n2"
        assert (len(tokenizer), tokenizer.padding_side, tokenizer.chat_template) == (23, "left", CHAT_TEMPLATE)
        assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id) == (0, 1, 2)
    assert own("1a2").input_ids == [5, 6]  # outside the alphabet: dropped (the built-in's non-strict reads "?")

    old_char_tokenizer().save_pretrained(root / "old")
    old = load_tokenizer(root / "old")
    assert old(texts[0], add_special_tokens=False).input_ids == built_in.encode(texts[0], bos=False)
    if family == "qwen2":  # (what transformers itself gives)
        rebuilt = AutoTokenizer.from_pretrained(root / "old", local_files_only=True)
        assert rebuilt(texts[0], add_special_tokens=False).input_ids == [8, 5, 12, 9, 20]
    # a BPE, as Qwen2's, but split by another pre-tokenizer: its merge of " 1" (Qwen2's rules split the space off)
    bpe = Tokenizer(BPE({**own.get_vocab(), "\u01201": 23}, [("\u0120", "1")]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    config.save_pretrained(root / "bpe")
    PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>", pad_token="<pad>").save_pretrained(root / "bpe")
    assert load_tokenizer(root / "bpe")("2 1", add_special_tokens=False).input_ids == [6, 23]


# -- reward functions ----------------------------------------------------------------------------------------

def test_reward_functions_are_called_as_trl_calls_them(data):
    from flopplan.grpo.tasks import Problem

    spec = f"{data['rewards']}:"
    funcs = RewardFuncs.load(("exact", spec + "length_penalty", spec + "constant", spec + "skip_all"),
                             (1.0, 0.5, 0.25, 3.0))
    funcs.check_columns(("answer", "level"))
    problems = [Problem("1 >", "1", columns={"answer": "1", "level": 0}, messages=({"role": "user",
                                                                                   "content": "1 >"},))] * 2
    total, correct = funcs.score_problems(problems, ["1", "2"], [[5, 1], [6, 1]])
    assert correct == [True, False]
    assert total == [1.0 - 0.5 * 0.02 + 0.25, 0.0 - 0.5 * 0.02 + 0.25]  # a None counts 0, as TRL's nansum


def test_a_function_that_cannot_take_trls_call_is_refused(data, tmp_path):
    spec = f"{data['rewards']}:"
    with pytest.raises(UserError, match="add \\*\\*kwargs"):
        load_reward_func(spec + "no_kwargs")
    funcs = RewardFuncs.load((spec + "columns_only",))
    funcs.check_columns(("answer",))
    with pytest.raises(UserError, match="level"):
        funcs.check_columns(("answer", "level"))
    # a function with **kwargs that reads a column the data lacks was told to add **kwargs (a held-out team's)
    with pytest.raises(UserError, match=r"needs 'level', which is neither a keyword TRL passes nor a column of the "
                                        r"dataset \(its columns: answer\): add the column") as refused:
        RewardFuncs.load((spec + "length_penalty",)).check_columns(("answer",))
    assert "**kwargs" not in str(refused.value)
    with pytest.raises(UserError, match="takes 'prompts', 'completions' by position only, and TRL passes every "
                                        "argument by keyword"):
        load_reward_func(spec + "posonly")
    # a column the evaluation set lacks (the training set has it): the refusal names the set
    train, held = (_jsonl(tmp_path / f"{name}.jsonl", rows) for name, rows in (
        ("train", CHAT[:2]), ("held", [{k: v for k, v in r.items() if k != "level"} for r in CHAT[:2]])))
    funcs = RewardFuncs.load((spec + "length_penalty",))
    check_datasets([str(train), None], funcs)
    with pytest.raises(UserError, match=f"nor a column of dataset '{held}'"):
        check_datasets([str(train), str(held)], funcs)
    for bad, fragment in ((spec + "missing", "has no missing"), ("nosuch_module_x:f", "cannot import"),
                          ("exactly", "MODULE:FUNCTION")):
        with pytest.raises(UserError, match=fragment):
            load_reward_func(bad)


def test_what_a_reward_function_returns_is_read_as_trl_reads_it_and_the_rest_refused_in_one_line():
    """A held-out researcher's functions: a dict's keys were read as its rewards, a scalar or None crashed with a
    traceback, infinity made the loss NaN and the next step crash; NumPy numbers, 0-d tensors and booleans (which
    TRL's float32 tensor takes) were refused. A column named as a TRL keyword replaced the completions."""
    import numpy as np

    from flopplan.grpo.reward_funcs import _rewards

    assert _rewards("f", [np.float32(0.5), True, None, float("nan")], 4)[:3] == [0.5, 1.0, None]
    assert _rewards("f", np.array([1, 2]), 2) == [1.0, 2.0] and _rewards("f", (0, 1), 2) == [0.0, 1.0]
    torch = pytest.importorskip("torch")
    assert _rewards("f", torch.tensor([0.25, 1.0]), 2) == [0.25, 1.0]
    for out, fragment in (({0: 0.0, 1: 0.0}, "a list of 2 rewards"), (0.5, "a list of 2 rewards"),
                          (None, "a list of 2 rewards"), ((x for x in (1, 2)), "a list of 2 rewards"),
                          ([1.0, float("inf")], "rewards must be finite"), ([1e300, 0], "must be finite in float32"),
                          (["1", 0], "rewards are numbers or None"), ([1.0], "returned 1 rewards for 2")):
        with pytest.raises(UserError, match=fragment) as caught:
            _rewards("f", out, 2)
        assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match="the dataset's column 'completions' is one of the keywords"):
        RewardFuncs.load(("exact",)).check_columns(("answer", "completions"))


def test_the_math_reward_verifies_with_math_verify():
    pytest.importorskip("math_verify")
    from flopplan.grpo.reward_funcs import math_reward

    completions = ["so \\boxed{0.5}", [{"role": "assistant", "content": "it is $\\frac{1}{2}$"}], "\\boxed{3}"]
    assert math_reward(completions, ["\\frac{1}{2}", "0.5", "4"]) == [1.0, 1.0, 0.0]
    assert math_reward(["1"], ["no answer here"]) == [None]


def test_bad_rows_and_rewards_fail_before_torch_and_before_the_run_folder(tmp_path, data):
    """A chat row with a null (either engine), a bad reward function or a shape TRL cannot run: one line, exit 2,
    torch never imported, nothing written."""
    bad = _jsonl(tmp_path / "bad.jsonl", [CHAT[0], {"prompt": [{"role": "user", "content": None}], "answer": "1"}])
    for engine in ("builtin", "trl"):
        one_line_error(cli("train", "--engine", engine, "--out", str(tmp_path / engine), "--steps", "1",
                           "--dataset", str(bad), "--no-eval"), "line 2: prompt message 1 content")
        assert not (tmp_path / engine).exists()
    script = f"""
import sys
from click.testing import CliRunner
from flopplan.cli import main
out = [CliRunner().invoke(main, args) for args in (
    ["train", "--out", {str(tmp_path / "a")!r}, "--steps", "1", "--reward-func", "{data['rewards']}:no_kwargs"],
    ["train", "--out", {str(tmp_path / "a")!r}, "--steps", "1", "--reward-func", "exact", "--reward-weights", "1,2"],
    ["train", "--engine", "trl", "--out", {str(tmp_path / "b")!r}, "--steps", "1", "--generation-batch", "8"],
    ["train", "--engine", "trl", "--out", {str(tmp_path / "b")!r}, "--steps", "1", "--dataset", {str(bad)!r}],
)]
print([o.exit_code for o in out], "torch" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.split() == ["[2,", "2,", "2,", "2]", "False"], done.stderr[-2000:]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["builtin", "trl"])
def test_a_chat_parquet_trains_with_a_system_prompt_and_weighted_user_rewards(tmp_path, data, engine):
    """One short real run per engine: the conversations rendered by the character tokenizer's template, the
    user's functions beside exact match, and the ledger equal to what executed."""
    if engine == "trl":
        pytest.importorskip("trl")
    spec = f"{data['rewards']}:"
    out = cli("train", "--engine", engine, "--out", str(tmp_path / "run"), "--steps", "1", "--dataset",
              str(data["parquet"]), "--system-prompt", "0", "--reward-func", "exact", "--reward-func",
              spec + "length_penalty", "--reward-func", spec + "constant", "--reward-weights", "1,0.5,0.25",
              "--prompts-per-step", "4", "-G", "4", "--micro-batch", "8", "--no-eval", "--no-progress",
              "--measure-flops", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["steps"] == 1 and summary["measured_equals_closed_form"] is True
    line = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert line["reward"] > 0  # the constant 0.25 is in every reward: a combined score was used
