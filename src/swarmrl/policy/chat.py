"""A tokenizer's chat template, rendered one message at a time with exact KV reuse.

Why piece by piece: an agent's context grows by one observation and one reply per turn, and
the sampler keeps its KV cache between turns, so the tokens appended for a new observation
must be exactly the tail that re-rendering the whole conversation would add. Templates are
rendered on probe conversations whose contents are marker strings; the text between the
markers is the template's own framing (role headers, end-of-turn tokens, the generation
prompt), encoded with special tokens recognised; the contents (problem text, messages other
agents wrote) are encoded with special tokens split, so an agent that writes `<|im_end|>`
cannot end another agent's message.

What the context holds is the reply tokens as sampled, never a re-rendering of them: a
template that rewrites history (Qwen3 drops earlier turns' <think> blocks) would otherwise
invalidate the cache and change what the policy was trained on. Thinking text stays in the
context and is kept out of the action parser (`strip_thinking`).
"""

from __future__ import annotations

import json
import re

from swarmrl.config_schema import ConfigError
from swarmrl.policy.tokenizer import END, encode_text

# Probe contents: plain ASCII words that no template rewrites and no tokenizer merges with
# its neighbours across a role header.
_SYS, _USER, _REPLY, _OBS = "SWARMRLSYSTEM", "SWARMRLUSER", "SWARMRLREPLY", "SWARMRLOBSERVATION"
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)


def strip_thinking(text: str) -> str:
    """The reply without its `<think>...</think>` blocks (an unclosed one runs to the end)."""
    return _THINK.sub("", text)


def template_kwargs(raw: str) -> dict:
    """`model.chat_template_kwargs` (a JSON object, or empty) -> a dict."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"model.chat_template_kwargs must be a JSON object, e.g. "
                          f"'{{\"enable_thinking\": false}}': {e}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"model.chat_template_kwargs must be a JSON object, got {raw!r}")
    return value


def turn_end_id(tokenizer) -> int:
    """The token that ends an agent's turn: the tiny tokenizer's END, else the chat template's
    end-of-turn token (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`), else eos."""
    end = tokenizer.convert_tokens_to_ids(END)
    if end is not None and end != tokenizer.unk_token_id:
        return int(end)
    template = getattr(tokenizer, "chat_template", None)
    if template:
        # The sampler asks on every call: render the probe once per template, cached on the tokenizer.
        cached = getattr(tokenizer, "_swarmrl_turn_end", None)
        if cached is None or cached[0] != template:
            cached = (template, _template_end(tokenizer))
            tokenizer._swarmrl_turn_end = cached
        if cached[1] is not None:
            return cached[1][0]
    return int(tokenizer.eos_token_id)


def _render(tokenizer, messages: list[dict], generation: bool, kwargs: dict | None = None) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation,
                                        **(kwargs or {}))


def _template_end(tokenizer) -> tuple[int, str, str] | None:
    """(end-of-turn id, its text, the framing after it) from a rendered assistant message, or
    None when the template puts no special token right after a reply."""
    text = _render(tokenizer, [{"role": "user", "content": _USER}, {"role": "assistant", "content": _REPLY}], False)
    if _REPLY not in text:
        return None
    after = text[text.index(_REPLY) + len(_REPLY):]
    ids = tokenizer.encode(after, add_special_tokens=False)
    if not ids or ids[0] not in tokenizer.all_special_ids + list(tokenizer.added_tokens_decoder):
        return None
    eot_text = tokenizer.convert_ids_to_tokens(ids[0])
    if not after.startswith(eot_text):
        return None
    return int(ids[0]), eot_text, after[len(eot_text):]


class ChatTemplate:
    """One model's chat template (its own, or `model.chat_template`) with its options."""

    def __init__(self, tokenizer, kwargs: dict | None = None, model_name: str = ""):
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                f"model.protocol=chat: the tokenizer of {model_name or 'this model'} has no chat template; "
                "supply one with model.chat_template=path/to/template.jinja, or use model.protocol=compact")
        self.tokenizer = tokenizer
        self.kwargs = dict(kwargs or {})
        end = _template_end(tokenizer)
        if end is None:
            raise ConfigError(f"model.protocol=chat: the chat template of {model_name or 'this model'} puts no "
                              "end-of-turn token after an assistant reply; swarmrl cannot tell where a turn ends")
        self.end_id, self.end_text, _ = end
        self.system_role = self._supports_system()
        # The framing around a later observation: [end-of-turn] + close + user header | content | footer + prompt.
        probe = self._probe_messages() + [{"role": "assistant", "content": _REPLY}, {"role": "user", "content": _OBS}]
        text = _render(tokenizer, probe, True, self.kwargs)
        after = text[text.index(_REPLY) + len(_REPLY):]
        if not after.startswith(self.end_text):
            raise ConfigError("model.protocol=chat: the chat template renders an earlier reply differently "
                              "from the last one; swarmrl cannot extend such a conversation turn by turn")
        self._obs_head, self._obs_tail = after[len(self.end_text):].split(_OBS)

    def _supports_system(self) -> bool:
        """Some templates (Gemma's) refuse a system message: its text then opens the first user message."""
        try:
            return _SYS in _render(self.tokenizer, [{"role": "system", "content": _SYS},
                                                    {"role": "user", "content": _USER}], True, self.kwargs)
        except Exception:  # jinja raises the template's own `raise_exception(...)`
            return False

    def _probe_messages(self) -> list[dict]:
        if self.system_role:
            return [{"role": "system", "content": _SYS}, {"role": "user", "content": _USER}]
        return [{"role": "user", "content": _SYS + "\n\n" + _USER}]

    def _framing(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) if text else []

    def start_ids(self, system: str, user: str) -> list[int]:
        """An agent's first context: system message, first user message, generation prompt."""
        probe = self._probe_messages()
        if not self.system_role:  # one content string: tokens may merge across the joint
            probe, user = [{"role": "user", "content": _USER}], system + "\n\n" + user
        text = _render(self.tokenizer, probe, True, self.kwargs)
        ids: list[int] = []
        for piece in re.split(f"({_SYS}|{_USER})", text):
            if piece == _SYS:
                ids += encode_text(self.tokenizer, system)
            elif piece == _USER:
                ids += encode_text(self.tokenizer, user)
            else:
                ids += self._framing(piece)
        return ids

    def observation_ids(self, content: str, closed: bool) -> list[int]:
        """A user message after a reply: closes the reply (its end-of-turn token unless the reply
        already ended with it), the message, and the generation prompt."""
        head = ([] if closed else [self.end_id]) + self._framing(self._obs_head)
        return head + encode_text(self.tokenizer, content) + self._framing(self._obs_tail)

    def render_ids(self, system: str, turns: list[tuple[str, str]]) -> list[int]:
        """The whole conversation re-rendered in one call (tests compare the incremental ids
        against it): `turns` = [(user, assistant reply or "" for the open last turn)]."""
        messages = ([{"role": "system", "content": system}] if self.system_role else [])
        for i, (user, reply) in enumerate(turns):
            if i == 0 and not self.system_role:
                user = system + "\n\n" + user
            messages.append({"role": "user", "content": user})
            if reply:
                messages.append({"role": "assistant", "content": reply})
        return self.tokenizer.encode(_render(self.tokenizer, messages, True, self.kwargs), add_special_tokens=False)


def load_template_file(tokenizer, path: str) -> None:
    """Install the Jinja template in `path` as the tokenizer's chat template (saved with it)."""
    from pathlib import Path
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"model.chat_template: no such file {p}")
    tokenizer.chat_template = p.read_text(encoding="utf-8")
