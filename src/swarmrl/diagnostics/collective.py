"""Collective metrics: is the team really doing more useful work, in parallel, together?

RLCR's point is that a reward curve alone cannot tell. These read the rollouts (the
simulated timeline) and report team size, useful work, communication, latency and the
token budget.

Everything is also available *as of an earlier time L* (`at_limit`): agents are never told
their deadline, so what a rollout did before L is exactly what a rollout cut at L would
have done. That gives two things for free: training metrics at one fixed reference limit
(comparable across a deadline curriculum and across shaping modes, `ref/...` keys), and the
scaling evaluation's whole score-versus-latency curve from one run per team size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from swarmrl.collective.state import Rollout
from swarmrl.policy.tokenizer import encode_text

# Team-size buckets (CEO included) for useful work by team size: solo, small, medium, large.
TEAM_BUCKETS: tuple[tuple[int, int], ...] = ((1, 1), (2, 3), (4, 5), (6, 9))


def _mean(xs) -> float:
    return float(np.mean(xs)) if len(xs) else 0.0


def bucket_name(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass
class Snapshot:
    """One rollout as of time `limit_s` (nothing that happened after it counts)."""

    limit_s: float
    items: int  # reward-earning events (items solved) at or before the limit
    score: float  # reward earned at or before the limit, in [0, 1]
    expert_items: int  # of which solved by an expert rather than the CEO
    last_item_s: float | None  # when the last of them landed: the collective's critical path
    latency_s: float  # when the rollout was over, as seen with this limit
    direct: int  # direct messages sent at or before the limit
    channel: int  # channel posts sent at or before the limit
    direct_tokens: int  # their tokens (0 without a tokenizer)
    channel_tokens: int
    archive_reads: int  # accepted archive reads
    archive_messages: int  # messages those reads returned
    hired: int  # experts hired at or before the limit
    fired: int
    peak_team: int  # largest team (CEO included) at any time up to the limit
    turns: int  # LLM calls started before the limit (they run to the end either way)
    generated_tokens: int  # tokens those calls generated
    prefill_tokens: int  # new prompt tokens those calls processed
    base_team: int = 1  # agents there before any join: the CEO (1), or none in a fixed workflow (0)
    critical_steps: int = 0  # longest chain of causally dependent turns started before the limit
    idle: int = 0  # agents other than the CEO who joined by the limit and by then had sent and submitted nothing
    hired_by_experts: int = 0  # of `hired`, those an expert hired, not the CEO (workflow.manager_hires)


    @property
    def messages(self) -> int:
        return self.direct + self.channel

    @property
    def total_tokens(self) -> int:
        """The token budget spent: every token every agent processed or generated."""
        return self.generated_tokens + self.prefill_tokens


def token_counter(tokenizer) -> Callable[[str], int]:
    """Message text -> tokens, counted the way the runtime counts `message_tokens`."""
    return lambda text: len(encode_text(tokenizer, text))


def critical_steps(r: Rollout, limit_s: float | None = None) -> int:
    """Turns in the longest chain of causally dependent turns that started before `limit_s`
    (default: the deadline): PARL's "critical steps", latency counted in LLM calls on the
    longest dependent chain rather than in total work.

    Turn t of agent B depends on B's previous turn and on every turn whose message reached B at
    or before t starts (`MessageBus.inbox`: direct messages, and channel posts B was a member
    for at delivery): the sender's turn that ended when the message was sent. A routing message
    of a fixed workflow (sender `wf`) depends on the turns that ended when it was sent. Archive
    reads are not followed (the bus logs how many posts a read returned, not which).
    """
    lim = r.time_limit if limit_s is None else min(limit_s, r.time_limit)
    turns = sorted((t for t in r.turns if t.start < lim), key=lambda t: (t.start, t.end, t.agent))
    ended: dict[tuple[str, float], int] = {}  # (agent, end time) -> chain length ending with that turn
    last: dict[str, int] = {}  # agent -> chain length of its latest turn so far
    for t in turns:
        deps = [last.get(t.agent, 0)]
        for m in r.bus.inbox(t.agent, float("-inf"), t.start):
            if m.sender in r.agents:
                deps.append(ended.get((m.sender, m.sent_at), 0))
            else:  # the router: whoever finished a turn at that moment
                deps += [n for (_, end), n in ended.items() if end == m.sent_at]
        last[t.agent] = ended[(t.agent, t.end)] = 1 + max(deps)
    return max(last.values(), default=0)


def at_limit(r: Rollout, limit_s: float, count_tokens: Callable[[str], int] | None = None) -> Snapshot:
    """The rollout cut at `limit_s` (<= its own deadline; larger values are clipped to it)."""
    L = min(limit_s, r.time_limit)
    # Messages and reads are recounted from the bus, not taken from `r.counters`: the counters
    # cannot be cut at L, they skip the workflow's routing messages (sender "wf"), and they
    # count an archive read when it is asked for, while the bus performs it (and audits it)
    # only at the reader's next turn, if there is one and the reader is still a member.
    kept = {i: t for i, t in r.solved.items() if t <= L}
    msgs = [m for m in r.bus.messages if m.sent_at <= L]
    reads = [e for e in r.bus.audit if e["action"] == "read" and e["outcome"] == "ok" and e["time"] <= L]
    tok = count_tokens or (lambda _text: 0)
    # Team size over time: +1 at each hire, -1 at each fire, both before L. The CEO is there
    # from the start; a fixed workflow has no CEO, and its roles, staffed at t=0, count as joins.
    base = 1 if any(a.role == "ceo" for a in r.agents.values()) else 0
    events = sorted([(a.created_at, 1) for a in r.agents.values() if a.role != "ceo" and a.created_at <= L]
                    + [(a.fired_at, -1) for a in r.agents.values() if a.fired_at is not None and a.fired_at <= L])
    size = peak = base
    for _, d in events:
        size += d
        peak = max(peak, size)
    over = r.finished_at is not None and r.finished_at <= L and r.end_reason != "deadline"
    turns = [t for t in r.turns if t.start < L]
    return Snapshot(
        limit_s=L, items=len(kept),
        score=_score_of(r, kept),
        expert_items=sum(1 for i in kept if r.solved_by.get(i, "ceo") != "ceo"),
        last_item_s=max(kept.values()) if kept else None,
        latency_s=r.finished_at if over else L,
        direct=sum(m.kind == "direct" for m in msgs), channel=sum(m.kind == "channel" for m in msgs),
        direct_tokens=sum(tok(m.text) for m in msgs if m.kind == "direct"),
        channel_tokens=sum(tok(m.text) for m in msgs if m.kind == "channel"),
        archive_reads=len(reads), archive_messages=sum(int(e.get("returned", 0)) for e in reads),
        hired=sum(d > 0 for _, d in events), fired=sum(d < 0 for _, d in events), peak_team=peak, base_team=base,
        hired_by_experts=sum(a.created_at <= L and r.org.boss_of(n) not in (None, r.org.ceo) for n, a in r.agents.items()),
        turns=len(turns), generated_tokens=sum(t.generated_tokens for t in turns),
        prefill_tokens=sum(t.new_prompt_tokens for t in turns), critical_steps=critical_steps(r, L),
        idle=_idle(r, msgs, L))


def _score_of(r: Rollout, kept) -> float:
    """The rollout's score from the items in `kept` (solved before some limit)."""
    return sum(r.item_scores.get(i, 1.0) for i in kept) / r.problem.num_items


