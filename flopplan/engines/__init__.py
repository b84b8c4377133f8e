"""Adapters to the GRPO engines teams already run. ``trl``: TRL's GRPOConfig <-> Recipe (torch-free); ``trl_meter``
and ``trl_run``: the FLOP meter inside GRPOTrainer and ``flopplan train --engine trl`` (torch and trl). ``verl``:
export a recipe as verl 0.9.1 Hydra overrides and a launch script, read a verl config back as the recipe flopplan
prices, and set verl's own actor-FLOP estimate beside flopplan's count (torch-free: verl is never imported)."""
