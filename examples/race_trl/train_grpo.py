"""GRPO with TRL on a chat-format arithmetic task, as a TRL user writes it; the three lines marked ``flopplan``
make it a RACE pilot and change nothing when it runs on its own:

    python examples/race_trl/train_grpo.py --model tiny --max-steps 4          # standalone
    flopplan race run race --pilot 'python examples/race_trl/train_grpo.py'    # each pilot of a race

A pilot gets its arm's settings, FLOP budget, run folder, seed and evaluation points from ``flopplan.race.pilot()``.
The policies are tiny random-initialised Qwen2-architecture models built from flopplan's registry names (``tiny-s``,
``tiny``, ``tiny-l``) with its character tokenizer, saved once to ``--models-dir``; a model id or a local folder is
loaded as it is. The task (the first digit of a string of digits, chat messages) is written once to
``--data-dir`` as parquet. ``--reward-model NAME`` scores completions with a reward model too (a sequence classifier
with one label, built the same way from a registry name): flopplan meters its forwards as feedback, and RACE's report
warns that a policy can over-optimise it, whatever reward the design names.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
from pathlib import Path

from datasets import Dataset, load_dataset
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

import flopplan.race  # flopplan 1/3


def accuracy_reward(completions, answer, **kwargs):
    """1 when the completion starts with the answer (TRL passes the dataset's columns by name)."""
    contents = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if text.strip().startswith(gold) else 0.0 for text, gold in zip(contents, answer, strict=True)]


def format_reward(completions, **kwargs):
    """0.5 when the completion starts with a digit."""
    contents = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [0.5 if text.strip()[:1].isdigit() else 0.0 for text in contents]


def write_task(folder: Path, train_rows: int, test_rows: int, digits: int = 8) -> None:
    """``train.parquet`` and ``test.parquet``: a string of digits as a chat message, and its first digit as the
    ``answer`` (flopplan's built-in task, chat-format); no test string occurs in training. Written aside and renamed,
    so pilots starting together read whole files."""
    if (folder / "test.parquet").is_file():
        return
    rng = random.Random(0)
    strings: dict[str, None] = {}
    while len(strings) < train_rows + test_rows:
        strings["".join(rng.choice("0123456789") for _ in range(digits))] = None
    rows = [{"prompt": [{"role": "user", "content": f"{s}>"}], "answer": s[0]} for s in strings]
    folder.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", rows[:train_rows]), ("test", rows[train_rows:])):
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".parquet")
        os.close(fd)
        Dataset.from_list(part).to_parquet(tmp)
        os.replace(tmp, folder / f"{name}.parquet")


def local_model(name: str, models: Path) -> str:
    """A folder holding the model ``name``: a flopplan registry name is built random-initialised once (with the
    character tokenizer); anything else (a model id, a folder) is returned as it is."""
    from flopplan.errors import UserError
    from flopplan.recipe import Recipe

    if Path(name).exists():
        return name
    try:
        spec = Recipe(policy=name).policy_spec
    except UserError:
        return name  # a model id: from_pretrained downloads it
    folder = models / name
    if not (folder / "config.json").is_file():
        import torch

        from flopplan.grpo.codecs import hf_char_tokenizer
        from flopplan.measure.models import build_model

        tokenizer = hf_char_tokenizer()
        model = build_model(spec, device="cpu", dtype=torch.float32, seed=0)
        for config in (model.config, model.generation_config):
            config.pad_token_id, config.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
            config.bos_token_id = tokenizer.bos_token_id
        aside = Path(tempfile.mkdtemp(dir=models.mkdir(parents=True, exist_ok=True) or models))
        model.save_pretrained(aside)
        tokenizer.save_pretrained(aside)
        try:
            os.replace(aside, folder)
        except OSError:  # another pilot saved it first
            shutil.rmtree(aside, ignore_errors=True)
    return str(folder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a registry name, a model id or a folder")
    parser.add_argument("--output-dir", default="grpo-output")
    parser.add_argument("--data-dir", default="race_trl_data")
    parser.add_argument("--models-dir", default="race_trl_models")
    parser.add_argument("--eval-rows", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--reward-model", default=None, help="also score with this reward model (a registry name, "
                        "a model id or a folder)")
    args = parser.parse_args(argv)

    spec = flopplan.race.pilot()  # flopplan 2/3: the pilot's spec, None when run on its own
    data = Path(args.data_dir)
    eval_rows = spec.eval_prompts if spec and spec.eval_prompts else args.eval_rows  # as the race designed them
    write_task(data, 256, eval_rows)
    train = load_dataset("parquet", data_files=str(data / "train.parquet"), split="train")
    test = load_dataset("parquet", data_files=str(data / "test.parquet"), split="train")
    model = local_model(spec.model if spec else args.model, Path(args.models_dir))
    config = GRPOConfig(
        output_dir=args.output_dir, per_device_train_batch_size=16, num_generations=4, max_completion_length=2,
        learning_rate=3e-3, lr_scheduler_type="constant", logging_steps=1, max_steps=args.max_steps,
        num_generations_eval=1, per_device_eval_batch_size=eval_rows, report_to="none", use_cpu=True,
        bf16=False, disable_tqdm=True,
    )
    if spec:
        config = spec.apply(config)  # the arm's GRPOConfig fields, its seed, checkpoints and evaluations
    rewards = [accuracy_reward, format_reward]
    reward_model = args.reward_model
    if spec and spec.reward.startswith("orm:"):  # the arm scores with a reward model (race design --rewards)
        reward_model = spec.reward_model or spec.reward.removeprefix("orm:")  # its trained folder, or the registry
    if reward_model:
        rewards.append(AutoModelForSequenceClassification.from_pretrained(
            local_model(reward_model, Path(args.models_dir)), num_labels=1))
    peft = None
    if spec and spec.peft:  # the arm trains LoRA adapters (race design --axis lora_rank=...)
        from peft import LoraConfig

        peft = LoraConfig(**spec.peft)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model), reward_funcs=rewards, peft_config=peft,
        args=config, train_dataset=train, eval_dataset=test, processing_class=AutoTokenizer.from_pretrained(model),
    )
    if spec:
        spec.meter(trainer)  # flopplan 3/3: the rung's budget, the run folder, evaluation at the FLOP points
    trainer.train(resume_from_checkpoint=spec.resume_from_checkpoint if spec else None)


def end_process_group() -> None:
    """Under torchrun or accelerate, close the process group once training ended well, as PyTorch asks: a gloo
    group left to the interpreter's exit can abort a rank ("terminate called without an active exception",
    pytorch/pytorch#190489), and the launcher then fails the whole run."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    end_process_group()
