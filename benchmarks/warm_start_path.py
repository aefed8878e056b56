"""Print the cached warm start's directory for a config, training it first where it is missing.

    WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith [key=value ...])

The benchmark scripts pass it to `--init`. Its ranks (`warmstart.processes`) print their
progress to standard output, so that goes to standard error here and the path alone to output.
"""

from __future__ import annotations

import os
import sys

from swarmrl.api import config_of
from swarmrl.policy.warmstart import warm_start


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path_out = os.dup(1)
    os.dup2(2, 1)  # the ranks inherit descriptor 1: their progress lands on standard error
    path = warm_start(config_of(sys.argv[1], sys.argv[2:]), log=lambda *a, **k: print(*a, file=sys.stderr))
    os.write(path_out, f"{path}\n".encode())


if __name__ == "__main__":
    main()
