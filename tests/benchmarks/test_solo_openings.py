"""benchmarks/solo_openings.py: a single agent's first replies, folded and counted, by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace as NS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # its sibling team_losses.py, as when run as a script
spec = importlib.util.spec_from_file_location("solo_openings", ROOT / "benchmarks" / "solo_openings.py")
solo_openings = importlib.util.module_from_spec(spec)
spec.loader.exec_module(solo_openings)


def _rollout(first_reply: str | None, solved: int):
    turns = [] if first_reply is None else [NS(reply=first_reply)]
    return NS(turns=turns, solved={i: 1.0 for i in range(solved)})


def test_single_item_labels_fold_and_ranges_stay():
    assert solo_openings.opening('<take item="C"/>') == '<take item="X"/>'
    assert solo_openings.opening('<take item="AB"/><take item="D"/>') == '<take item="X"/><take item="X"/>'
    assert solo_openings.opening('<take item="A-L"/>') == '<take item="A-L"/>'
    assert solo_openings.opening("x" * 100, width=10) == "x" * 10


def test_openings_count_share_and_items_by_hand():
    rollouts = [_rollout('<take item="A-L"/>', 11), _rollout('<take item="A-L"/>', 10),
                _rollout('<take item="B"/>', 1), _rollout(None, 0)]
    got = solo_openings.openings(rollouts)
    assert list(got) == ['<take item="A-L"/>', '<take item="X"/>', "(no turn)"]  # most rollouts first
    assert got['<take item="A-L"/>'] == {"rollouts": 2, "share": 0.5, "items_solved_mean": 10.5}
    assert got['<take item="X"/>'] == {"rollouts": 1, "share": 0.25, "items_solved_mean": 1.0}
    assert got["(no turn)"]["items_solved_mean"] == 0.0
