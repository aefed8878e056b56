"""One markdown table from `benchmarks/village_to_city.py` results: per file and team cap, the
team hired (the CEO included) and of it the hires experts made, then items solved at each limit.

    python benchmarks/village_to_city_table.py benchmarks/village_to_city_span/*.json

Files without `rows` (e.g. a scripted-ceilings JSON beside them) are skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def table(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    if "rows" not in data:
        return []
    limits = sorted({r["time_limit_s"] for r in data["rows"]})
    out = [f"**{path.stem}** (`{data['run']}`, overrides {data.get('overrides') or 'none'}; "
           f"{data['problems']} problems of {data['items']} items, wall {data['wall_s']:.0f} s, "
           f"peak RSS {data['peak_rss_mb']:.0f} MB)", "",
           "| team (cap + CEO) | team hired | by experts | " + " | ".join(f"items @ {t:g} s" for t in limits) + " |",
           "|---|---|---|" + "---|" * len(limits)]
    for size in sorted({r["team_size"] for r in data["rows"]}):
        rows = sorted((r for r in data["rows"] if r["team_size"] == size), key=lambda r: r["time_limit_s"])
        last = rows[-1]  # the team as hired by the longest limit
        out.append(f"| {size} | {last['team_size_mean']:.1f} | {last['team_hired_by_experts_per_rollout']:.1f} | "
                   + " | ".join(f"{r['useful_work']:.2f}" for r in rows) + " |")
    return out + [""]


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for arg in sys.argv[1:]:
        print("\n".join(table(Path(arg))))


if __name__ == "__main__":
    main()
