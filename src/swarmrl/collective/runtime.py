"""The collective runtime: a discrete-event simulation of many rollouts in simulated time.

Each loop iteration ("wave") takes, from every unfinished rollout, every turn that is
causally safe to run now (DESIGN.md section 3), and sends all of them to the actor in one
batch. Rollouts are independent, so batching across them is free; within a rollout a turn
starting at s may join the batch only if s < s1 + d_min (s1 = the earliest pending turn),
because nothing still unsimulated can deliver a message to it before then.

Effects of a turn (messages, hires, submissions) take place at the turn's end. A turn
that ends after the deadline has no effect: its tokens stay in the trajectory (they were
generated and carry the advantage), but it earns nothing. Which submission decides an item,
and when its sender hears the outcome, is collective/grading.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from swarmrl.collective.actions import Action, parse_reply, render_action
from swarmrl.collective.bus import Message, MessageBus
from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.grading import apply_settlement, due_outcomes, first_known, next_outcome_due
from swarmrl.collective.org import Org
from swarmrl.collective.render import escape_text, render_message
from swarmrl.collective.state import Agent, Rollout, Turn
from swarmrl.collective.streaming import run_stream
from swarmrl.collective.workflow_steps import output_value, route, workflow_action
from swarmrl.policy.sampler import Sample
from swarmrl.policy.tokenizer import encode_text
from swarmrl.workflows.graph import Workflow

PROMPT_CUE = ">>"  # ends every observation: "your turn"
GENERAL = "general"


@dataclass
class TurnRequest:
    rollout: Rollout
    agent: Agent
    start: float
    observation: str  # the text appended to the agent's context for this turn
    prompt: list[int]  # the whole context the model conditions on


class Actor(Protocol):
    """Produces one reply per request: the LLM policy, or a scripted demonstrator."""

    def act(self, requests: Sequence[TurnRequest], seed: int) -> list[Sample]: ...


@dataclass(frozen=True)
class RuntimeLimits:
    """Defaults are the config's (swarmrl/config.py), so a runtime built by hand behaves like a run's."""

    max_new_tokens_per_turn: int = 64  # sampler.max_new_tokens_per_turn
    max_turns_per_agent: int = 12  # sampler.max_turns_per_agent
    max_context_tokens: int = 1024  # model.max_context_tokens
    max_message_chars: int = 500
    max_messages_per_agent: int = 64
    max_hires_per_rollout: int = 16  # workflow.max_hires_per_rollout: hires and re-hires together


def header(name: str, role: str, problem_text: str, max_experts: int, workflow: str | None = None) -> str:
    if workflow is not None:  # a fixed workflow: the agent's name says its role, the workflow its place
        first = f"{name} wf={workflow}"
    else:
        first = f"ceo max={max_experts}" if role == "ceo" else f"{name} boss=ceo"
    return f"{first}\n{problem_text}\n"


class Runtime:
    def __init__(self, task, tokenizer, latency: LatencyModel, limits: RuntimeLimits,
                 causal_batching: bool = True):
        self.task = task
        # False: one turn per rollout per wave (the earliest), the reference the batched
        # schedule must reproduce exactly (tested).
        self.causal_batching = causal_batching
        self.tokenizer = tokenizer
        self.latency = latency
        self.limits = limits

    # ---------------------------------------------------------------- setup
    def new_rollout(self, index: int, group: int, problem, time_limit: float, max_experts: int,
                    workflow: Workflow | None = None, prestaffed_experts: int = 0) -> Rollout:
        """An org with the CEO alone (RLCR; `single` = max_experts 0) or with `prestaffed_experts`
        hired at t=0 (scaling eval), or a fixed workflow with every role staffed at t=0 (its
        sources start, the others wait for inputs)."""
        bus = MessageBus(latency_s=self.latency.message_latency_s,
                         max_message_chars=self.limits.max_message_chars,
                         max_messages_per_agent=self.limits.max_messages_per_agent)
        org = Org(ceo="ceo", max_experts=max_experts if workflow is None else 0,
                  max_hires=self.limits.max_hires_per_rollout)
        r = Rollout(index=index, group=group, problem=problem, time_limit=time_limit,
                    agents={}, org=org, bus=bus, workflow=workflow)
        if workflow is None:
            bus.create_channel(GENERAL, "ceo", ["ceo"], 0.0)
            self._add_agent(r, "ceo", "ceo", 0.0, ready=True)
            for _ in range(prestaffed_experts):  # a fixed team (scaling eval): hired at t=0 by the CEO's hire path
                if err := self._execute(r, r.agents["ceo"], Action("hire", {"role": "expert"}), 0.0):
                    raise ValueError(f"prestaffed_experts={prestaffed_experts}: {err}")
            return r
        for spec in workflow.roles:
            for name in spec.agent_names():
                a = self._add_agent(r, name, spec.name, 0.0, ready=not spec.inputs)
                if not spec.inputs and spec.expects == "answer":  # a source solver: every item on its desk
                    a.queue, a.took = list(range(1, problem.num_items + 1)), True
        return r

    def _add_agent(self, r: Rollout, name: str, role: str, now: float, ready: bool) -> Agent:
        wf = r.workflow.name if r.workflow is not None else None
        ids = encode_text(self.tokenizer, header(name, role, r.problem.text(), r.org.max_experts, wf))
        # A new hire waits for its first message (its brief) instead of spending a turn on <wait/>.
        agent = Agent(name=name, role=role, ids=[], gen_mask=[], logprobs=[], created_at=now,
                      ready_at=now if ready else None, seen_upto=now)
        agent.append(ids, generated=False)
        r.agents[name] = agent
        return agent

    # ---------------------------------------------------------------- event loop
    def run(self, rollouts: list[Rollout], actor: Actor, seed: int) -> list[Rollout]:
        stream = actor.open_stream() if hasattr(actor, "open_stream") else None
        if stream is not None:
            return run_stream(self, rollouts, stream, seed)
        wave = 0
        while True:
            requests: list[TurnRequest] = []
            for r in rollouts:
                if not r.done:
                    requests += self._safe_turns(r)
            if not requests:
                return rollouts
            replies = actor.act(requests, seed=seed * 100_003 + wave)
            # Apply in start-time order so effects are deterministic whatever the batch order.
            for req, reply in sorted(zip(requests, replies), key=lambda x: (x[0].rollout.index, x[0].start, x[0].agent.name)):
                self._apply(req, reply)
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

    def _safe_turns(self, r: Rollout) -> list[TurnRequest]:
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
        observation = "".join(line + "\n" for line in lines) + PROMPT_CUE
        a.append(encode_text(self.tokenizer, observation), generated=False)
        return TurnRequest(rollout=r, agent=a, start=start, observation=observation, prompt=list(a.ids))

    # ---------------------------------------------------------------- effects
    def _apply(self, req: TurnRequest, reply: Sample) -> None:
        r, a = req.rollout, req.agent
        new_prompt = len(a.ids) - a.tokens_prefilled
        a.append(reply.ids, generated=True, logprobs=reply.logprobs)
        a.tokens_prefilled = len(a.ids)
        a.turns += 1
        a.ready_at = None  # set again below if the agent keeps working
        end = req.start + self.latency.turn_duration(new_prompt, len(reply.ids))
        body = [t for t in reply.ids if t not in self.tokenizer.all_special_ids]
        text = self.tokenizer.decode(body, skip_special_tokens=True)
        parsed = parse_reply(text)
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
            err = self._execute(r, a, action, end)
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
        elif len(a.ids) + self.limits.max_new_tokens_per_turn + 64 > self.limits.max_context_tokens:
            a.status = "cut"
            r.counters["context_overflow"] += 1
        elif next_state == "wait" and not errors:
            a.ready_at = None
        else:  # kept working, or must see its errors: the next turn starts right away
            a.ready_at = end
        if r.workflow is not None and a.status != "active":
            for err in route(r, a, end, self.limits.max_message_chars):
                r.reject(end, "wf", 0, "route", err)

    def _execute(self, r: Rollout, a: Agent, act: Action, now: float) -> str | None:
        """Run one action at time `now`; return an error line or None. Never raises."""
        k, at = act.kind, act.attrs
        if k == "submit":
            return self._submit(r, a, at["item"], act.body or "", now)
        if k in ("verdict", "assign"):
            return workflow_action(r, a, act, self.task)
        if k == "take":
            items = self.task.take(r.problem, at["item"])
            if items is None:
                return f"error: no item or range {at['item']!r}"
            # Taken items go to the front (e.g. recomputing a dependency before the item needing it).
            a.queue = items + [i for i in a.queue if i not in items]
            a.took = True
            return None
        if k == "msg":
            if not r.org.is_active(at["to"]) or at["to"] == a.name:
                return f"error: no active teammate named {at['to']!r}"
            out = r.bus.send_direct(a.name, at["to"], act.body or "", now)
            return self._sent(r, out, "direct_messages")
        if k == "post":
            return self._sent(r, r.bus.post(a.name, at["ch"], act.body or "", now), "channel_posts")
        if k == "read":
            if a.name not in r.bus.members(at["ch"]):
                return f"error: you are not a member of {at['ch'][:40]}"
            if int(at.get("last", 5)) < 1:
                return "error: last must be at least 1"
            r.counters["archive_reads"] += 1
            # Read (once, by the bus, audited there) at the agent's next turn: by then every
            # post delivered up to `now` has been simulated, whatever the batch order.
            a.pending_reads.append((at["ch"], int(at.get("last", 5)), now))
            return None
        if k == "hire":
            return self._hire(r, a, act, now)
        if k == "fire":
            err = r.org.fire(a.name, at["who"])
            if err:
                return err
            r.counters["fires"] += 1
            r.bus.leave_all(at["who"], now)
            r.agents[at["who"]].status = "fired"
            r.agents[at["who"]].fired_at = now
            return None
        if k == "create":
            if a.role != "ceo":
                return "error: only the ceo can create channels"
            members = [m for m in at.get("members", "").split(",") if m]
            bad = [m for m in members if not r.org.is_active(m)]
            if bad:
                return f"error: not active teammates: {','.join(bad)}"
            return r.bus.create_channel(at["ch"], a.name, sorted(set(members) | {a.name}), now)
        return None  # wait / done: handled by the caller

    def _hire(self, r: Rollout, a: Agent, act: Action, now: float) -> str | None:
        name, err = r.org.hire(a.name, act.attrs.get("role", "expert"))
        r.counters["rejected_hires"] = r.org.rejected_hires
        if err:
            return err
        r.counters["hires"] += 1
        self._add_agent(r, name, "expert", now, ready=False)
        r.bus.join(GENERAL, name, now)
        if act.body:  # the optional brief travels as the first direct message (the hire stands if it is refused)
            return self._sent(r, r.bus.send_direct(a.name, name, act.body, now), "direct_messages")
        return None

    def _sent(self, r: Rollout, out: Message | str, counter: str) -> str | None:
        if isinstance(out, str):
            return out
        r.counters[counter] += 1
        r.counters["message_tokens"] += len(encode_text(self.tokenizer, out.text))
        return None

    def _submit(self, r: Rollout, a: Agent, item_s: str, answer: str, now: float) -> str | None:
        """Record a submission; which one decides its item is settled in grading.py."""
        item = self.task.parse_item(r.problem, item_s)
        if item is None:
            return f"error: no item {item_s!r}"
        a.known[item] = answer.strip()
        if item in a.queue:
            a.queue.remove(item)
        if r.workflow is not None and not r.workflow.role(a.role).submits:
            # Not the workflow's answer: a proposal for the roles downstream (graded only for diagnostics).
            r.outputs.setdefault(a.name, {})[item] = answer.strip()
            r.proposals.append({"t": now, "agent": a.name, "item": item,
                                "correct": self.task.grade(r.problem, item, answer).correct})
            return None
        sub = {"t": now, "agent": a.name, "item": item, "answer": answer,
               "seq": sum(s["agent"] == a.name for s in r.submissions)}
        if first_known(r.submissions, sub):  # landed after a graded one: it cannot decide the item
            sub.update(correct=False, score=0.0, status="not_graded")
        else:
            grade = self.task.grade(r.problem, item, answer)
            sub.update(correct=grade.correct, score=grade.score, status=grade.status)
        r.submissions.append(sub)
        if sub["status"] == "infra_error":  # not the agent's fault: counted, and the trainer drops the rollout
            r.counters["infra_errors"] += 1
            return None
        a.outcomes.append(sub)
        apply_settlement(r)
        return None

    def _archive(self, r: Rollout, a: Agent, channel: str, last: int, as_of: float) -> list[str]:
        got = r.bus.read_archive(a.name, channel, last, as_of)
        if isinstance(got, str):  # membership changed since the read was accepted
            r.reject(as_of, a.name, a.turns, f'<read ch="{channel[:40]}"/>', got)
            return [got]
        return [render_message(m, archive=True) for m in got] or [f"#{channel}~ (empty)"]
