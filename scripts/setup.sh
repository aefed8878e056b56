#!/usr/bin/env bash
# Set up swarmrl in ./.venv on a fresh machine. Idempotent: safe to run again.
# torch is pinned first: an unpinned `torch` would pull a multi-GB CUDA build on a CPU box.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==${SWARMRL_TORCH:-2.13.0}"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
