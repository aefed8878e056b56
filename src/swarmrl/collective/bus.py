"""The governed message bus: direct messages, channels, an archive.

RLCR keeps the communication primitives simple, and notes that any shared writable state
is a message board that agents can misuse. So every write here is governed:

- provenance: the sender is always an argument supplied by the runtime, never parsed from
  the message text;
- membership: only members post to a channel, and a channel post reaches an agent's inbox
  only if the agent is a member *when the post is delivered* (a late joiner reads the
  archive instead; a fired agent hears nothing more);
- size and rate limits per message and per sender;
- an audit log of every create, join, leave, send, post, read and rejection.

Time is simulated (seconds, floats). A message sent at `now` is delivered at
`now + latency_s`; `inbox(agent, after, upto)` is how the runtime enforces causality
(a turn starting at t sees exactly the messages delivered at or before t).

Error convention: problems caused by an agent's action (too long, not a member, rate
limit) come back as an `"error: ..."` string for the agent's next observation and are
audited. `BusError` is raised only for runtime bugs (joining a channel that
does not exist).

Policy that is not the bus's business: who may create channels (only the CEO) and whether
a direct message's recipient exists are decided by the runtime with the Org. Channel
members are exactly the names passed in; the runtime adds the creator if it wants it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_CHANNEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")


class BusError(Exception):
    """Misuse of the bus by the runtime (a bug), never an agent's mistake."""


@dataclass(frozen=True)
class Message:
    id: int
    sender: str
    kind: str  # "direct" | "channel"
    to: str | None  # recipient for direct
    channel: str | None  # channel for channel posts
    text: str
    sent_at: float
    deliver_at: float  # sent_at + latency_s


@dataclass
class _Span:
    """One stretch of membership: member during [start, end)."""

    start: float
    end: float = math.inf


@dataclass
class _Channel:
    creator: str
    spans: dict[str, list[_Span]] = field(default_factory=dict)  # member -> membership stretches
    posts: list[Message] = field(default_factory=list)  # in id order

    def member_at(self, member: str, t: float) -> bool:
        return any(s.start <= t < s.end for s in self.spans.get(member, ()))

    def current(self) -> frozenset[str]:
        return frozenset(m for m, spans in self.spans.items() if spans and spans[-1].end == math.inf)


MAX_MESSAGE_CHARS = 500  # longest message body; longer ones are refused, not cut
MAX_MESSAGES_PER_AGENT = 64  # sends and posts one agent may make in a rollout (stops flooding)


