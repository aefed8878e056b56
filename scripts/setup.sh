#!/usr/bin/env bash
# Set up swarmrl in ./.venv on a fresh machine. Idempotent: safe to run again.
# torch is pinned first: an unpinned `torch` would pull a multi-GB CUDA build on a CPU box.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# The code task runs model-written code in a bubblewrap sandbox (src/swarmrl/sandbox/);
# it also needs prlimit and setpriv (util-linux). Training a code task refuses to start without them.
if ! [ -x /usr/bin/bwrap ] || ! [ -x /usr/bin/prlimit ] || ! [ -x /usr/bin/setpriv ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q >/dev/null && apt-get install -y -q bubblewrap util-linux >/dev/null
  else
    echo "setup: the code-task sandbox needs bubblewrap and util-linux; run as root:" >&2
    echo "         apt-get install -y bubblewrap util-linux" >&2
  fi
fi

# The report tests (tests/report/test_browser.py) open report.html in Debian's chromium, driven
# by Playwright from pip; Playwright's own browser download needs a network this project lacks.
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
  else
    echo "setup: the browser tests need chromium; run as root: apt-get install -y chromium" >&2
  fi
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# pip takes about 13 s to find that nothing changed, which every run of the README's two
# commands would pay: a stamp of what was installed (the files that list the dependencies, this
# script, the torch pin) skips the installs while it matches and the packages are still there,
# swarmrl installed from this checkout's src/ (not from where the repository used to be).
# SWARMRL_SETUP_FORCE=1 reinstalls anyway.
STAMP=.venv/.swarmrl-setup-stamp
WANT="torch==${SWARMRL_TORCH:-2.13.0} $(cat pyproject.toml docs/requirements.txt scripts/setup.sh | sha256sum | cut -c1-16)"
if [ "${SWARMRL_SETUP_FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
   && .venv/bin/python -c "import importlib.metadata as m, importlib.util as u, os, sys; m.version('torch'); \
sys.exit(os.path.realpath(u.find_spec('swarmrl').origin) != os.path.realpath('src/swarmrl/__init__.py'))" 2>/dev/null; then
  exit 0
fi
rm -f "$STAMP"
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==${SWARMRL_TORCH:-2.13.0}"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
# The documentation site (mkdocs.yml) is built by the tests (tests/test_docs.py), so it cannot rot.
.venv/bin/python -m pip install -q --disable-pip-version-check -r docs/requirements.txt
echo "$WANT" > "$STAMP"
