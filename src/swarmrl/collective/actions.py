"""Action tags inside agent replies: parsing never raises, whatever the model wrote.

An agent's reply is free text ("thinking", ignored) with action tags in it:

    <msg to="expert-2">text</msg>   <post ch="general">text</post>   <read ch="general" last="5"/>
    <post ch="general" item="A"/>  (the runtime posts the poster's result for A: nothing retyped)
    <hire role="expert"/>  (or <hire role="expert">brief</hire>, <hire role="expert" item="next"/>)
    <fire who="expert-2"/>
    <submit item="3">7</submit>     <wait/>   <done/>   <create ch="name" members="expert-1,expert-2"/>
    <verdict item="C">yes</verdict>   <assign who="worker-1" item="A-C"/>     (fixed workflows only)

`parse_reply` turns a reply into actions plus one short error line per problem; the
runtime shows the errors to the agent as an observation. `render_action` is the inverse,
used to write scripted demonstrations.

Why a hand-written scanner and not an XML parser: model output is mostly prose, and an
XML parser gives up on the whole reply at the first stray `<`. We must keep every valid
action around a broken one and never raise. One compiled regex tokenises the reply; a
small loop pairs open and close tags. The scan is linear in the length of the reply (no
catastrophic backtracking on adversarial input such as 100k characters of `<<<<`): the
repeats in the regex are separated by required characters (`=`, `"`, a name), so a failed
attempt revisits each character a bounded number of times; the catch-all alternative
always matches once a tag name is seen, and no token extends past the next `<` or `>`,
so the scan never retries the same stretch from many starting points. (Possessive quantifiers would say
this more directly but need Python 3.11; the package supports 3.10.)

Bodies are raw text up to the matching close tag: tags inside a body are not actions (a
message that quotes `<wait/>` does not make the sender wait), and an unclosed body tag
swallows the rest of the reply.

Stricter than a bare tag syntax would need: `<submit>` needs `item` (its meaning is the
task's: the runtime asks the task to resolve it), and `last` must be a plain decimal integer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Action:
    kind: str  # "msg" | "post" | "read" | "hire" | "fire" | "submit" | "wait" | "done" | "create"
    attrs: dict[str, str]  # the tag's attributes, as written, e.g. {"to": "expert-2"}
    body: str | None = None  # text between open and close tag (None for self-closing)


@dataclass
class ParseResult:
    actions: list[Action]
    errors: list[str]  # one short line per problem, shown to the agent as an error observation


@dataclass(frozen=True)
class TagSpec:
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    body: str = "none"  # "none" (self-closing only) | "required" | "optional"
    int_attrs: tuple[str, ...] = ()  # attributes whose value must be a decimal integer
    body_unless: str = ""  # a "required" body: with this attribute written, self-closing instead

    def body_rule(self, attrs) -> str:
        """"none" | "required" | "optional" for a tag with these attribute names."""
        return "none" if self.body_unless and self.body_unless in attrs else self.body


SPECS: MappingProxyType[str, TagSpec] = MappingProxyType({
    "msg": TagSpec(required=("to",), body="required"),
    "post": TagSpec(required=("ch",), optional=("item",), body="required", body_unless="item"),
    "read": TagSpec(required=("ch",), optional=("last",), int_attrs=("last",)),
    "hire": TagSpec(required=("role",), optional=("item",), body="optional"),
    "fire": TagSpec(required=("who",)),
    "submit": TagSpec(required=("item",), body="required"),
    "take": TagSpec(required=("item",)),
    "wait": TagSpec(),
    "done": TagSpec(),
    "create": TagSpec(required=("ch",), optional=("members",)),
    # Fixed workflows (workflows/graph.py): an evaluator's verdict, an orchestrator's plan.
    "verdict": TagSpec(required=("item",), body="required"),
    "assign": TagSpec(required=("who", "item")),
})

DEFAULT_READ_LAST = 5  # what `<read ch="x"/>` means; attrs keep only what was written

# ASCII on purpose: `\w` and `\s` are Unicode-aware in Python and would make tag syntax
# depend on the script the model happens to write in.
_WS = r"[ \t\r\n]"
_NAME = r"[A-Za-z][A-Za-z0-9_-]*"
_ATTR = _NAME + _WS + r"*=" + _WS + r'*"[^"<>]*"'
_TOKEN_RE = re.compile(
    "<(?:"
    # </msg>
    "/(?P<close>" + _NAME + ")" + _WS + "*>"
    # <msg to="x">  or  <wait/>
    "|(?P<open>" + _NAME + ")(?P<attrs>(?:" + _WS + "+" + _ATTR + ")*)" + _WS + "*(?P<slash>/?)>"
    # anything else that starts like a tag, up to the next `>` or `<`; `>` is optional so an
    # unterminated tag is still one token (and cannot make the scan quadratic)
    "|(?P<bad>/?" + _NAME + ")[^<>]*(?P<bad_end>>?)"
    ")"
)
_ATTR_RE = re.compile("(" + _NAME + ")" + _WS + r'*=' + _WS + r'*"([^"<>]*)"')
_INT_RE = re.compile(r"[0-9]{1,9}")
_VALUE_RE = re.compile(r'[^"<>]+')


def _short(name: str, limit: int = 24) -> str:
    # Names come from model output and can be 100k characters long.
    return name if len(name) <= limit else name[:limit] + "..."


def _attr_problem(kind: str, spec: TagSpec, pairs: list[tuple[str, str]]) -> str | None:
    """The first problem with a tag's attributes, or None. Shared by parse and render."""
    seen: set[str] = set()
    allowed = spec.required + spec.optional
    for key, value in pairs:
        if key in seen:
            return f'error: <{kind}> repeats attribute "{_short(key)}"'
        seen.add(key)
        if key not in allowed:
            return f'error: <{kind}> has unknown attribute "{_short(key)}"'
        if not value.strip():
            return f'error: <{kind}> attribute "{key}" is empty'
        if key in spec.int_attrs and not _INT_RE.fullmatch(value):
            return f"error: <{kind}> {key} must be an integer"
    for key in spec.required:
        if key not in seen:
            return f'error: <{kind}> needs attribute "{key}"'
    return None


