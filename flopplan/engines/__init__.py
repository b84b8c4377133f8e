"""Adapters to the GRPO engines teams already run: TRL's GRPOTrainer (config mapping torch-free; the FLOP meter,
torch and trl) and verl (export and pricing, torch-free: verl is never imported)."""
