"""The torch side of flopplan: real transformers models, FlopCounterMode counts, timings.

Needs the ``torch`` extra (torch, transformers, peft). Nothing in the core imports this package.
"""