@dataclass
class _Collector:
    """Accumulates the parse; errors are capped so a garbage reply cannot flood the context."""

    max_actions: int
    max_errors: int
    actions: list[Action]
    errors: list[str]
    hidden_errors: int = 0
    full: bool = False  # max_actions reached and exceeded: stop parsing

    def error(self, line: str) -> None:
        if len(self.errors) < self.max_errors:
            self.errors.append(line)
        else:
            self.hidden_errors += 1

    def action(self, action: Action) -> None:
        if len(self.actions) >= self.max_actions:
            self.error(f"error: too many actions (max {self.max_actions})")
            self.full = True
        else:
            self.actions.append(action)


@dataclass
class _OpenBody:
    kind: str
    attrs: dict[str, str] | None  # None: the open tag was already reported, drop the body
    body_start: int


DEFAULT_MAX_ACTIONS = 32  # actions one reply may carry (more is an error, and parsing stops)


def parse_reply(text: str, max_actions: int = DEFAULT_MAX_ACTIONS, max_body_chars: int = 2000,
                max_errors: int = 16) -> ParseResult:
    """Actions in reply order and error lines; never raises on any string."""
    if not isinstance(text, str):
        return ParseResult([], ["error: reply is not text"])
    out = _Collector(max_actions, max_errors, [], [])
    pending: _OpenBody | None = None  # a body tag waiting for its close tag
    forgive: str | None = None  # a close tag whose problem was already reported
    for m in _TOKEN_RE.finditer(text):
        if pending is None:
            pending, forgive = _outside_body(out, m, forgive)
        elif m.group("close") == pending.kind:  # inside a body only the matching close tag means anything
            _end_body(out, pending, text[pending.body_start:m.start()], max_body_chars)
            pending = None
        if out.full:
            break
    if pending is not None:
        out.error(f"error: unclosed <{pending.kind}>")
    if out.hidden_errors:
        out.errors.append(f"error: {out.hidden_errors} more problems not shown")
    return ParseResult(out.actions, out.errors)


def _end_body(out: _Collector, pending: _OpenBody, body: str, max_body_chars: int) -> None:
    """A body tag met its close tag: the action, unless its open tag was already reported."""
    if pending.attrs is None:
        return
    if len(body) > max_body_chars:
        out.error(f"error: <{pending.kind}> body too long (max {max_body_chars} chars)")
    else:
        out.action(Action(pending.kind, pending.attrs, body))


