"""A character tokenizer the package builds itself (no downloads), for the built-in task and tiny policies.

Its 23 symbols fit the ``tiny`` registry architecture (vocab 32: like real LM heads, the head is padded past the
tokenizer). Ids the tokenizer does not know (a random-initialised large model may sample them) decode as U+FFFD.

Its chat template (:data:`CHAT_TEMPLATE`) can spell no role names (the alphabet has no letters): it writes the
messages' contents one per line, so a one-message conversation reads as its plain prompt.
"""

from __future__ import annotations

SPECIALS = ("<pad>", "<eos>", "<bos>", "<sep>")
CHARACTERS = (*"0123456789", "+", "-", "*", "=", " ", "?", ">", ",", "\n")

CHAT_TEMPLATE = ("{% for message in messages %}{{ message['content'] }}{% if not loop.last %}{{ '\\n' }}{% endif %}"
                 "{% endfor %}")
"""The character tokenizer's chat template (Jinja, as Hugging Face tokenizers hold theirs): the contents, one per
line; no generation prompt (the prompt's own last characters, e.g. the task's ``>``, ask for the answer)."""


class CharTokenizer:
    """Maps characters to ids and back; special tokens are single ids."""

    def __init__(self) -> None:
        self.vocab: tuple[str, ...] = SPECIALS + CHARACTERS
        self._ids = {token: i for i, token in enumerate(self.vocab)}
        self.pad_token_id = self._ids["<pad>"]
        self.eos_token_id = self._ids["<eos>"]
        self.bos_token_id = self._ids["<bos>"]
        self.sep_token_id = self._ids["<sep>"]

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str, bos: bool = True, strict: bool = True) -> list[int]:
        """Ids of ``text``; unknown characters are an error, or ``?`` when not ``strict`` (model output that is
        re-read, e.g. by a reward model, may hold ids this tokenizer cannot spell)."""
        unknown = sorted({ch for ch in text if ch not in self._ids})
        if unknown and strict:
            raise ValueError(f"characters outside the built-in tokenizer: {''.join(unknown)!r}")
        fallback = self._ids["?"]
        return ([self.bos_token_id] if bos else []) + [self._ids.get(ch, fallback) for ch in text]

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        out = []
        for i in ids:
            token = self.vocab[i] if 0 <= i < len(self.vocab) else "\ufffd"
            if skip_special and token in SPECIALS:
                continue
            out.append(token)
        return "".join(out)
