"""The shared board (`<take item="next"/>`): items are dealt one at a time, lowest label
first, never one that anyone has taken or submitted, and again each time a desk empties."""

from __future__ import annotations

import pytest

from runtime_helpers import LAT, NO_DEADLINE, encode, make_runtime, problems, run_script, transcript, turns_of

KICKOFF = '<hire role="expert"/><hire role="expert"/><post ch="general">go</post><take item="next"/>'


def desk(turn) -> str:
    """The desk line of a turn's observation (the line before the `>>` cue)."""
    return turn.observation.splitlines()[-2]


def test_board_deals_free_items_in_label_order_and_refills_an_empty_desk():
    r, _ = run_script({
        ("ceo", 0): KICKOFF,                          # the CEO takes A
        ("expert-1", 0): '<take item="next"/>',       # same start as expert-2: names break the tie -> B
        ("expert-2", 0): '<take item="next"/>',       # -> C
        ("expert-1", 1): '<submit item="B">0</submit>',  # desk empties: dealt D, the last free item
        ("expert-2", 1): '<submit item="C">0</submit>',  # nothing left to deal
        ("ceo", 1): '<wait/>',
    }, k=4)
    e1, e2 = turns_of(r, "expert-1"), turns_of(r, "expert-2")
    assert e1[0].start == e2[0].start
    assert (desk(e1[1])[0], desk(e2[1])[0], desk(turns_of(r, "ceo")[1])[0]) == ("B", "C", "A")
    assert desk(e1[2])[0] == "D"
    assert desk(e2[2]) == "(no items left)"
    assert r.claimed == {1, 2, 3, 4}
    assert r.counters["invalid_actions"] == 0


def test_board_skips_items_taken_by_name_and_items_already_submitted():
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert"/><post ch="general">go</post><take item="A-B"/>',
        ("expert-1", 0): '<take item="next"/>',       # A and B are taken by name -> C
        ("expert-1", 1): '<submit item="D">0</submit><submit item="C">0</submit>',  # D decided first (wrong or not)
    }, k=4)
    e1 = turns_of(r, "expert-1")
    assert desk(e1[1])[0] == "C"
    assert 4 in {s["item"] for s in r.submissions}
    assert desk(e1[2]) == "(no items left)"  # D was submitted (decided) before C emptied the desk


def test_board_with_nothing_free_gives_an_empty_desk_not_an_error():
    r, _ = run_script({
        ("ceo", 0): '<take item="A-D"/><take item="next"/>',
        ("ceo", 1): "<done/>",
    }, k=4)
    ceo = turns_of(r, "ceo")
    assert ceo[0].errors == []
    assert desk(ceo[1])[0] == "A"  # the range stays on the desk, in order


def test_a_hire_with_an_item_starts_on_it_one_message_latency_after_the_hiring_turn():
    """`<hire role="expert" item="next"/>`: the hire is dealt the board's next item at the hire
    and starts when a brief would have arrived, skipping the turn a board expert spends taking."""
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert" item="next"/><hire role="expert" item="C-D"/><take item="next"/>',
        ("expert-1", 0): '<submit item="A">0</submit>',  # A is on its desk: refilled from the board
        ("expert-2", 0): "<wait/>",
    }, k=5)
    ceo, e1, e2 = turns_of(r, "ceo"), turns_of(r, "expert-1"), turns_of(r, "expert-2")
    assert ceo[0].errors == []
    assert e1[0].start == e2[0].start == ceo[0].end + LAT.message_latency_s
    assert desk(e1[0])[0] == "A" and desk(e2[0])[0] == "C" and desk(ceo[1])[0] == "B"
    assert desk(e1[1])[0] == "E"  # A submitted: the board deals the last free item (C, D were named)
    assert r.counters["board_takes"] == 2 and r.counters["hires"] == 2
    assert r.counters["direct_messages"] == 0 and r.counters["invalid_actions"] == 0


def test_a_hire_with_a_bad_item_stands_and_waits_for_a_message():
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert" item="Z"/><msg to="expert-1">A</msg><wait/>',
        ("expert-1", 0): '<take item="A"/>',
    }, k=4)
    ceo, e1 = turns_of(r, "ceo"), turns_of(r, "expert-1")
    assert ceo[0].errors == ["error: no item or range 'Z'"]
    assert r.counters["hires"] == 1
    assert e1[0].start == ceo[0].end + LAT.message_latency_s  # woken by the message, not by the hire
    assert "@ceo: A" in e1[0].observation and "(no items left)" not in e1[0].observation


@pytest.mark.parametrize("hire_on_board", [False, True], ids=["take", "hire-item"])
def test_board_deals_the_same_with_and_without_causal_batching(hire_on_board):
    """Deals follow the turns' start order (the runtime applies a wave in start order), so the
    wave loop and the one-turn-at-a-time reference give the same items to the same agents,
    whether experts take their first item or are hired onto it."""
    think = {"expert-1": "x" * 9, "expert-2": "", "expert-3": "x" * 4}  # different turn lengths
    if hire_on_board:
        script = {("ceo", 0): '<hire role="expert" item="next"/>' * 3 + "<done/>"}
    else:
        script = {("ceo", 0): '<hire role="expert"/>' * 3 + '<post ch="general">go</post><done/>'}
    first = 0 if hire_on_board else 1  # hired onto an item: the first turn already works on it
    for name, pad in think.items():
        if not hire_on_board:
            script[(name, 0)] = pad + '<take item="next"/>'
        for turn in range(first, first + 3):  # submit whatever is on the desk; the board deals again
            script[(name, turn)] = pad * (turn + 1 - first) + '<submit item="{desk}">0</submit>'
    runs = []
    for batching in (True, False):
        rt = make_runtime(batching=batching, k=8)
        (p,) = problems(rt, 1)
        r = rt.new_rollout(0, 0, p, NO_DEADLINE, 3)
        rt.run([r], _DeskActor(script), seed=0)
        assert r.counters["board_takes"] == 3 and r.counters["invalid_actions"] == 0
        assert len({s["item"] for s in r.submissions}) == 8  # every item dealt once
        runs.append(transcript(r))
    assert runs[0] == runs[1]


class _DeskActor:
    """Replies from {(agent, turn): text}, `{desk}` filled with the label of the item in hand."""

    def __init__(self, script: dict):
        self.script = script

    def act(self, requests, seed):
        out = []
        for q in requests:
            text = self.script.get((q.agent.name, q.agent.turns), "<done/>")
            if "{desk}" in text:
                line = q.observation.splitlines()[-2]
                text = text.replace("{desk}", line.split(":")[0]) if ":" in line else "<done/>"
            out.append(encode(text))
        return out
