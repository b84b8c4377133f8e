"""The validating GRPO run (``flopplan train``): phases, ledger, rewards, tasks, checkpoints.

The ledger, tasks and tokenizer are torch-free; the phases and the trainer need the ``torch`` extra.
"""