class MessageBus:
    def __init__(self, latency_s: float = 0.1, max_message_chars: int = MAX_MESSAGE_CHARS,
                 max_messages_per_agent: int = MAX_MESSAGES_PER_AGENT, max_archive_read: int = 50):
        if latency_s < 0 or max_message_chars < 1 or max_messages_per_agent < 0 or max_archive_read < 1:
            raise ValueError("latency_s must be >= 0 and the limits positive")
        self.latency_s = latency_s
        self.max_message_chars = max_message_chars
        self.max_messages_per_agent = max_messages_per_agent
        # An archive read becomes the reader's next observation; capping it keeps a
        # `last="99999"` from blowing up the context.
        self.max_archive_read = max_archive_read
        self.audit: list[dict] = []
        self._channels: dict[str, _Channel] = {}
        self._messages: list[Message] = []  # every accepted message, in id order
        self._sent: dict[str, int] = {}  # sender -> accepted sends + posts (the rate limit)

    # ---- bookkeeping -------------------------------------------------------------------
    def _log(self, now: float, actor: str, action: str, target: str | None, outcome: str,
             **extra) -> None:
        self.audit.append({"time": now, "actor": actor, "action": action, "target": target,
                           "outcome": outcome, **extra})

    def _reject(self, now: float, actor: str, action: str, target: str | None, error: str) -> str:
        self._log(now, actor, action, target, error)
        return error

    def _text_problem(self, sender: str, text: str) -> str | None:
        if not text.strip():
            return "error: empty message"
        if len(text) > self.max_message_chars:
            return f"error: message too long ({len(text)} chars, max {self.max_message_chars})"
        if self._sent.get(sender, 0) >= self.max_messages_per_agent:
            return f"error: message limit reached (max {self.max_messages_per_agent} per agent)"
        return None

    def _accept(self, sender: str, kind: str, to: str | None, channel: str | None, text: str,
                now: float) -> Message:
        msg = Message(id=len(self._messages), sender=sender, kind=kind, to=to, channel=channel,
                      text=text, sent_at=now, deliver_at=now + self.latency_s)
        self._messages.append(msg)
        self._sent[sender] = self._sent.get(sender, 0) + 1
        return msg

    # ---- membership --------------------------------------------------------------------
    def create_channel(self, name: str, creator: str, members: list[str], now: float) -> str | None:
        """Error text, or None once the channel exists with `members` joined at `now`."""
        if not _CHANNEL_NAME_RE.fullmatch(name):
            return self._reject(now, creator, "create", name[:40],
                                "error: bad channel name (letters, digits, _ . -; at most 32)")
        if name in self._channels:
            return self._reject(now, creator, "create", name, f"error: channel {name} exists")
        self._channels[name] = _Channel(creator=creator)
        unique = list(dict.fromkeys(members))  # dedupe, keep order (deterministic audit)
        self._log(now, creator, "create", name, "ok", members=unique)
        for member in unique:
            self.join(name, member, now)
        return None

    def join(self, channel: str, member: str, now: float) -> None:
        ch = self._channels.get(channel)
        if ch is None:
            raise BusError(f"join: no channel {channel!r}")
        if member in ch.current():
            return
        ch.spans.setdefault(member, []).append(_Span(now))
        self._log(now, member, "join", channel, "ok")

    def leave_all(self, member: str, now: float) -> None:
        """Used when an agent is fired: from `now` on, it receives no channel posts."""
        for name in sorted(self._channels):
            ch = self._channels[name]
            if member in ch.current():
                ch.spans[member][-1].end = now
                self._log(now, member, "leave", name, "ok")

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every accepted message, in id order (for transcripts and tests)."""
        return tuple(self._messages)

    def members(self, channel: str) -> frozenset[str]:
        ch = self._channels.get(channel)
        return ch.current() if ch is not None else frozenset()

    def channels_of(self, member: str) -> list[str]:
        return sorted(n for n, ch in self._channels.items() if member in ch.current())

    @property
    def channels(self) -> list[str]:
        return sorted(self._channels)

    # ---- writing -----------------------------------------------------------------------
    def send_direct(self, sender: str, to: str, text: str, now: float) -> Message | str:
        """The delivered Message, or error text. `sender` comes from the runtime, not the text."""
        if not to:
            return self._reject(now, sender, "direct", to, "error: message needs a recipient")
        if to == sender:
            return self._reject(now, sender, "direct", to, "error: cannot message yourself")
        problem = self._text_problem(sender, text)
        if problem:
            return self._reject(now, sender, "direct", to, problem)
        msg = self._accept(sender, "direct", to, None, text, now)
        self._log(now, sender, "direct", to, "ok", message_id=msg.id, chars=len(text), deliver_at=msg.deliver_at)
        return msg

    def post(self, sender: str, channel: str, text: str, now: float) -> Message | str:
        ch = self._channels.get(channel)
        if ch is None:
            return self._reject(now, sender, "post", channel[:40], f"error: no channel {channel[:40]}")
        if not ch.member_at(sender, now):
            return self._reject(now, sender, "post", channel,
                                f"error: you are not a member of {channel}")
        problem = self._text_problem(sender, text)
        if problem:
            return self._reject(now, sender, "post", channel, problem)
        msg = self._accept(sender, "channel", None, channel, text, now)
        ch.posts.append(msg)
        self._log(now, sender, "post", channel, "ok", message_id=msg.id, chars=len(text), deliver_at=msg.deliver_at)
        return msg

    # ---- reading -----------------------------------------------------------------------
    def read_archive(self, reader: str, channel: str, last: int, now: float) -> list[Message] | str:
        """The last `last` posts of `channel` delivered by `now` (the reader's own included)."""
        ch = self._channels.get(channel)
        if ch is None:
            return self._reject(now, reader, "read", channel[:40], f"error: no channel {channel[:40]}")
        if not ch.member_at(reader, now):
            return self._reject(now, reader, "read", channel, f"error: you are not a member of {channel}")
        if last < 1:
            return self._reject(now, reader, "read", channel, "error: last must be at least 1")
        delivered = sorted((m for m in ch.posts if m.deliver_at <= now),
                           key=lambda m: (m.deliver_at, m.id))
        out = delivered[-min(last, self.max_archive_read):]
        self._log(now, reader, "read", channel, "ok", returned=len(out))
        return out

    def reads(self, agent: str, msg: Message) -> bool:
        """`agent` receives `msg` (its recipient, or a member of its channel when it is delivered)."""
        if msg.sender == agent:
            return False
        if msg.kind == "direct":
            return msg.to == agent
        return self._channels[msg.channel].member_at(agent, msg.deliver_at)

    def inbox(self, agent: str, after: float, upto: float) -> list[Message]:
        """Messages for `agent` with after < deliver_at <= upto, sorted by (deliver_at, id)."""
        got = [m for m in self._messages
               if after < m.deliver_at <= upto and self.reads(agent, m)]
        return sorted(got, key=lambda m: (m.deliver_at, m.id))

    def next_delivery(self, agent: str, after: float) -> float | None:
        """Earliest deliver_at > after of a message inbox() would show `agent`, or None.

        Uses membership as known now; a later leave_all can only remove deliveries.
        """
        times = [m.deliver_at for m in self._messages
                 if m.deliver_at > after and self.reads(agent, m)]
        return min(times) if times else None
