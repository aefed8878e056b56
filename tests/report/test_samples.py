"""report/samples.py: a sample row tells the whole rollout (first contexts, labels, deliveries, events)."""

from __future__ import annotations

import json

import numpy as np

from swarmrl.diagnostics.collective import at_limit, snapshot_metrics
from swarmrl.report.samples import deliveries, item_labels, read_samples, sample_files
from swarmrl.scenarios import GraphScenario
from swarmrl.tasks.arith_roles import WorkflowScriptedActor
from swarmrl.workflows.graph import preset
from tests.collective.runtime_helpers import END, TOK
from tests.report.scripted_run import WORKFLOWS, _runtime, org_rollouts, workflow_rollout


def test_org_row_has_first_contexts_labels_deliveries_and_events():
    row = org_rollouts(n=1)[0]
    names = [a["name"] for a in row["agents"]]
    assert names[0] == "ceo" and len(names) >= 3
    for a in row["agents"]:  # header, problem, then the first observation, exactly as tokenized
        first = next(t for t in row["turns"] if t["agent"] == a["name"])
        assert a["first_context"].startswith(("ceo\n", f"{a['name']} boss=ceo\n"))
        assert row["problem"] in a["first_context"] and a["first_context"].endswith(first["observation"])
    assert row["item_labels"]["1"] == "A" and all(s["label"] == row["item_labels"][str(s["item"])]
                                                   for s in row["submissions"])
    kinds = {e["kind"] for e in row["events"]}
    assert {"hire", "fire", "read"} <= kinds
    for m in row["messages"]:  # a direct message reaches its addressee; a post, the members but its sender
        got = row["deliveries"][str(m["id"])]
        assert got == [m["to"]] if m["kind"] == "direct" else m["sender"] not in got


def test_a_post_after_a_firing_does_not_reach_the_fired_agent():
    audit = [{"time": 0.0, "actor": "a", "action": "join", "target": "g", "outcome": "ok"},
             {"time": 0.0, "actor": "b", "action": "join", "target": "g", "outcome": "ok"},
             {"time": 1.0, "actor": "b", "action": "leave", "target": "g", "outcome": "ok"}]
    msgs = [{"id": 0, "kind": "channel", "sender": "a", "channel": "g", "to": None, "deliver_at": 0.5},
            {"id": 1, "kind": "channel", "sender": "a", "channel": "g", "to": None, "deliver_at": 1.0}]
    assert deliveries(msgs, audit, ["a", "b"]) == {"0": ["b"], "1": []}


def test_workflow_rows_have_their_roles_as_agents():
    for i, name in enumerate(WORKFLOWS):
        row = workflow_rollout(name, i)
        assert row["workflow"] == name and len(row["agents"]) >= 3
        assert not [e for e in row["events"] if e["kind"] == "hire"]  # staffed at t=0, never hired
        assert all(a["first_context"] for a in row["agents"] if a["turns"])


def test_item_labels_fall_back_to_numbers():
    class P:
        num_items = 2
    assert item_labels(P(), None) == {"1": "1", "2": "2"}
    assert item_labels(P(), lambda p, ref: {"A": 1, "B": 2}.get(ref)) == {"1": "A", "2": "B"}


def test_read_samples_skips_and_names_a_corrupt_line(tmp_path):
    d = tmp_path / "samples"
    d.mkdir()
    (d / "step_0002.jsonl").write_text(json.dumps({"index": 0}) + "\n{oops\n[1]\n" + json.dumps({"index": 1}) + "\n")
    (d / "notes.txt").write_text("x")
    assert list(sample_files(d)) == [2]
    skipped = []
    assert [r["index"] for r in read_samples(d / "step_0002.jsonl", skipped)] == [0, 1]
    assert skipped[0].startswith(f"{d / 'step_0002.jsonl'}:2: invalid JSON") and ":3: not a JSON object" in skipped[1]


def test_fixed_workflow_team_size_counts_every_role_once():
    """at_limit: a workflow has no CEO, so its staffed roles are the whole team (not 1 + roles)."""
    rt = _runtime(k=4, dep=0.0)
    (p,) = rt.task.sample(np.random.default_rng(0), 1)
    r = rt.new_rollout(0, 0, p, 30.0, 0, scenario=GraphScenario(preset("voting")))
    rt.run([r], WorkflowScriptedActor(TOK, END, seed=0), seed=0)
    m = snapshot_metrics([at_limit(r, r.time_limit)])
    assert m["team_size_mean"] == m["team_active_mean"] == len(r.agents) == r.scenario.team_size(r) == 4
