"""What each action tag does, in words: the tool list of a chat-protocol system message.

One entry per action kind: (syntax, what it does, one example). A scenario with actions of
its own adds entries through `Scenario.tool_docs()`; a kind with no entry is listed with its
syntax from the parser's spec (collective/actions.py SPECS) and no description.
"""

from __future__ import annotations

from swarmrl.collective.actions import SPECS

TOOL_DOCS: dict[str, tuple[str, str, str]] = {
    "submit": ('<submit item="A">answer</submit>', "submit your answer for one item; only answers submitted "
               "before the deadline count", '<submit item="A">7</submit>'),
    "take": ('<take item="A"/>', "put an item (or a range such as A-C) on your desk to work on it next; "
             'item="next" takes the first item no one has taken, and the next one each time your desk empties',
             '<take item="B-D"/>'),
    "msg": ('<msg to="NAME">text</msg>', "send a direct message to one teammate",
            '<msg to="expert-1">Please solve items A and B and post the results.</msg>'),
    "post": ('<post ch="CHANNEL">text</post>', "post to a channel; every member receives it; "
             '<post ch="CHANNEL" item="A"/> posts your result for item A (what you submitted or saw) '
             "without retyping it", '<post ch="general">A=7 B=3</post>'),
    "read": ('<read ch="CHANNEL" last="N"/>', "read the last N posts of a channel's archive (shown next turn)",
             '<read ch="general" last="5"/>'),
    "wait": ("<wait/>", "end your turn and sleep until a message arrives", "<wait/>"),
    "done": ("<done/>", "stop for good: you have nothing left to do", "<done/>"),
    "hire": ('<hire role="expert">brief</hire>', "hire an expert who works in parallel with you; the brief "
             'is its first message; item="C-D" (or item="next", from the board) puts work on its desk, so it '
             "starts without a brief", '<hire role="expert">Solve items C and D, then post them on general.</hire>'),
    "fire": ('<fire who="NAME"/>', "dismiss an expert (it stops at the end of its current turn)",
             '<fire who="expert-2"/>'),
    "create": ('<create ch="NAME" members="a,b"/>', "create a channel with these teammates",
               '<create ch="pair" members="expert-1,expert-2"/>'),
    "verdict": ('<verdict item="A">yes|no</verdict>', "judge the candidate answer of an item",
                '<verdict item="A">no</verdict>'),
    "assign": ('<assign who="NAME" item="A-C"/>', "give a worker an item or a range of items",
               '<assign who="worker-1" item="A-C"/>'),
}


def _fallback(kind: str) -> tuple[str, str, str]:
    spec = SPECS.get(kind)
    attrs = " ".join(f'{a}="..."' for a in (spec.required if spec else ()))
    tag = f"<{kind}{' ' + attrs if attrs else ''}"
    syntax = f"{tag}>text</{kind}>" if spec and spec.body == "required" else f"{tag}/>"
    return syntax, "", syntax


def tool_list(kinds, extra: dict | None = None) -> str:
    """Markdown lines, one per action kind: syntax, what it does, an example."""
    docs = {**TOOL_DOCS, **(extra or {})}
    lines = []
    for kind in kinds:
        syntax, what, example = docs.get(kind) or _fallback(kind)
        lines.append(f"- `{syntax}`" + (f": {what}" if what else "") + (f". Example: `{example}`" if example != syntax else ""))
    return "\n".join(lines)
