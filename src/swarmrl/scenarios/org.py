"""RLCR's organisation as a scenario: a CEO alone at t = 0 who may hire and fire up to
`max_experts` experts, create channels, and brief hires; every agent may submit.

`single` is the same organisation with hiring off (cap 0): one agent does everything, the
control every team is compared with. Both share the warm start's demonstrations (every
team size 0..max_experts), so a single agent and a team start from one base model.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from swarmrl.collective.actions import Action
from swarmrl.collective.handlers import take
from swarmrl.scenarios.base import CORE_ACTIONS, Scenario

GENERAL = "general"  # the channel every hire joins
NO_DEADLINE = 1e9  # demonstrations run to completion
ORG_ACTIONS = ("hire", "fire", "create")  # the CEO's own
# What a non-CEO is told for the CEO's actions (the org's rules, collective/org.py).
CEO_ONLY = {"hire": "error: only the CEO can hire", "fire": "error: only the CEO can fire",
             "create": "error: only the ceo can create channels"}


class OrgScenario(Scenario):
    """RLCR's organisation (`workflow.name=org`): a CEO alone at t = 0 who may hire and fire up to
    `max_experts` experts, create channels and brief hires; every agent may submit."""

    name = "org"
    hires = True
    demo_set = "org"

    def __init__(self, max_experts: int = 8, manager_hires: int = 0, span: int = 0):
        self.max_experts = max_experts
        self.manager_hires = manager_hires  # > 0: every expert may hire this many (collective/org.py)
        self.span = span  # > 0: the CEO hires up to this many, who share the rest of the cap (Org.quota)

    @classmethod
    def from_config(cls, cfg) -> "OrgScenario":
        return cls(cfg.workflow.max_experts, cfg.workflow.manager_hires, cfg.workflow.span)

    def role_types(self) -> list[str]:
        return ["ceo", "expert"]

    def max_team_size(self) -> int:
        return self.max_experts + 1

    def team_size(self, r) -> int:
        return r.org.peak_size  # the most agents active at once (hires minus fires), the CEO included

    def team_cap(self, requested: int | None) -> int:
        return self.max_experts if requested is None else requested

    def staff(self, runtime, r, prestaffed: int = 0) -> None:
        """The CEO alone, or with `prestaffed` experts hired at t = 0 through the CEO's own hire
        path (the scaling evaluation's fixed teams)."""
        r.bus.create_channel(GENERAL, "ceo", ["ceo"], 0.0)
        runtime.add_agent(r, "ceo", "ceo", 0.0, ready=True)
        for _ in range(prestaffed):
            if err := runtime.execute(r, r.agents["ceo"], Action("hire", {"role": "expert"}), 0.0):
                raise ValueError(f"prestaffed_experts={prestaffed}: {err}")

    def header(self, r, name: str, role: str) -> str:
        """Who the agent is, the problem, then its hiring cap on the last line, right before the
        cue, since the cap decides the first action (hire or work). A cap of 0 is the word
        `alone`: the tiny warm start never learned to tell the digit 0 from 8 (P(<take> first)
        0.145 at every cap, with the cap on this line or on the first), and it reads the word
        (0.992 alone, 0.08 at max=8). Under a hierarchy an expert's quota (`Org.quota`) reads like
        the CEO's; an expert with none shows no line."""
        cap = r.org.quota(name)
        if role == "ceo":
            first, last = "ceo", "alone\n" if cap == 0 else f"max={cap}\n"
        else:
            first, last = f"{name} boss={r.org.boss_of(name) or 'ceo'}", f"max={cap}\n" if cap else ""
        return f"{first}\n{r.problem_text(name)}\n{last}"

    def describe(self, r, name: str, role: str) -> str:
        if role != "ceo":
            boss = r.org.boss_of(name) or "ceo"
            boss = "the CEO" if boss == "ceo" else boss
            text = (f"You are {name}, an expert hired by {boss} of a team of AI agents that solves one problem "
                    f"together. Do the part of the work {boss} gives you, submit or share your results, and "
                    "stop when your part is done.")
            if quota := r.org.quota(name):
                text += (f" You may hire up to {quota} experts of your own, who start with the "
                         "problem and your brief, while the whole team stays within the CEO's cap.")
            return text
        cap = r.org.quota(name)
        if cap == 0:
            return "You are the ceo, working alone on the problem: solve it and submit every answer yourself."
        return (f"You are the ceo of a team of AI agents that solves one problem together. You may hire up to "
                f"{cap} experts (each a copy of you that starts with the problem and your brief) who work in "
                "parallel with you; hiring takes time, so split the work only where that pays. Make sure "
                "every item is submitted before the deadline.")

    def actions(self, role: str) -> tuple[str, ...]:
        if role == "ceo":
            return CORE_ACTIONS + ORG_ACTIONS
        return CORE_ACTIONS + ("hire",) if self.manager_hires or self.span else CORE_ACTIONS

    def handlers(self) -> dict:
        return {"hire": _hire, "fire": _fire, "create": _create}

    def refusal(self, role: str, kind: str) -> str:
        return CEO_ONLY.get(kind) or super().refusal(role, kind)

    def is_teammate(self, r, name: str) -> bool:
        return r.org.is_active(name)

    def demo_count(self, per_strategy: int) -> int:
        return per_strategy * (self.max_experts + 2)  # team sizes 1..max_experts + 1, and the `alone` block

    def demo_key(self) -> dict:
        key = {"max_experts": self.max_experts}  # hierarchies only when set: flat configs share one warm start
        key |= {"manager_hires": self.manager_hires} if self.manager_hires else {}
        return key | {"trees": True} if self.span else key  # the demos draw their own spans: any span, one set

    def demonstrations(self, runtime, scripts, tokenizer, end_id: int, n: int, seed: int):
        """Every team size 0..max_experts, plus a block of solo demos told `alone` (cap 0), so
        that the single agent is shown working alone often enough to learn the word (without the
        block only the ~5% of solo demos that draw cap 0 would show it). Team demos show their
        cap too: demos with max=m never hire more than m. Under a span (`workflow.span`), half the
        board teams of 2 or more are trees instead (`tree_demo`)."""
        from swarmrl.seeds import rng_for
        rng = rng_for("demos", seed)
        problems = runtime.task.sample(rng, n)
        strategies, rollouts = {}, []
        n_cap0 = n // (self.max_experts + 2)
        for i, p in enumerate(problems):
            span = 0  # flat: the CEO's quota is the cap
            if i < n_cap0:
                strat, cap = scripts.solo_strategy(), 0
            else:
                strat = scripts.team_strategy(rng, self.max_experts)
                cap = int(rng.integers(strat.experts, self.max_experts + 1))
                if self.span and strat.board and not strat.chain and strat.experts >= 2 and rng.random() < 0.5:
                    strat, cap, span = tree_demo(strat, rng)
            strategies[i] = strat
            rollouts.append(runtime.new_rollout(i, i, p, NO_DEADLINE, cap, scenario=self, span=span))
        stats = {"team_sizes": dict(sorted(Counter(s.experts + 1 for s in strategies.values()).items())),
                 "share_modes": dict(Counter(s.share for s in strategies.values() if s.experts)),
                 "trees": sum(1 for s in strategies.values() if s.managers)}
        return rollouts, scripts.org_actor(tokenizer, end_id, strategies), stats


def tree_demo(strat, rng):
    """A board team of k experts as a two-level tree: a span s drawn from 1..k-1, the cap k, so the
    CEO hires s managers from the board and the i-th hires its share of the other k - s
    (`Org.quota`), every agent exactly its quota. Over the draws every quota up to k - 1 appears
    at both levels, so a larger cap (a span of 8 and a cap of 64: quotas of 8 and 7) asks no
    agent for a number it has not seen. Returns (strategy, cap, span)."""
    span = int(rng.integers(1, strat.experts))
    return replace(strat, managers=span), strat.experts, span


class SingleScenario(OrgScenario):
    """One agent, no hiring: the org with its cap fixed at 0."""

    name = "single"
    hires = False

    def role_types(self) -> list[str]:
        return ["ceo"]

    def max_team_size(self) -> int:
        return 1

    def team_cap(self, requested: int | None) -> int:
        return 0

    def demonstrations(self, runtime, scripts, tokenizer, end_id: int, n: int, seed: int):
        """The org's demonstrations, played under the org: a single-agent run starts from the
        org's base model (the same cache entry), as RLCR's single-agent baseline and the workflow
        study's single cells do. Played under this scenario instead, every team demonstration
        would teach hires that are refused."""
        flat_or_tree = OrgScenario(self.max_experts, self.manager_hires, self.span)
        return flat_or_tree.demonstrations(runtime, scripts, tokenizer, end_id, n, seed)


# ---------------------------------------------------------------------- the CEO's action handlers


def _hire(runtime, r, a, act: Action, now: float) -> str | None:
    name, err = r.org.hire(a.name, act.attrs.get("role", "expert"))
    r.counters["rejected_hires"] = r.org.rejected_hires
    if err:
        return err
    r.counters["hires"] += 1
    hired = runtime.add_agent(r, name, "expert", now, ready=False)
    r.bus.join(GENERAL, name, now)
    if "item" in act.attrs:  # work on its desk from the start: no brief to wait for, no turn spent taking
        if err := take(runtime, r, hired, Action("take", {"item": act.attrs["item"]}), now):
            return err  # the hire stands and waits for a message, like a hire without a brief
        # The desk is the hirer's word to the hire: it arrives with a message's latency, as a brief would.
        hired.ready_at = now + runtime.latency.message_latency_s
    if act.body:  # the optional brief travels as the first direct message (the hire stands if it is refused)
        return runtime.count_sent(r, r.bus.send_direct(a.name, name, act.body, now), "direct_messages")
    return None


def _fire(runtime, r, a, act: Action, now: float) -> str | None:
    who = act.attrs["who"]
    err = r.org.fire(a.name, who)
    if err:
        return err
    r.counters["fires"] += 1
    r.bus.leave_all(who, now)
    r.agents[who].status = "fired"
    r.agents[who].fired_at = now
    return None


def _create(runtime, r, a, act: Action, now: float) -> str | None:
    members = [m for m in act.attrs.get("members", "").split(",") if m]
    bad = [m for m in members if not r.org.is_active(m)]
    if bad:
        return f"error: not active teammates: {','.join(bad)}"
    return r.bus.create_channel(act.attrs["ch"], a.name, sorted(set(members) | {a.name}), now)
