"""How an agent's context is written: the compact protocol or the model's chat template.

The runtime asks its protocol for three things: the tokens an agent's context starts with
(`header_ids`), the tokens of an observation (`observation`), and the text of a reply that
the action parser reads (`reply_text`). Everything else (the clock charging new prompt tokens,
KV reuse, the learner's masks) works on the token ids whichever protocol wrote them.

- `compact`: the tiny model's terse protocol (`ceo`, the problem, `max=8`, observations ending
  with the cue `>>`); it knows nothing else, so it needs the warm start.
- `chat`: an instruction-tuned model's own chat template (policy/chat.py): a system message
  with the agent's role, team, tools and the task's instructions; the problem (and the first
  observation) as the first user message; later observations as user messages; replies as
  assistant messages ending with the template's end-of-turn token.
"""

from __future__ import annotations

from swarmrl.collective.tools import tool_list
from swarmrl.config_schema import ConfigError
from swarmrl.policy.chat import ChatTemplate, load_template_file, strip_thinking, template_kwargs
from swarmrl.policy.tokenizer import encode_text

PROMPT_CUE = ">>"  # compact: ends every observation ("your turn")
NO_NEWS = "(continue)"  # chat: the user message of a turn that follows the agent's own without news

HOW_TO_ACT = (
    "How you act: write action tags in your reply; text outside the tags is your own scratch work and no "
    "one else sees it. Time is simulated: every token you read or write takes time, your teammates work in "
    "parallel with you, and only answers submitted before the deadline count. After each reply you get a "
    "message with what happened since: messages to you, results, and errors in your actions.")


class CompactProtocol:
    name = "compact"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def header_ids(self, runtime, r, name: str, role: str) -> list[int]:
        return encode_text(self.tokenizer, r.scenario.header(r, name, role))

    def observation(self, runtime, r, agent, lines: list[str]) -> tuple[str, list[int]]:
        text = "".join(line + "\n" for line in lines) + PROMPT_CUE
        return text, encode_text(self.tokenizer, text)

    def reply_text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(_without_special(self.tokenizer, ids), skip_special_tokens=True)


class ChatProtocol:
    name = "chat"

    def __init__(self, tokenizer, kwargs: dict | None = None, model_name: str = ""):
        self.tokenizer = tokenizer
        self.template = ChatTemplate(tokenizer, kwargs, model_name)

    def header_ids(self, runtime, r, name: str, role: str) -> list[int]:
        """Nothing yet: the first user message holds the problem and the agent's first news, so
        that an agent hired now and woken by its brief later sees one coherent message."""
        return []

    def system_message(self, runtime, r, name: str, role: str) -> str:
        scenario, task = r.scenario, runtime.task
        tools = tool_list(scenario.actions(role), scenario.tool_docs())
        instructions = task.instructions() if hasattr(task, "instructions") else ""
        parts = [scenario.describe(r, name, role), HOW_TO_ACT, "Your actions:\n" + tools]
        if instructions:
            parts.append("The task: " + instructions)
        return "\n\n".join(parts)

    def observation(self, runtime, r, agent, lines: list[str]) -> tuple[str, list[int]]:
        if not agent.ids:  # the agent's first turn
            text = r.problem_text(agent.name) + ("\n\n" + "\n".join(lines) if lines else "")
            system = self.system_message(runtime, r, agent.name, agent.role)
            return text, self.template.start_ids(system, text)
        text = "\n".join(lines) if lines else NO_NEWS
        closed = agent.ids[-1] == self.template.end_id
        return text, self.template.observation_ids(text, closed)

    def reply_text(self, ids: list[int]) -> str:
        return strip_thinking(self.tokenizer.decode(_without_special(self.tokenizer, ids), skip_special_tokens=True))


def _without_special(tokenizer, ids: list[int]) -> list[int]:
    """`ids` without the tokenizer's special tokens. The tokenizer's `all_special_ids` builds a
    new list on every read: read once per reply, not once per token."""
    special = frozenset(tokenizer.all_special_ids)
    return [t for t in ids if t not in special]


def resolve_protocol(model_cfg, tokenizer) -> str:
    """`model.protocol` with `auto` resolved: chat when the tokenizer has a chat template (or
    `model.chat_template` supplies one), else compact."""
    if model_cfg.protocol != "auto":
        return model_cfg.protocol
    return "chat" if (model_cfg.chat_template or getattr(tokenizer, "chat_template", None)) else "compact"


def make_protocol(model_cfg, tokenizer):
    """The run's protocol (`model.protocol`, `model.chat_template`, `model.chat_template_kwargs`).
    A template file is installed on the tokenizer, so checkpoints save it with the model."""
    if model_cfg.chat_template:
        load_template_file(tokenizer, model_cfg.chat_template)
    kind = resolve_protocol(model_cfg, tokenizer)
    if kind == "compact":
        return CompactProtocol(tokenizer)
    if kind != "chat":
        raise ConfigError(f"model.protocol: unknown protocol {kind!r} (compact, chat, auto)")
    return ChatProtocol(tokenizer, template_kwargs(model_cfg.chat_template_kwargs),
                        model_cfg.name_or_path or "the tiny model")
