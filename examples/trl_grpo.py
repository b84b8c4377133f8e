"""GRPO with TRL, as TRL's documentation writes a script (a chat dataset from parquet, two reward functions, a
LoraConfig, SDPA attention), metered by flopplan: the two lines marked ``flopplan`` are all it adds.

    python examples/trl_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --budget 2e15 --out runs/grpo
    flopplan report runs/grpo

Without ``--data`` it writes a small arithmetic dataset (``prompt`` as chat messages, ``answer``) to parquet first.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import tempfile
from pathlib import Path

from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from flopplan.trl import meter  # flopplan 1/2


def accuracy_reward(completions, answer, **kwargs):
    """1 when the last number of the completion is the answer (TRL passes the dataset's columns by name)."""
    contents = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    found = [re.findall(r"-?\d+", text) for text in contents]
    return [1.0 if numbers and numbers[-1] == str(gold) else 0.0 for numbers, gold in zip(found, answer, strict=True)]


def format_reward(completions, **kwargs):
    """0.5 when the completion ends with a number and nothing else."""
    contents = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [0.5 if re.fullmatch(r"\s*-?\d+\s*", text) else 0.0 for text in contents]


def write_dataset(path: Path, rows: int, chat: bool, seed: int = 0) -> None:
    """Sums of two digits: a chat-format ``prompt`` (a list of messages) or a plain string, and the ``answer``."""
    rng = random.Random(seed)
    records = []
    for _ in range(rows):
        a, b = rng.randrange(10), rng.randrange(10)
        question = f"{a}+{b}="
        records.append({"prompt": [{"role": "user", "content": question}] if chat else question,
                        "answer": str(a + b)})
    from datasets import Dataset

    # every process of a torchrun writes it: each to its own temporary file, renamed into place, so no process
    # ever reads a half-written parquet
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".parquet")
    os.close(fd)
    Dataset.from_list(records).to_parquet(tmp)
    os.replace(tmp, path)


def main(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a model id or a local folder")
    parser.add_argument("--data", help="parquet with prompt and answer columns (default: written to --output-dir)")
    parser.add_argument("--plain", action="store_true", help="plain-text prompts instead of chat messages")
    parser.add_argument("--output-dir", default="grpo-output")
    parser.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager, flash_attention_2)")
    parser.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA")
    parser.add_argument("--reward-model", help="a sequence-classification reward model (id or folder)")
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--num-iterations", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps-per-generation", type=int, default=None)
    parser.add_argument("--eval", action="store_true", help="evaluate on a held-out split every round")
    parser.add_argument("--report-to", default="none")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--resume", action="store_true")
    # flopplan's options
    parser.add_argument("--budget", type=float, help="FLOP budget")
    parser.add_argument("--out", help="flopplan run folder")
    parser.add_argument("--measure", action="store_true", help="also count with FlopCounterMode")
    args = parser.parse_args(argv)

    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    data = args.data
    if data is None:
        data = str(output / "train.parquet")
        write_dataset(Path(data), args.rows, chat=not args.plain)
    dataset = load_dataset("parquet", data_files=data, split="train")
    split = dataset.train_test_split(test_size=8, seed=0) if args.eval else None

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation=args.attn)
    reward_funcs, reward_tokenizers = [accuracy_reward, format_reward], [None, None]
    if args.reward_model:
        reward_funcs.append(AutoModelForSequenceClassification.from_pretrained(
            args.reward_model, num_labels=1, attn_implementation=args.attn))
        reward_tokenizers.append(AutoTokenizer.from_pretrained(args.reward_model))
    config = GRPOConfig(
        output_dir=str(output), per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        steps_per_generation=args.steps_per_generation, max_completion_length=args.max_completion_length,
        beta=args.beta, num_iterations=args.num_iterations, max_steps=args.max_steps, learning_rate=1e-5,
        logging_steps=1, save_strategy="steps", save_steps=args.num_iterations, report_to=args.report_to,
        eval_strategy="steps" if args.eval else "no", eval_steps=args.num_iterations,
        per_device_eval_batch_size=args.batch_size,
        bf16=False, use_cpu=not _cuda(), disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward_funcs, args=config, processing_class=tokenizer,
        train_dataset=split["train"] if split else dataset, eval_dataset=split["test"] if split else None,
        reward_processing_classes=reward_tokenizers,
        peft_config=None if args.full else LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]),
    )
    flops = meter(trainer, budget=args.budget, out=args.out, measure=args.measure, resume=args.resume)  # flopplan 2/2
    trainer.train(resume_from_checkpoint=True if args.resume else None)
    return trainer, flops


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


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
