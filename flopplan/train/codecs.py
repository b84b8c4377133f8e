"""Text <-> ids for the built-in character tokenizer and for Hugging Face tokenizers."""

from __future__ import annotations

from typing import Any

from flopplan.train.phases import Codec
from flopplan.train.tokenizer import CharTokenizer


def char_codec(tokenizer: CharTokenizer) -> Codec:
    return Codec(encode=lambda text: tokenizer.encode(text, bos=True),
                   encode_piece=lambda text: tokenizer.encode(text, bos=False, strict=False),
                   decode=tokenizer.decode, pad_id=tokenizer.pad_token_id, eos_id=tokenizer.eos_token_id,
                   sep_id=tokenizer.sep_token_id)


def hf_codec(tokenizer: Any) -> Codec:
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    sep = tokenizer.convert_tokens_to_ids("<extra_0>")
    if not isinstance(sep, int) or sep == tokenizer.unk_token_id:
        sep = tokenizer.eos_token_id
    return Codec(encode=lambda text: tokenizer(text, add_special_tokens=True).input_ids,
                   encode_piece=lambda text: tokenizer(text, add_special_tokens=False).input_ids,
                   decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=True), pad_id=pad,
                   eos_id=tokenizer.eos_token_id, sep_id=sep)
