"""The torch side of flopplan: real transformers models, FlopCounterMode counts, timings.

Needs the ``torch`` extra (torch, transformers, peft). Nothing in the core imports this package.
"""


def quiet_transformers() -> None:
    """Silence transformers' deprecation chatter (FutureWarnings, the use_cache notice) in command output."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
    try:
        from transformers.utils import logging

        logging.set_verbosity_error()
        logging.disable_progress_bar()  # weight loading and saving bars
    except ImportError:  # pragma: no cover
        pass
