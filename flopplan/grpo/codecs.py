"""Text <-> ids for the built-in character tokenizer and for Hugging Face tokenizers (torch-free)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan.grpo.tokenizer import CHAT_TEMPLATE, SPECIALS, CharTokenizer

Messages = list[dict[str, str]]


@dataclass
class Codec:
    """Text <-> ids for prompts and completions, whatever the tokenizer (built-in or Hugging Face)."""

    encode: Callable[[str], list[int]]  # a prompt (with BOS when the tokenizer uses one)
    encode_piece: Callable[[str], list[int]]  # text that continues a sequence (no BOS)
    decode: Callable[[list[int]], str]
    pad_id: int
    eos_id: int
    sep_id: int
    # a conversation -> its prompt text, by the chat template given (None: the tokenizer's own), with the generation
    # prompt; None: the tokenizer cannot render one
    chat: Callable[[Messages, str | None], str] | None = None
    # text a chat template rendered (it wrote its own special tokens): none added, as TRL tokenizes it
    encode_rendered: Callable[[str], list[int]] | None = None

    def renderer(self, template: str | None = None) -> Callable[[Messages], str] | None:
        """Conversations -> prompt text with ``template`` (None: the tokenizer's own)."""
        chat = self.chat
        if chat is None:
            return None
        return lambda messages: chat(messages, template)

    def prompt_ids(self, problem: Any) -> list[int]:
        """The ids of a :class:`~flopplan.grpo.tasks.Problem`'s prompt: a rendered conversation without added
        special tokens, a plain prompt as :attr:`encode` reads it."""
        if problem.messages is not None:
            return (self.encode_rendered or self.encode_piece)(problem.prompt)
        return self.encode(problem.prompt)


def char_codec(tokenizer: CharTokenizer) -> Codec:
    return Codec(encode=lambda text: tokenizer.encode(text, bos=True),
                 encode_piece=lambda text: tokenizer.encode(text, bos=False, strict=False),
                 decode=tokenizer.decode, pad_id=tokenizer.pad_token_id, eos_id=tokenizer.eos_token_id,
                 sep_id=tokenizer.sep_token_id, chat=lambda messages, template: render_chat(
                     hf_char_tokenizer(), messages, template),
                 encode_rendered=lambda text: tokenizer.encode(text, bos=False))


def render_chat(tokenizer: Any, messages: Messages, template: str | None = None) -> str:
    """The prompt text of a conversation: the tokenizer's chat template (or ``template``) with the generation
    prompt, as TRL renders it (offline: Jinja only)."""
    from flopplan.errors import UserError, first_line

    if template is None and not getattr(tokenizer, "chat_template", None):
        raise UserError("the prompts are chat messages but the tokenizer has no chat template: give "
                        "--chat-template FILE (a Jinja template)")
    try:
        text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                             add_generation_prompt=True)
    except Exception as exc:  # Jinja's TemplateError and what a template raises
        raise UserError(f"the chat template cannot render a prompt: {first_line(exc)}") from None
    return str(text)


PROBE = "The quick brown fox, 12 + 3 = 15?\n\n  Ünïcödé 数学 x_1^2\t<think>!</think> 'tis e.g. \u00a0ok"
"""Text that tells tokenizers' reading apart: letters, digits, runs of spaces and newlines, accents, CJK, markup."""


def reads_as_saved(tokenizer: Any, folder: str | Path) -> bool | None:
    """Whether ``tokenizer`` reads :data:`PROBE` in the ids the ``tokenizer.json`` saved in ``folder`` gives it (None:
    no readable file)."""
    from tokenizers import Tokenizer

    saved = Path(folder) / "tokenizer.json"
    if getattr(tokenizer, "backend_tokenizer", None) is None:  # (a slow tokenizer, a multimodal processor)
        return None
    try:
        raw = Tokenizer.from_file(str(saved)) if saved.is_file() else None
    except Exception:  # what the tokenizers library raises for a file it cannot read
        return None
    if raw is None:
        return None
    return bool(tokenizer(PROBE, add_special_tokens=False)["input_ids"] == raw.encode(PROBE,
                                                                                      add_special_tokens=False).ids)


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer saved in a local model folder (no download), as it was saved.

    transformers 5 loads a folder's tokenizer with the class its model type registers for several types (Qwen2
    among them), whatever ``tokenizer_config.json`` names, and that class rebuilds the backend from the saved
    vocabulary with its own pipeline: a WordLevel tokenizer saved beside a Qwen2 config (flopplan's character
    tokenizer until December 2026) came back as a byte-level BPE that drops spaces and newlines, and a BPE with
    another pre-tokenizer is split by Qwen2's rules. Where the class reads :data:`PROBE` in other ids than the
    folder's ``tokenizer.json`` does (:func:`reads_as_saved`), the file is loaded as it is."""
    from transformers import AutoTokenizer
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if reads_as_saved(tokenizer, path) is not False:
        return tokenizer
    return TokenizersBackend.from_pretrained(path, local_files_only=True)


