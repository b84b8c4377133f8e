"""A user's dataset for ``flopplan train`` (torch-free): JSONL, parquet, or a folder saved by ``datasets``'
``save_to_disk``; one row per problem.

A row holds ``prompt``, plain text or chat messages (a list of ``{"role", "content"}`` objects, as TRL takes them),
and a reference answer in ``answer`` (else ``solution``), text or a number; every other column is handed to the
reward functions under its own name, as TRL does. Rows are checked one by one: a missing field, a null or a wrong
type is refused with its line (JSONL, counted from 1) or row (parquet and saved datasets, counted from 1), never
turned into text.

The reference answer is reduced to what flopplan's rule rewards compare: after ``####`` (GSM8K), else the last
``\\boxed{...}`` (MATH solutions), else as written. A system prompt makes every prompt a conversation (a plain
prompt becomes its user message) that starts with it, unless the row has its own system message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flopplan.errors import UserError, first_line
from flopplan.fileio import read_text
from flopplan.grpo.tasks import Problem, reference_answer

ANSWER_COLUMNS = ("answer", "solution")
"""Where a row's reference answer is read, in this order."""
PARQUET_SUFFIXES = (".parquet", ".pq")
Messages = list[dict[str, str]]
Render = Callable[[Messages], str]
"""Chat messages -> the prompt text the policy reads (a chat template, with the generation prompt)."""