def score_steps(rollouts: list[Rollout], horizon_s: float) -> list[tuple[float, float]]:
    """The mean score as of every limit up to `horizon_s`, exactly: [(t, mean score as of t)], at
    t = 0 and at every time an item was solved. The score only changes when an item is solved, so
    between two of these times it stays at the earlier one's value, and the first t whose value
    reaches a target is the exact latency at which the rollouts reach it (no grid to bracket it).
    Each value is what `snapshot_metrics([at_limit(r, t) ...])["score_mean"]` gives."""
    times = sorted({0.0} | {t for r in rollouts for t in r.solved.values() if t <= min(horizon_s, r.time_limit)})
    return [(t, _mean([_score_of(r, [i for i, s in r.solved.items() if s <= min(t, r.time_limit)])
                       for r in rollouts])) for t in times]


def _idle(r: Rollout, msgs, limit_s: float) -> int:
    """Agents (not the CEO) who joined by `limit_s` and by then had neither sent a message nor
    submitted: hires that cost a brief and contributed nothing visible."""
    acted = {m.sender for m in msgs} | {s["agent"] for s in r.submissions if s["t"] <= limit_s}
    return sum(1 for a in r.agents.values() if a.role != "ceo" and a.created_at <= limit_s and a.name not in acted)


def snapshot_metrics(snaps: list[Snapshot]) -> dict[str, float]:
    """Means over rollouts of snapshots taken at one limit (the scaling table's columns)."""
    items = [s.items for s in snaps]
    lat = [s.latency_s for s in snaps]
    m = {
        "score_mean": _mean([s.score for s in snaps]),
        "useful_work": _mean(items),
        # Ratio of sums, not mean of ratios: a rollout that ends in 0.1 s would dominate the latter.
        "useful_work_per_min": 60.0 * sum(items) / max(sum(lat), 1e-9),
        "expert_work_share": sum(s.expert_items for s in snaps) / max(sum(items), 1),
        "critical_path_s": _mean([s.last_item_s for s in snaps if s.last_item_s is not None]),
        "critical_steps": _mean([s.critical_steps for s in snaps]),
        "idle_agents_per_rollout": _mean([s.idle for s in snaps]),
        "messages_per_rollout": _mean([s.messages for s in snaps]),
        "direct_messages_per_rollout": _mean([s.direct for s in snaps]),
        "channel_posts_per_rollout": _mean([s.channel for s in snaps]),
        "direct_message_tokens_per_rollout": _mean([s.direct_tokens for s in snaps]),
        "channel_message_tokens_per_rollout": _mean([s.channel_tokens for s in snaps]),
        "archive_reads_per_rollout": _mean([s.archive_reads for s in snaps]),
        "archive_messages_read_per_rollout": _mean([s.archive_messages for s in snaps]),
        "team_hired_per_rollout": _mean([s.hired for s in snaps]),
        "team_hired_by_experts_per_rollout": _mean([s.hired_by_experts for s in snaps]),
        "team_fired_per_rollout": _mean([s.fired for s in snaps]),
        "team_active_mean": _mean([s.base_team + s.hired - s.fired for s in snaps]),
        "team_size_mean": _mean([s.peak_team for s in snaps]),
        "generated_tokens_per_rollout": _mean([s.generated_tokens for s in snaps]),
        "prefill_tokens_per_rollout": _mean([s.prefill_tokens for s in snaps]),
        "total_tokens_per_rollout": _mean([s.total_tokens for s in snaps]),
    }
    for lo, hi in TEAM_BUCKETS:  # empty buckets are left out (a gap in plots, not a zero)
        got = [s.items for s in snaps if lo <= s.peak_team <= hi]
        if got:
            m[f"useful_work_by_team/{bucket_name(lo, hi)}"] = _mean(got)
    return m


