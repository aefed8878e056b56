"""The documentation site (mkdocs.yml, docs/) builds with warnings as errors, and its generated
pages are complete: the config reference lists every field of every section of
`swarmrl.config.Config`, and the API page renders the registries and protocols."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="mkdocs is not installed (scripts/setup.sh installs docs/requirements.txt)")
pytest.importorskip("material", reason="mkdocs-material is not installed (docs/requirements.txt)")
pytest.importorskip("mkdocstrings_handlers.python",
                    reason="mkdocstrings-python is not installed (docs/requirements.txt)")

from swarmrl.config import Config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _config_field_names(cls: type, prefix: str = "") -> list[str]:
    """Dotted names of every leaf field, sections (dataclass-valued fields) walked recursively."""
    names = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            names += _config_field_names(type(default), f"{prefix}{f.name}.")
        else:
            names.append(f"{prefix}{f.name}")
    return names


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_config_reference_lists_every_field(site):
    html = _page(site, "config")
    names = _config_field_names(Config)
    assert len(names) > 50 and "rl.steps" in names and "detectors.cliff_drop" in names
    missing = [n for n in names if f"<code>{n}</code>" not in html]
    assert not missing, f"config reference lacks fields: {missing}"
    sections = sorted({n.split(".")[0] for n in names if "." in n})
    assert "rl" in sections and "detectors" in sections
    for s in sections:
        assert re.search(rf'<h2 id="{re.escape(s)}"', html), f"no heading for section {s}"
    # docstrings and defaults come through, not only names
    assert "Optimizer steps of RL training" in html and "(no docstring)" not in html


def test_api_page_renders_protocols(site):
    html = _page(site, "api")
    for name in ("Registry", "Scenario", "swarmrl.registry", "swarmrl.scenarios.base", "swarmrl.tasks.base",
                 "swarmrl.build", "Grade"):
        assert name in html, name
    if (ROOT / "src" / "swarmrl" / "api.py").is_file():
        assert 'id="swarmrl.api"' in html


def test_architecture_is_included_and_site_is_offline(site):
    arch = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    first_section = next(line[3:] for line in arch.splitlines() if line.startswith("## "))
    assert first_section in _page(site, "design")
    assert "Add a scenario" in _page(site, "extending")
    external = []
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        external += re.findall(r'<(?:script|link)[^>]*(?:src|href)="(?:https?:)?//[^"]*"', text)
    assert not external, f"pages load external resources: {external[:5]}"
