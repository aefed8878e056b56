"""The rollout's record: every rejection, parse error and delivered message, in to_json."""

from __future__ import annotations

import json

import pytest

from tests.collective.runtime_helpers import run_script, turns_of


def test_audit_records_rejections_messages_and_submissions():
    script = {("ceo", 0): '<hire role="expert">go</hire><msg to="nobody">x</msg><foo/>',
              ("ceo", 1): '<submit item="A">x</submit><done/>'}
    r, _ = run_script(script, k=1)
    e0, e1 = (t.end for t in turns_of(r, "ceo"))
    audit = json.loads(json.dumps(r.to_json()))["audit"]  # what samples/step_N.jsonl stores
    assert [(e["time"], e["actor"], e["action"], e["target"], e["outcome"]) for e in audit] == [
        (0.0, "ceo", "create", "general", "ok"),
        (0.0, "ceo", "join", "general", "ok"),
        (e0, "expert-1", "join", "general", "ok"),
        (e0, "ceo", "direct", "expert-1", "ok"),
        (e0, "ceo", "reply", None, "error: unknown action <foo>"),
        (e0, "ceo", '<msg to="nobody">x</msg>', None, "error: no active teammate named 'nobody'"),
        (e1, "ceo", "submit", "A", "error: item A: wrong answer"),
    ]
    assert audit[3]["deliver_at"] == pytest.approx(e0 + 0.1) and audit[3]["message_id"] == 0
    assert audit[4]["turn"] == 1 and audit[5]["turn"] == 1  # the CEO's first turn


def test_rejections_from_the_org_and_the_bus_are_audited():
    script = {("ceo", 0): '<hire role="expert"/><hire role="expert"/><post ch="nowhere">hi</post>'}
    r, _ = run_script(script, max_experts=1)
    end = turns_of(r, "ceo")[0].end
    got = [(e["actor"], e["turn"], e["action"], e["outcome"]) for e in r.to_json()["audit"] if "turn" in e]
    assert got == [("ceo", 1, '<hire role="expert"/>', "error: team is full (max 1 experts)"),
                   ("ceo", 1, '<post ch="nowhere">hi</post>', "error: no channel nowhere")]
    assert all(e["time"] == end for e in r.rejections)