# Keys of the training-time metrics that are also reported at the reference limit.
REF_KEYS = ("score_mean", "useful_work", "expert_work_share", "messages_per_rollout",
            "message_tokens_per_rollout", "team_size_mean", "total_tokens_per_rollout")


def collective_metrics(rollouts: list[Rollout], ref_limit_s: float | None = None,
                       count_tokens: Callable[[str], int] | None = None) -> dict[str, float]:
    """Per-step metrics. With `ref_limit_s`, the `ref/...` keys repeat the main ones as of that
    time, so steps with different deadlines (a curriculum, another shaping mode) compare."""
    n = len(rollouts)
    c = lambda key: _mean([r.counters[key] for r in rollouts])  # noqa: E731
    useful = [sum(1 for t in r.solved.values() if t <= r.time_limit) for r in rollouts]
    team = [r.scenario.team_size(r) for r in rollouts]
    by_experts = sum(1 for r in rollouts for it, who in r.solved_by.items()
                     if who != "ceo" and r.solved[it] <= r.time_limit)
    # Only submissions that decided their item were graded (collective/grading.py).
    submits = [s for r in rollouts for s in r.submissions if s.get("final")]
    gen = [sum(t.generated_tokens for t in r.turns) for r in rollouts]
    m = {
        "score_mean": _mean([r.score for r in rollouts]),
        "score_std": float(np.std([r.score for r in rollouts])) if n else 0.0,
        "latency_mean": _mean([r.finished_at or 0.0 for r in rollouts]),
        "team_size_mean": _mean(team),
        "useful_work": _mean(useful),  # correct items before the deadline, per rollout
        "useful_work_per_agent": _mean([u / max(t, 1) for u, t in zip(useful, team)]),
        "expert_work_share": by_experts / max(sum(useful), 1),
        "accuracy": _mean([s["correct"] for s in submits]),
        "messages_per_rollout": _mean([r.counters["direct_messages"] + r.counters["channel_posts"] for r in rollouts]),
        "direct_messages_per_rollout": c("direct_messages"),
        "channel_posts_per_rollout": c("channel_posts"),
        "archive_reads_per_rollout": c("archive_reads"),
        "board_takes_per_rollout": c("board_takes"),  # agents that joined the shared board
        "message_tokens_per_rollout": c("message_tokens"),
        "invalid_actions": c("invalid_actions"),
        "hit_token_cap": c("hit_token_cap"),
        "wrong_submits": c("wrong_submits"),
        "hires_per_rollout": c("hires"),
        "fires_per_rollout": c("fires"),
        "turns_per_rollout": _mean([len(r.turns) for r in rollouts]),
        "generated_tokens_per_rollout": _mean(gen),
        "solved_rate": _mean([r.end_reason == "solved" for r in rollouts]),
    }
    roles = list(dict.fromkeys(role for r in rollouts for role in r.scenario.role_types()))  # in scenario order
    for role in roles:
        turns = [t for r in rollouts for t in r.turns if t.role == role]
        m[f"role/{role}/turns_per_rollout"] = len(turns) / max(n, 1)
        m[f"role/{role}/tokens_per_turn"] = _mean([t.generated_tokens for t in turns])
    # The same timeline cut at the deadline, for what the counters above cannot give.
    full = snapshot_metrics([at_limit(r, r.time_limit, count_tokens) for r in rollouts])
    for k in ("useful_work_per_min", "critical_path_s", "critical_steps", "idle_agents_per_rollout",
              "direct_message_tokens_per_rollout",
              "channel_message_tokens_per_rollout", "archive_messages_read_per_rollout",
              "team_hired_per_rollout", "team_hired_by_experts_per_rollout", "team_fired_per_rollout", "team_active_mean",
              "prefill_tokens_per_rollout", "total_tokens_per_rollout"):
        m[k] = full[k]
    m.update({k: v for k, v in full.items() if k.startswith("useful_work_by_team/")})
    if count_tokens is None:  # per-primitive token counts need the tokenizer
        del m["direct_message_tokens_per_rollout"], m["channel_message_tokens_per_rollout"]
    if ref_limit_s is not None:
        ref = snapshot_metrics([at_limit(r, ref_limit_s, count_tokens) for r in rollouts])
        ref["message_tokens_per_rollout"] = ref["direct_message_tokens_per_rollout"] + ref["channel_message_tokens_per_rollout"]
        m["ref/limit_s"] = ref_limit_s
        m.update({f"ref/{k}": ref[k] for k in REF_KEYS if count_tokens is not None or k != "message_tokens_per_rollout"})
    return m


def team_size_histogram(rollouts: list[Rollout], max_size: int) -> list[float]:
    counts = np.bincount([r.scenario.team_size(r) for r in rollouts], minlength=max_size + 1)
    return (counts / max(len(rollouts), 1)).tolist()