def _outside_body(out: _Collector, m: re.Match,
                  last_forgive: str | None) -> tuple[_OpenBody | None, str | None]:
    """One token outside any body: (the body it opens, the close tag to forgive next)."""
    close, bad = m.group("close"), m.group("bad")
    if close is not None:
        if close != last_forgive:
            out.error(f"error: stray </{_short(close)}>")
        return None, None
    if bad is not None:
        return _malformed_tag(out, m, bad), None
    return _well_formed_tag(out, m, m.group("open"))


def _malformed_tag(out: _Collector, m: re.Match, bad: str) -> _OpenBody | None:
    """Report a tag the regex could not read; the body to skip if one was meant to follow."""
    name = bad.lstrip("/")
    if name not in SPECS:
        if m.group("bad_end") == ">":
            out.error(f"error: unknown action <{_short(name)}>")
        return None
    if bad.startswith("/"):
        out.error(f"error: malformed </{name}>")
        return None
    out.error(f'error: malformed <{name}> tag (write attributes as name="value")')
    body_follows = (m.group("bad_end") == ">"
                    and not m.group(0).endswith("/>") and SPECS[name].body != "none")
    # Skip the body the model meant to write, not parse it as actions.
    return _OpenBody(name, None, m.end()) if body_follows else None


def _well_formed_tag(out: _Collector, m: re.Match,
                     kind: str) -> tuple[_OpenBody | None, str | None]:
    """An open or self-closing tag: (the body it opens, the close tag to forgive next)."""
    spec = SPECS.get(kind)
    self_closing = m.group("slash") == "/"
    if spec is None:
        out.error(f"error: unknown action <{_short(kind)}>")
        return None, (None if self_closing else kind)
    pairs = [(a.group(1), a.group(2)) for a in _ATTR_RE.finditer(m.group("attrs"))]
    problem = _attr_problem(kind, spec, pairs)
    body = spec.body_rule(dict(pairs))
    if self_closing:
        if body == "required":
            problem = problem or f"error: <{kind}> needs a body, like <{kind} ...>text</{kind}>"
        if problem:
            out.error(problem)
        else:
            out.action(Action(kind, dict(pairs)))
        return None, None
    if body == "none":
        if spec.body != "none":  # the body_unless attribute was written
            problem = problem or f'error: <{kind} {spec.body_unless}="..."> takes no text: write <{kind} .../>'
        out.error(problem or f"error: <{kind}> must be self-closing, like <{kind}/>")
        return None, kind
    if problem:
        out.error(problem)
    return _OpenBody(kind, None if problem else dict(pairs), m.end()), None


def render_action(action: Action) -> str:
    """The tag text for an action; parse_reply(render_action(a)).actions == [a].

    Raises ValueError for an action that could not round-trip (this is for scripted
    demonstrations, where a bad action is a programming error, not model output).
    """
    spec = SPECS.get(action.kind)
    if spec is None:
        raise ValueError(f"unknown action kind {action.kind!r}")
    for key, value in action.attrs.items():
        if not isinstance(value, str) or not _VALUE_RE.fullmatch(value):
            raise ValueError(f'attribute {key!r}={value!r} must be non-empty text without " < >')
    problem = _attr_problem(action.kind, spec, list(action.attrs.items()))
    if problem:
        raise ValueError(problem)
    order = [k for k in spec.required + spec.optional if k in action.attrs]
    head = "<" + action.kind + "".join(f' {k}="{action.attrs[k]}"' for k in order)
    body = spec.body_rule(action.attrs)
    if action.body is None:
        if body == "required":
            raise ValueError(f"<{action.kind}> needs a body")
        return head + "/>"
    if body == "none":
        raise ValueError(f"<{action.kind}> takes no body")
    # Scanning the body alone finds exactly the tokens the parser would see inside it.
    if any(t.group("close") == action.kind for t in _TOKEN_RE.finditer(action.body)):
        raise ValueError(f"body contains </{action.kind}>, which would end it early")
    return f"{head}>{action.body}</{action.kind}>"
