"""The collective runtime: a discrete-event simulation of many rollouts in simulated time.

Each loop iteration ("wave") takes, from every unfinished rollout, every turn that is
causally safe to run now (docs/ARCHITECTURE.md, "Causal batching"), and sends all of them to
the actor in one batch. Rollouts are independent, so batching across them is free; within a rollout a turn
starting at s may join the batch only if s < s1 + d_min (s1 = the earliest pending turn),
because nothing still unsimulated can deliver a message to it before then.

Effects of a turn (messages, hires, submissions) take place at the turn's end. A turn
that ends after the deadline has no effect: its tokens stay in the trajectory (they were
generated and carry the advantage), but it earns nothing. Which submission decides an item,
and when its sender hears the outcome, is collective/grading.py's.

Everything that differs between the RLCR org and the fixed workflows (who exists at t = 0,
who may hire, what each role may do, who submits, routing) is the rollout's scenario's
(scenarios/base.py). The runtime's public step API: `new_rollout`, `next_turns(rollout)`
(the turns safe to run now), `apply(request, reply)`; `run` drives them to the end.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass
from typing import Protocol, Sequence

from swarmrl.collective.actions import DEFAULT_MAX_ACTIONS, Action, parse_reply, render_action
from swarmrl.collective.bus import MAX_MESSAGE_CHARS, MAX_MESSAGES_PER_AGENT, Message, MessageBus
from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.grading import due_outcomes, next_outcome_due
from swarmrl.collective.handlers import CORE_HANDLERS
from swarmrl.collective.org import Org
from swarmrl.collective.protocol import PROMPT_CUE, CompactProtocol
from swarmrl.collective.render import escape_text, output_value, render_message
from swarmrl.collective.state import Agent, Rollout, Turn, TurnRequest
from swarmrl.config import ModelConfig, SamplerConfig, WorkflowConfig
from swarmrl.collective.streaming import run_stream
from swarmrl.policy.sampler import Sample
from swarmrl.policy.tokenizer import encode_text
from swarmrl.seeds import seed_for

# Room kept free in an agent's context beyond its next turn's tokens (config_load.py adds
# CONTEXT_MARGIN_TOKENS on top of it when it checks model.max_context_tokens).
CONTEXT_RESERVE_TOKENS = 64
__all__ = ["Actor", "PROMPT_CUE", "Runtime", "RuntimeLimits", "TurnRequest"]


class Actor(Protocol):
    """Produces one reply per request: the LLM policy, or a scripted demonstrator."""

    def act(self, requests: Sequence[TurnRequest], seed: int) -> list[Sample]: ...


@dataclass(frozen=True)
class RuntimeLimits:
    """Defaults are read from the config's sections, so a runtime built by hand behaves like a run's."""

    max_new_tokens_per_turn: int = SamplerConfig.max_new_tokens_per_turn
    max_turns_per_agent: int = SamplerConfig.max_turns_per_agent
    max_context_tokens: int = ModelConfig.max_context_tokens
    max_message_chars: int = MAX_MESSAGE_CHARS
    max_messages_per_agent: int = MAX_MESSAGES_PER_AGENT
    max_hires_per_rollout: int = WorkflowConfig.max_hires_per_rollout  # hires and re-hires together

    def for_scripts(self, problems) -> "RuntimeLimits":
        """These limits with the per-agent turn cap lifted so it never binds on `problems`: the
        cap is a loop guard for policies, and a script that spends a turn per item would otherwise
        stop short on a problem with as many items as turns."""
        turns = max(self.max_turns_per_agent, 2 * max(p.num_items for p in problems) + 2)
        return dataclasses.replace(self, max_turns_per_agent=turns)


class Runtime:
    def __init__(self, task, tokenizer, latency: LatencyModel, limits: RuntimeLimits, scenario=None,
                 causal_batching: bool = True, protocol=None):
        """`scenario`: the default of `new_rollout` (None: the RLCR org with up to 8 experts).
        `protocol`: how contexts are written (collective/protocol.py; None: compact)."""
        if scenario is None:
            from swarmrl.scenarios.org import OrgScenario  # the scenarios build on this module
            scenario = OrgScenario()
        self.task = task
        self.scenario = scenario
        # False: one turn per rollout per wave (the earliest), the reference the batched
        # schedule must reproduce exactly (tested).
        self.causal_batching = causal_batching
        self.tokenizer = tokenizer
        self.protocol = protocol or CompactProtocol(tokenizer)
        self.latency = latency
        self.limits = limits
        self.handlers = dict(CORE_HANDLERS)

    # ---------------------------------------------------------------- setup
    def new_rollout(self, index: int, group: int, problem, time_limit: float, cap: int | None = None,
                    scenario=None, prestaffed_experts: int = 0, span: int | None = None) -> Rollout:
        """A rollout staffed by its scenario (default: the runtime's). `cap`: experts the org may
        hire, where the scenario lets the policy choose its team (the scenario's default if None);
        `prestaffed_experts` of them hired at t = 0 (the scaling evaluation's fixed teams);
        `span`: this rollout's span of control (`Org.span`; the scenario's if None)."""
        scenario = scenario or self.scenario
        bus = MessageBus(latency_s=self.latency.message_latency_s,
                         max_message_chars=self.limits.max_message_chars,
                         max_messages_per_agent=self.limits.max_messages_per_agent)
        team_cap = scenario.team_cap(cap)
        # The hire budget caps churn; an evaluation cap above it (village to city) must stay reachable.
        # getattr: a plugin scenario that does not subclass Scenario may lack `manager_hires` and `span`.
        org = Org(ceo="ceo", max_experts=team_cap, max_hires=max(self.limits.max_hires_per_rollout, team_cap),
                  manager_hires=getattr(scenario, "manager_hires", 0),
                  span=getattr(scenario, "span", 0) if span is None else span)
        r = Rollout(index=index, group=group, problem=problem, time_limit=time_limit,
                    agents={}, org=org, bus=bus, scenario=scenario)
        scenario.staff(self, r, prestaffed_experts)
        return r

    def add_agent(self, r: Rollout, name: str, role: str, now: float, ready: bool) -> Agent:
        """A new agent whose context starts with its header (the protocol's). One not `ready` waits
        for its first message (a hire's brief) instead of spending a turn on <wait/>."""
        group = len(r.agents) % r.scenario.groups  # creation order: the CEO, or the first role's first agent, is 0
        if group:
            r.variants[name] = self.task.variant(r.problem, group)
        ids = self.protocol.header_ids(self, r, name, role)
        agent = Agent(name=name, role=role, ids=[], gen_mask=[], logprobs=[], created_at=now,
                      ready_at=now if ready else None, seen_upto=now)
        agent.append(ids, generated=False)
        r.agents[name] = agent
        return agent

    # ---------------------------------------------------------------- event loop
    def run(self, rollouts: list[Rollout], actor: Actor, seed: int, progress=None) -> list[Rollout]:
        """Run every rollout to its end: continuous batching when the actor streams
        (collective/streaming.py), else waves of every rollout's safe turns. `progress`: called
        with `rollouts` after every applied wave (runs/progress.py RolloutProgress)."""
        stream = actor.open_stream() if hasattr(actor, "open_stream") else None
        if stream is not None:
            return run_stream(self, rollouts, stream, seed, progress)
        wave = 0
        while True:
            requests: list[TurnRequest] = []
            for r in rollouts:
                if not r.done:
                    requests += self.next_turns(r)
            if progress is not None:  # after next_turns, which closes the rollouts that are over
                progress(rollouts)
            if not requests:
                return rollouts
            replies = actor.act(requests, seed=seed_for("wave", seed, wave))
            # Apply in start-time order so effects are deterministic whatever the batch order.
            for req, reply in sorted(zip(requests, replies), key=lambda x: (x[0].rollout.index, x[0].start, x[0].agent.name)):
                self.apply(req, reply)
            wave += 1

    def _start_time(self, r: Rollout, a: Agent) -> float | None:
        """When the agent's next turn starts: max(agent free, trigger); None if nothing will wake it."""
        if a.status not in ("active", "fired"):
            return None
        if a.ready_at is not None:
            start = a.ready_at
        else:
            wakes = [t for t in (r.bus.next_delivery(a.name, a.seen_upto), next_outcome_due(r, a)) if t is not None]
            start = max(min(wakes), a.free_at) if wakes else None
        if a.status == "fired" and (start is None or a.fired_at is None or start >= a.fired_at):
            return None  # a fired agent only finishes a turn it started before the fire
        return start

    def next_turns(self, r: Rollout) -> list[TurnRequest]:
        """The turns of `r` that are causally safe to run now (all of them may join one batch)."""
        starts = {n: s for n, a in r.agents.items() if (s := self._start_time(r, a)) is not None}
        # Turns starting at or after the deadline never run (they could earn nothing).
        beyond = any(s >= r.time_limit for s in starts.values())
        starts = {n: s for n, s in starts.items() if s < r.time_limit}
        if not starts:
            return self._finish(r, deadline_hit=beyond)
        s1 = min(starts.values())
        if not self.causal_batching:
            first = min(starts, key=lambda n: (starts[n], n))
            return [self._request(r, r.agents[first], s1)]
        horizon = s1 + self.latency.d_min
        return [self._request(r, r.agents[n], s) for n, s in sorted(starts.items()) if s < horizon]

    def _finish(self, r: Rollout, deadline_hit: bool) -> list[TurnRequest]:
        """No agent has a turn left before the deadline: close the rollout.

        Agents keep going after the last item is solved (ending early would depend on the
        batch schedule); latency is the time the last item landed if all were solved.
        """
        cut = deadline_hit or any(a.status == "cut" for a in r.agents.values())
        for a in r.agents.values():
            if a.status == "active":  # still had work (or was waiting for a message)
                a.status = "cut" if deadline_hit else "idle"
        if len(r.solved) == r.problem.num_items:
            r.finished_at, r.end_reason = max(r.solved.values()), "solved"
        elif cut:
            r.finished_at, r.end_reason = r.time_limit, "deadline"
        else:
            r.finished_at = min(max([t.end for t in r.turns], default=0.0), r.time_limit)
            r.end_reason = "idle"
        return []

    def _request(self, r: Rollout, a: Agent, start: float) -> TurnRequest:
        # Invariant 1: the observation holds exactly the messages delivered in (seen_upto, start].
        # Outcomes of the agent's submissions come with the latency of a message (grading.py).
        lines = a.pending + due_outcomes(r, a, start)
        lines += [line for ch, last, as_of in a.pending_reads for line in self._archive(r, a, ch, last, as_of)]
        lines += [render_message(m) for m in r.bus.inbox(a.name, a.seen_upto, start)]
        a.pending, a.pending_reads, a.seen_upto = [], [], start
        for line in lines:  # results the agent has now seen (posts, messages, archive reads)
            a.known.update(self.task.learn(r.problem, line))
        if a.queue:  # the work desk: the item in hand is shown last, right before the cue
            # The desk may show agent text (a claimed result, upstream outputs): one line, always.
            desk = escape_text(self.task.render_item(r.problem, a.queue[0], a.known))
            if a.queue[0] in a.candidates:  # upstream outputs for it (fixed workflows): "C:4+1+2?7,7,6"
                desk += "?" + ",".join(output_value(v) for v in a.candidates[a.queue[0]])
            lines.append(desk)
        elif a.took:
            lines.append("(no items left)")
        observation, ids = self.protocol.observation(self, r, a, lines)
        a.append(ids, generated=False)
        return TurnRequest(rollout=r, agent=a, start=start, observation=observation, prompt=list(a.ids))

    # ---------------------------------------------------------------- effects
    def apply(self, req: TurnRequest, reply: Sample) -> None:
        """Append the reply to the agent's context, advance its clock, and run its actions."""
        r, a = req.rollout, req.agent
        new_prompt = len(a.ids) - a.tokens_prefilled
        a.append(reply.ids, generated=True, logprobs=reply.logprobs)
        a.tokens_prefilled = len(a.ids)
        a.turns += 1
        a.ready_at = None  # set again below if the agent keeps working
        end = req.start + self.latency.turn_duration(new_prompt, len(reply.ids))
        text = self.protocol.reply_text(reply.ids)
        # 32 actions a reply, or enough for a CEO to hire its whole cap in one turn (village to city).
        parsed = parse_reply(text, max_actions=max(DEFAULT_MAX_ACTIONS, r.org.max_experts + 8))
        errors = list(parsed.errors)
        if reply.hit_cap:
            errors.append(f"error: turn cut at {self.limits.max_new_tokens_per_turn} tokens")
            r.counters["hit_token_cap"] += 1
        for err in errors:
            r.reject(end, a.name, a.turns, "reply", err)
        a.free_at = end
        late = end > r.time_limit or (a.fired_at is not None and end > a.fired_at)
        turn = Turn(agent=a.name, role=a.role, start=req.start, end=end, observation=req.observation,
                    reply=text, context_tokens=len(req.prompt), new_prompt_tokens=new_prompt, generated_tokens=len(reply.ids),
                    actions=[render_action(x) for x in parsed.actions], errors=errors, after_deadline=late)
        r.turns.append(turn)
        if late:  # Invariant 2: effects after the deadline (or after being fired) do not happen.
            if a.status == "active":
                a.status = "cut"
            return
        next_state = "continue"
        for action in parsed.actions:
            err = self.execute(r, a, action, end)
            if err:
                errors.append(err)
                r.reject(end, a.name, a.turns, render_action(action)[:200], err)
            if action.kind in ("wait", "done"):
                next_state = action.kind
                break  # actions after a turn-ending action are ignored
        turn.errors = errors
        r.counters["invalid_actions"] += len(errors)
        a.pending += errors  # Invariant 6: bad output becomes an observation, never an exception
        if a.status == "active":
            self._after_turn(r, a, next_state, bool(errors), end)

    def _after_turn(self, r: Rollout, a: Agent, next_state: str, errors: bool, end: float) -> None:
        """The agent's state after an effective turn: done, cut, waiting, or working on."""
        if next_state == "done":
            a.status = "done"
        elif a.turns >= self.limits.max_turns_per_agent:
            a.status = "done"
        elif len(a.ids) + self.limits.max_new_tokens_per_turn + CONTEXT_RESERVE_TOKENS > self.limits.max_context_tokens:
            a.status = "cut"
            r.counters["context_overflow"] += 1
        elif next_state == "wait" and not errors:
            a.ready_at = None
        else:  # kept working, or must see its errors: the next turn starts right away
            a.ready_at = end
        if a.status != "active":
            r.scenario.agent_finished(self, r, a, end)

    def execute(self, r: Rollout, a: Agent, act: Action, now: float) -> str | None:
        """Run one action at time `now`; return an error line or None. Never raises."""
        if act.kind in ("wait", "done"):  # handled by the caller: they end the turn
            return None
        if act.kind not in r.scenario.actions(a.role):
            return r.scenario.refusal(a.role, act.kind)
        handler = self.handlers.get(act.kind) or r.scenario.handlers().get(act.kind)
        if handler is None:
            return r.scenario.refusal(a.role, act.kind)
        return handler(self, r, a, act, now)

    def count_sent(self, r: Rollout, out: Message | str, counter: str) -> str | None:
        """Count an accepted message (and its tokens) under `counter`; pass a refusal through."""
        if isinstance(out, str):
            return out
        r.counters[counter] += 1
        r.counters["message_tokens"] += len(encode_text(self.tokenizer, out.text))
        return None

    def _archive(self, r: Rollout, a: Agent, channel: str, last: int, as_of: float) -> list[str]:
        got = r.bus.read_archive(a.name, channel, last, as_of)
        if isinstance(got, str):  # membership changed since the read was accepted
            r.reject(as_of, a.name, a.turns, f'<read ch="{channel[:40]}"/>', got)
            return [got]
        return [render_message(m, archive=True) for m in got] or [f"#{channel}~ (empty)"]
