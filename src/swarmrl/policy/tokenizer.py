"""The tiny model's tokenizer, built locally with `tokenizers` (no hub).

Byte-level BPE with no merges (every byte is a token, so any text round-trips) plus
whole-string tokens for the action tags and names. Making each decision one token keeps
the choices that matter explicit and cheap to learn: "hire one more expert" is a single
token, not six. Real models bring their own tokenizer and see the same tags as text.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD = "<|pad|>"
END = "<|end|>"  # end of an agent turn; the sampler's stop token

# Order matters for ids: append only, never reorder (saved tokenizers depend on it).
ACTION_TOKENS = [
    '<hire role="expert"/>', "<wait/>", "<done/>",
    '<msg to="', "</msg>", '<post ch="', "</post>", '<submit item="', "</submit>",
    '<read ch="', '" last="', '<fire who="', '<create ch="', '" members="', '"/>', '">',
    "expert-", "ceo", "general", ">>", '<take item="',
    '<verdict item="', "</verdict>", '<assign who="', '" item="',
    '<hire role="expert" item="next"/>',
]


def build_tokenizer() -> PreTrainedTokenizerFast:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([PAD, END])
    tok.add_tokens([AddedToken(t, normalized=False) for t in ACTION_TOKENS])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=END)


def encode_text(tokenizer, text: str) -> list[int]:
    """Ids of text that may hold agent-written characters (observations, problem text, messages).

    Special tokens are never read from text: a message that contains the characters
    `<|end|>` must reach its recipient as those characters, not as the end-of-turn id. The
    added action tokens are not special, so `<wait/>` and `>>` still map to their one id.
    """
    return tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
