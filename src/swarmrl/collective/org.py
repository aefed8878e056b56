"""The org: a CEO who hires and fires experts (RLCR: "a CEO can hire and fire up to 8").

The team size is a decision the policy learns, so the org only enforces the rules:
only the CEO hires (unless `manager_hires` lets every expert hire that many of its own, or
`span` makes a two-level tree: hierarchies, for teams larger than one hiring turn can staff)
and only the CEO fires, at most `max_experts` experts are active at once, in the whole tree,
at most `max_hires` hires in all (re-hires after a fire included: without it, a fire/hire loop
makes a new agent, with its own context, every two actions), and names
are never reused (a fired expert-2 stays fired, and the next hire is expert-3, so
messages and logs can never be confused between the two).

Errors are returned as "error: ..." text for the CEO's next observation, not raised:
they come from model output (invariant 6).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ROLE_RE = re.compile(r"[a-z][a-z0-9_]{0,23}")


@dataclass
class Org:
    ceo: str = "ceo"
    max_experts: int = 8
    # Roles a hire may ask for. RLCR has one ("expert"); names are "<role>-<n>".
    roles: tuple[str, ...] = ("expert",)
    max_hires: int | None = None  # hires per rollout, re-hires included (None: no cap)
    manager_hires: int = 0  # hires each expert may make (0: only the CEO hires)
    # A span of control (0: off): the CEO hires at most `span` experts itself, and the i-th of them
    # hires its near-equal share of the rest of the cap (`quota`), so that every agent's quota stays
    # at most `span` however large the cap: a tree trained under a small cap reads the same
    # numbers under a large one. Their own hires do not hire.
    span: int = 0
    # State below is not a constructor argument: an org always starts with the CEO alone.
    fired: set[str] = field(default_factory=set, init=False)
    hired_total: int = field(default=0, init=False)
    peak_size: int = field(default=1, init=False)  # largest size() so far, the CEO included
    rejected_hires: int = field(default=0, init=False)  # hires refused because max_hires was reached
    _experts: dict[str, str] = field(default_factory=dict, init=False)  # name -> role, hire order
    _next_index: dict[str, int] = field(default_factory=dict, init=False)  # role -> last number used
    _boss: dict[str, str] = field(default_factory=dict, init=False)  # hire -> who hired it

    def __post_init__(self) -> None:
        bad = [r for r in self.roles if not _ROLE_RE.fullmatch(r)]
        if (bad or self.max_experts < 0 or (self.max_hires is not None and self.max_hires < 0)
                or self.manager_hires < 0 or self.span < 0 or (self.span and self.manager_hires)):
            raise ValueError(f"bad org settings: roles {bad}, max_experts {self.max_experts}, "
                             f"max_hires {self.max_hires}, manager_hires {self.manager_hires}, span {self.span}")

    def hire(self, by: str, role: str = "expert") -> tuple[str | None, str | None]:
        """(new name, None), or (None, error text)."""
        if by != self.ceo:
            if not (self.manager_hires or self.span):
                return None, "error: only the CEO can hire"
            if not self.is_active(by):
                return None, "error: only active teammates can hire"
        if by != self.ceo or self.span:
            if not (quota := self.quota(by)):
                return None, "error: you have no hires to make"
            if sum(b == by for b in self._boss.values()) >= quota:
                return None, f"error: you have made your {quota} hires"
        if role not in self.roles:
            return None, f'error: unknown role "{role[:24]}" (roles: {", ".join(self.roles)})'
        if self.max_hires is not None and self.hired_total >= self.max_hires:
            self.rejected_hires += 1
            return None, f"error: hire limit reached (max {self.max_hires} hires per rollout)"
        if self.size() - 1 >= self.max_experts:
            return None, f"error: team is full (max {self.max_experts} experts)"
        n = self._next_index.get(role, 0) + 1
        self._next_index[role] = n
        name = f"{role}-{n}"
        self._experts[name] = role
        self._boss[name] = by
        self.hired_total += 1
        self.peak_size = max(self.peak_size, self.size())
        return name, None

    def fire(self, by: str, who: str) -> str | None:
        """None, or error text."""
        if by != self.ceo:
            return "error: only the CEO can fire"
        if who not in self._experts or who in self.fired:
            return f"error: no active expert named {who[:40]}"
        self.fired.add(who)
        return None

    def quota(self, name: str) -> int:
        """Hires `name` may make in all: the cap for a flat org's CEO, `manager_hires` for every
        expert under that hierarchy; under a span, min(cap, span) for the CEO and, for the CEO's
        i-th hire, the i-th near-equal share of what is left of the cap (first ones larger:
        cap 16, span 8 -> 8 hires of 1 each; cap 12 -> 1, 1, 1, 1, 0, 0, 0, 0), else 0."""
        if not self.span:
            return self.max_experts if name == self.ceo else self.manager_hires
        top = min(self.max_experts, self.span)
        if name == self.ceo:
            return top
        direct = [n for n, b in self._boss.items() if b == self.ceo]  # hire order
        i = direct.index(name) if name in direct else top  # not the CEO's hire: no quota
        if i >= top:
            return 0
        base, extra = divmod(self.max_experts - top, top)
        return base + (1 if i < extra else 0)

    def boss_of(self, name: str) -> str | None:
        """Who hired `name` (the CEO, or a manager under `manager_hires`); None for the CEO."""
        return self._boss.get(name)

    def is_active(self, name: str) -> bool:
        return name == self.ceo or (name in self._experts and name not in self.fired)

    def active(self) -> list[str]:
        """The CEO first, then active experts in hire order."""
        return [self.ceo] + [n for n in self._experts if n not in self.fired]

    def role_of(self, name: str) -> str | None:
        """"ceo", the role an expert was hired as (fired ones too), or None for a stranger."""
        return "ceo" if name == self.ceo else self._experts.get(name)

    def size(self) -> int:
        return 1 + sum(1 for n in self._experts if n not in self.fired)