def local_tokenizer(path: str | Path, where: str, embeddings: int | None = None) -> Any:
    """The tokenizer saved in a local model folder (:func:`load_tokenizer`), refused in one line where it cannot be
    loaded, has no vocabulary or end-of-sequence token (a folder without tokenizer files loads as an empty one), or
    holds more tokens than the model's ``embeddings`` rows (an id past them stops a run mid-round)."""
    from flopplan.errors import UserError, first_line

    try:
        tokenizer = load_tokenizer(path)
    except Exception as exc:  # OSError, ValueError, and what the tokenizers library raises for a file it cannot read
        raise UserError(f"cannot load the tokenizer of {where}: {first_line(exc)}") from None
    check_feeds(tokenizer, where, embeddings)
    return tokenizer


def check_feeds(tokenizer: Any, where: str, embeddings: int | None = None, *, eos: bool = True) -> None:
    """Refuse, in one line, a tokenizer that cannot feed its model: one without a vocabulary (a folder without
    tokenizer files loads as an empty one), without an end-of-sequence token (``eos``; else without it and a padding
    token, all TRL's reward call needs), or holding more tokens than the model's ``embeddings`` rows (another
    model's tokenizer: an id past them stops a run mid-round)."""
    from flopplan.errors import UserError

    size, pad = len(tokenizer), None if eos else tokenizer.pad_token_id
    if size <= 1 or (tokenizer.eos_token_id is None and pad is None):
        raise UserError(f"cannot load a usable tokenizer from {where}: the tokenizer holds {size} token(s), eos token "
                        f"{tokenizer.eos_token_id}; the folder needs the tokenizer files of its model")
    if embeddings is not None and size > embeddings:
        raise UserError(f"the tokenizer of {where} holds {size:,} tokens but its model has {embeddings:,} embeddings: "
                        "give it its own model's tokenizer")


def local_codec(path: str | Path, where: str, embeddings: int | None = None) -> tuple[Codec, int]:
    """The codec and vocabulary size of the tokenizer saved in a local model folder (:func:`local_tokenizer`)."""
    tokenizer = local_tokenizer(path, where, embeddings)
    return hf_codec(tokenizer, where), len(tokenizer)


def hf_codec(tokenizer: Any, where: str = "the tokenizer") -> Codec:
    """A codec of a Hugging Face tokenizer; one without a vocabulary or an end-of-sequence token is refused
    (a folder without tokenizer files loads as an empty tokenizer)."""
    check_feeds(tokenizer, where)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    sep = tokenizer.convert_tokens_to_ids("<extra_0>")
    if not isinstance(sep, int) or sep == tokenizer.unk_token_id:
        sep = tokenizer.eos_token_id
    return Codec(encode=lambda text: tokenizer(text, add_special_tokens=True).input_ids,
                 encode_piece=lambda text: tokenizer(text, add_special_tokens=False).input_ids,
                 decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=True), pad_id=pad,
                 eos_id=tokenizer.eos_token_id, sep_id=sep,
                 chat=lambda messages, template: render_chat(tokenizer, messages, template))


def hf_char_tokenizer() -> Any:
    """The built-in character tokenizer as a Hugging Face tokenizer (for engines that take one, e.g. TRL).

    It is a Qwen2 tokenizer: a byte-level BPE with no merges over the 23 symbols, so each character is one token
    with the built-in's id (a space is the byte-level ``Ġ``, a newline ``Ċ``), the special tokens decode as nothing,
    padding is on the left and no BOS is added (as Qwen's own tokenizers; so a reward model re-reading prompt +
    completion as text reads exactly their tokens). Being the class transformers 5 forces on a Qwen2 folder, it
    loads back from a saved folder unchanged, by ``AutoTokenizer`` as TRL and users' scripts load it. Where the
    built-in's non-strict encode reads a character outside the alphabet as ``?``, this one, with no unknown
    token, drops it (as it drops ids past its vocabulary when decoding); its chat template is
    :data:`~flopplan.grpo.tokenizer.CHAT_TEMPLATE`."""
    from tokenizers import pre_tokenizers
    from transformers import Qwen2Tokenizer

    as_bytes = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    chars = CharTokenizer()
    vocab = {(token if token in SPECIALS else as_bytes.pre_tokenize_str(token)[0][0]): i
             for i, token in enumerate(chars.vocab)}
    return Qwen2Tokenizer(vocab=vocab, merges=[], unk_token=None, bos_token="<bos>", eos_token="<eos>",
                          pad_token="<pad>", sep_token="<sep>", padding_side="left", chat_template=CHAT_TEMPLATE)
