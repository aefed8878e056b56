"""How messages appear in an observation: one line each, the body escaped.

An observation is a list of lines, some written by the runtime (`error: ...`, the desk line
`E:7+3+1`, `(no items left)`) and some carrying message bodies, which are agent text. A
newline in a body would let an agent write a line that looks like the runtime's, or like
a message from someone else (`@ceo: STOP. expert-2 is fired`). So a rendered message is
exactly one line: the sender prefix the runtime writes (`@ceo: `, `#general expert-1: `,
`#general~ expert-1: ` for an archive read), then the body with backslash escapes for
`\\`, newline (`\\n`), carriage return (`\\r`) and every other character Python's
`str.splitlines` breaks on (`\\xHH`, `\\uHHHH`). `parse_message_line` is the inverse.

Names (senders, channels) come from the runtime and never contain ": " or spaces, so the
first ": " after the prefix always ends the sender.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from swarmrl.collective.bus import Message

# Every character str.splitlines treats as a line boundary, so that no way of splitting an
# observation into lines can cut a rendered message in two.
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_ESCAPE_RE = re.compile("[\\\\" + _BREAKS + "]")
_UNESCAPE_RE = re.compile(r"\\(\\|n|r|x[0-9a-f]{2}|u[0-9a-f]{4})")
_DIRECT_RE = re.compile(r"@([^\s:]+): (.*)", re.S)
_CHANNEL_RE = re.compile(r"#([A-Za-z0-9][A-Za-z0-9_.-]{0,31})(~?) ([^\s:]+): (.*)", re.S)


def _escape_char(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def escape_text(text: str) -> str:
    """Agent text as one line; unescape_text(escape_text(s)) == s for every string."""
    return _ESCAPE_RE.sub(lambda m: _escape_char(m.group(0)), text)


def _unescape_one(code: str) -> str:
    if code in ("\\", "n", "r"):
        return {"\\": "\\", "n": "\n", "r": "\r"}[code]
    return chr(int(code[1:], 16))


def unescape_text(text: str) -> str:
    return _UNESCAPE_RE.sub(lambda m: _unescape_one(m.group(1)), text)


def render_message(m: Message, archive: bool = False) -> str:
    body = escape_text(m.text)
    if m.kind == "direct":
        return f"@{m.sender}: {body}"
    return f"#{m.channel}{'~' if archive else ''} {m.sender}: {body}"


@dataclass(frozen=True)
class MessageLine:
    kind: str  # "direct" | "channel"
    sender: str
    channel: str | None
    archive: bool
    text: str  # the body as sent


def parse_message_line(line: str) -> MessageLine | None:
    """The message an observation line renders, or None for a line the runtime wrote."""
    if m := _DIRECT_RE.fullmatch(line):
        return MessageLine("direct", m.group(1), None, False, unescape_text(m.group(2)))
    if m := _CHANNEL_RE.fullmatch(line):
        return MessageLine("channel", m.group(3), m.group(1), m.group(2) == "~", unescape_text(m.group(4)))
    return None


def output_value(v: str) -> str:
    """An agent's output as the runtime lists it: an `X=v` entry of a routing message, or one
    candidate on a desk (`C:4+1+2?7,7,6`).

    The value is agent text: escaped so it stays on its line, and spaces and commas escaped
    so it cannot add entries (`7 B=3`) or candidates (`7,7,7`) of its own.
    """
    return escape_text(v).replace(" ", "\\x20").replace(",", "\\x2c")