def read_records(path: str | Path) -> tuple[list[tuple[str, Any]], str]:
    """Every record of the file with where it is (``line N`` / ``row N``), and the file's kind."""
    path = Path(path)
    if path.is_dir():
        return _numbered(_saved_dataset(path), "row"), "saved dataset"
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return _numbered(_parquet(path), "row"), "parquet"
    records = []
    for number, line in enumerate(read_text(path, "dataset").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise UserError(f"dataset {str(path)!r} line {number}: not JSON ({exc.msg})") from None
    return records, "JSONL"


def _numbered(records: list[Any], unit: str) -> list[tuple[str, Any]]:
    return [(f"{unit} {number}", record) for number, record in enumerate(records, 1)]


def _parquet(path: Path) -> list[Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("reading parquet needs pyarrow: pip install 'flopplan[data]'") \
            from None
    try:
        return list(pq.read_table(path).to_pylist())
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise UserError(f"cannot read the parquet dataset {str(path)!r}: {first_line(exc)}") from None


def _saved_dataset(path: Path) -> list[Any]:
    try:
        from datasets import Dataset, DatasetDict, load_from_disk
    except ImportError:
        raise UserError("reading a saved dataset folder needs datasets: pip install 'flopplan[data]'") from None
    try:
        data = load_from_disk(str(path))
    except (OSError, ValueError, FileNotFoundError) as exc:
        raise UserError(f"cannot read the dataset folder {str(path)!r}: {first_line(exc)}") from None
    if isinstance(data, DatasetDict):
        if "train" not in data:
            raise UserError(f"the dataset folder {str(path)!r} has splits {', '.join(data)}, no train split")
        data = data["train"]
    assert isinstance(data, Dataset)
    return list(data.to_list())


def check_prompt(prompt: Any, where: str) -> str | Messages:
    """A row's prompt: non-empty text, or chat messages (role and content both text)."""
    if prompt is None:
        raise UserError(f"{where}: prompt is null")
    if isinstance(prompt, str):
        if not prompt.strip():
            raise UserError(f"{where}: prompt is empty")
        return prompt
    if not isinstance(prompt, list) or not prompt:
        raise UserError(f"{where}: prompt must be text or a non-empty list of chat messages, not "
                        f"{type(prompt).__name__}")
    messages = []
    for i, message in enumerate(prompt, 1):
        if not isinstance(message, dict):
            raise UserError(f"{where}: prompt message {i} must be an object with role and content, not "
                            f"{type(message).__name__}")
        for key in ("role", "content"):
            value = message.get(key)
            if not isinstance(value, str):
                what = "missing" if key not in message else "null" if value is None else type(value).__name__
                raise UserError(f"{where}: prompt message {i} {key} must be text, not {what}")
        messages.append({"role": message["role"], "content": message["content"]})
    if not messages[-1]["content"].strip():  # (what the policy answers; a system prompt alone asks nothing)
        raise UserError(f"{where}: prompt message {len(messages)}, the last, is empty")
    return messages


def check_row(record: Any, where: str) -> dict[str, Any]:
    """A row as the loaders keep it: ``prompt`` (text or messages), ``answer`` (the reduced reference answer as
    text) and the other columns as they were."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected an object with prompt and answer, not {type(record).__name__}")
    if "prompt" not in record:
        raise UserError(f"{where}: no prompt")
    column = next((c for c in ANSWER_COLUMNS if c in record), None)
    if column is None:
        raise UserError(f"{where}: no answer (an answer or solution field)")
    answer = record[column]
    if answer is None:
        raise UserError(f"{where}: {column} is null")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise UserError(f"{where}: {column} must be text or a number, not {type(answer).__name__}")
    if isinstance(answer, float) and not math.isfinite(answer):  # a missing value, as pandas and json write it
        raise UserError(f"{where}: {column} is {answer}, not a number to compare against")
    reduced = reference_answer(str(answer))
    if not reduced:
        raise UserError(f"{where}: {column} is empty" + (f" after reduction ({str(answer)!r})" if answer else ""))
    return {**record, "prompt": check_prompt(record["prompt"], where), "answer": reduced}


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The checked rows of a dataset file or folder (at least one)."""
    records, kind = read_records(path)
    rows = [check_row(record, f"dataset {str(path)!r} {where}") for where, record in records]
    for (where, _), row in zip(records, rows, strict=True):  # TRL tells a conversation by the first prompt
        if isinstance(row["prompt"], str) != isinstance(rows[0]["prompt"], str):
            raise UserError(f"dataset {str(path)!r} {where}: prompt is {_kind(row)} but {records[0][0]}'s is "
                            f"{_kind(rows[0])}: a dataset's prompts are all text or all chat messages")
    if not rows:
        raise UserError(f"dataset {str(path)!r} ({kind}) has no problems")
    return rows


def _kind(row: dict[str, Any]) -> str:
    return "text" if isinstance(row["prompt"], str) else "chat messages"


def with_system(prompt: str | Messages, system: str | None) -> str | Messages:
    """The prompt as a conversation opening with ``system`` (a row's own system message is kept)."""
    if system is None:
        return prompt
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if messages[0]["role"] == "system":
        return messages
    return [{"role": "system", "content": system}, *messages]


def columns_of(row: dict[str, Any]) -> dict[str, Any]:
    """What a reward function receives of a row besides prompts and completions: every column but the prompt."""
    return {k: v for k, v in row.items() if k != "prompt"}


def problems_of(rows: list[dict[str, Any]], render: Render | None, system: str | None = None) -> list[Problem]:
    """The built-in trainer's problems: a conversation is rendered by ``render`` (the chat template)."""
    out = []
    for row in rows:
        prompt = with_system(row["prompt"], system)
        if isinstance(prompt, str):
            out.append(Problem(prompt, row["answer"], columns=columns_of(row)))
            continue
        if render is None:
            raise UserError("the prompts are chat messages but the tokenizer has no chat template: give "
                            "--chat-template FILE (a Jinja template)")
        out.append(Problem(render(prompt), row["answer"], messages=tuple(prompt), columns=columns_of(row)))
    return out


def load_problems(path: str | Path, render: Render | None = None, system: str | None = None) -> list[Problem]:
    """A dataset's problems for the built-in trainer."""
    return problems_of(read_rows(path), render, system)


def trl_rows(path: str | Path, system: str | None = None) -> list[dict[str, Any]]:
    """A dataset's rows for TRL's GRPOTrainer (``datasets.Dataset.from_list``): the prompt as text or messages
    (TRL applies the chat template itself), the reduced answer, the other columns as they were."""
    return [{**row, "prompt": with_system(row["prompt"], system)} for row in read_rows(path)]


def check_datasets(paths: list[str | None], reward_funcs: Any) -> None:
    """Read every row of the run's datasets and check the reward functions take their columns (before torch is
    imported and before the run folder is made; the trainers read them again)."""
    for path in paths:
        if path is not None:
            rows = read_rows(path)
            reward_funcs.check_columns(tuple(columns_of(rows[0])), f"dataset {str(path)!r}")


def read_template(path: str | None) -> str | None:
    """A ``--chat-template`` file's Jinja text (None: the tokenizer's own template)."""
    if path is None:
        return None
    text = read_text(path, "chat template")
    if not text.strip():
        raise UserError(f"chat template {path!r} is empty")
    return text
