"""Rollout and agent state: plain data the runtime mutates and everyone else reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swarmrl.collective.bus import MessageBus
from swarmrl.collective.grading import outcome_audit
from swarmrl.collective.org import Org


@dataclass
class Agent:
    name: str
    role: str  # role type ("ceo", "expert", "generator", ...): its scenario's
    ids: list[int]  # the agent's whole context: header, observations and its own turns
    gen_mask: list[int]  # 1 where the policy generated the token (the only tokens with gradient)
    logprobs: list[float]  # behaviour log-prob per token (0.0 where gen_mask is 0)
    created_at: float
    ready_at: float | None  # when the next turn may start; None = waiting for a message
    seen_upto: float  # messages delivered at or before this time have been shown
    free_at: float = 0.0  # end of the agent's last turn: a waiting agent cannot start before it
    fired_at: float | None = None  # effects of turns ending after this are dropped
    pending: list[str] = field(default_factory=list)  # error / notice lines for the next observation
    pending_reads: list[tuple[str, int, float]] = field(default_factory=list)  # (channel, last, as of time)
    queue: list[int] = field(default_factory=list)  # items taken and not yet submitted, in order
    took: bool = False  # has taken work at least once (then an empty queue is reported)
    board: bool = False  # took `next`: dealt the board's next free item whenever the desk empties
    known: dict[int, str] = field(default_factory=dict)  # item results this agent has seen
    candidates: dict[int, list[str]] = field(default_factory=dict)  # fixed workflows: upstream outputs per item
    outcomes: list[dict] = field(default_factory=list)  # own graded submissions whose outcome is not shown yet
    status: str = "active"  # active | done | fired | cut
    turns: int = 0
    tokens_prefilled: int = 0  # context tokens already charged to the clock

    def append(self, ids: list[int], generated: bool, logprobs: list[float] | None = None) -> None:
        self.ids += ids
        self.gen_mask += [1 if generated else 0] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)


@dataclass
class TurnRequest:
    """One agent turn the runtime asks the actor for."""

    rollout: "Rollout"
    agent: Agent
    start: float
    observation: str  # the text appended to the agent's context for this turn
    prompt: list[int]  # the whole context the model conditions on


@dataclass
class Turn:
    """One LLM call, as written to samples/ and used by the metrics."""

    agent: str
    role: str
    start: float
    end: float
    observation: str
    reply: str
    context_tokens: int  # prompt length the model conditioned on
    new_prompt_tokens: int  # of which new since the agent's last turn (what the clock charges)
    generated_tokens: int
    actions: list[str]
    errors: list[str]
    after_deadline: bool


@dataclass
class Rollout:
    index: int  # position in the step's batch
    group: int  # problems share a group; the advantage baseline is computed within it
    problem: Any
    time_limit: float
    agents: dict[str, Agent]
    org: Org
    bus: MessageBus
    turns: list[Turn] = field(default_factory=list)
    solved: dict[int, float] = field(default_factory=dict)  # item -> time its correct submission landed
    solved_by: dict[int, str] = field(default_factory=dict)
    claimed: set[int] = field(default_factory=set)  # items any agent has taken or submitted (the board skips them)
    item_scores: dict[int, float] = field(default_factory=dict)  # item -> credit of its kept submission, in [0, 1]
    submissions: list[dict] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=lambda: {
        "invalid_actions": 0, "hit_token_cap": 0, "wrong_submits": 0, "duplicate_submits": 0,
        "context_overflow": 0, "hires": 0, "fires": 0, "direct_messages": 0, "channel_posts": 0,
        "archive_reads": 0, "message_tokens": 0, "infra_errors": 0, "rejected_hires": 0, "board_takes": 0})
    finished_at: float | None = None
    end_reason: str = ""
    scenario: Any = None  # who takes part and what each role may do (scenarios/base.py)
    outputs: dict[str, dict[int, str]] = field(default_factory=dict)  # agent -> item -> proposal / verdict / assignee
    proposals: list[dict] = field(default_factory=list)  # non-submitting roles' answers, graded for diagnostics
    assignments: dict[str, list[int]] = field(default_factory=dict)  # worker -> items the plan gave it
    routed: set[str] = field(default_factory=set)  # downstream roles whose inputs were delivered
    policy_version: int = -1  # weights version (learner updates applied) that sampled it (distributed/)
    rejections: list[dict] = field(default_factory=list)  # every error line the runtime gave an agent
    variants: dict[str, str] = field(default_factory=dict)  # agent -> the problem text it sees, where not the original

    def reject(self, time: float, agent: str, turn: int, action: str, reason: str) -> None:
        self.rejections.append({"time": time, "actor": agent, "turn": turn, "action": action,
                                "target": None, "outcome": reason})

    def problem_text(self, agent: str) -> str:
        """The problem as `agent` sees it: its group's variant (workflow.groups), else as written."""
        return self.variants.get(agent) or self.problem.text()

    @property
    def score(self) -> float:
        """Invariant 2: reward earned at or before the deadline, and nothing after it."""
        earned = sum(self.item_scores.get(i, 1.0) for i, t in self.solved.items() if t <= self.time_limit)
        return earned / self.problem.num_items

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    def to_json(self) -> dict:
        return {
            "index": self.index, "group": self.group, "problem_id": self.problem.id,
            "problem": self.problem.text(), "time_limit": self.time_limit, "score": self.score,
            "finished_at": self.finished_at, "end_reason": self.end_reason,
            "workflow": self.scenario.name,
            "outputs": {n: {str(k): v for k, v in o.items()} for n, o in self.outputs.items()},
            "team": [{"name": a.name, "role": a.role, "created_at": a.created_at, "status": a.status}
                     for a in self.agents.values()],
            "solved": {str(k): v for k, v in self.solved.items()},
            "item_scores": {str(k): v for k, v in self.item_scores.items()},
            "counters": dict(self.counters),
            "turns": [t.__dict__ for t in self.turns],
            "messages": [m.__dict__ for m in self.bus.messages],
            "submissions": list(self.submissions),
            "variants": dict(self.variants),
            "audit": audit_log(self),
        }


def audit_log(r: Rollout) -> list[dict]:
    """The rollout's record of who did what: the bus's log of accepted actions (creates,
    joins, leaves, reads, and every delivered message with its send and delivery times),
    every rejected action with the agent's turn number (parse errors, the org's and the
    runtime's refusals, the bus's, which the runtime logs as the agent's error lines), and
    every submission that was wrong or came after its item was decided. In time order."""
    accepted = [e for e in r.bus.audit if e["outcome"] == "ok"]
    return sorted(accepted + r.rejections + outcome_audit(r), key=lambda e: e["time"])
