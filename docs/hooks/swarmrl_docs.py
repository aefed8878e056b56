"""MkDocs hook for the swarmrl site: generated and included content, so there is one source.

Markers in a page's Markdown are replaced before it is converted:

- `<!-- swarmrl:config-reference -->`: the config reference, generated from the typed config
  (`swarmrl.config.Config`): every section and field with its type, default and docstring.
  Field docstrings are the string literals written right after each field in the class body
  (src/swarmrl/config_schema.py and the module of every nested section); dataclasses drop
  them at run time, so they are read from the source with `ast`.
- `<!-- swarmrl:include docs/ARCHITECTURE.md -->`: that file, whole;
  `<!-- swarmrl:include docs/ARCHITECTURE.md#6. -->`: only its `##` section whose title starts
  with `6.` (up to the next `##` heading); a trailing ` shift=1` moves its headings one level
  down (`##` -> `###`), so that it nests under the including page's own sections.
- `<!-- swarmrl:api-optional swarmrl.api -->`: an API block (`::: swarmrl.api`) if that module's
  source exists when the site is built, else nothing.

A leaf field without a docstring is a warning, so `mkdocs build --strict` fails on it.
Run this file directly to print the config reference: `python docs/hooks/swarmrl_docs.py`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import logging
import re
import sys
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.swarmrl_docs")

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

CONFIG_MARKER = "<!-- swarmrl:config-reference -->"
INCLUDE_RE = re.compile(r"<!-- swarmrl:include (?P<path>[^#\s]+)(?:#(?P<section>\S+))?(?: shift=(?P<shift>\d))? -->")
API_RE = re.compile(r"<!-- swarmrl:api-optional (?P<module>[\w.]+) -->")


def _import_config():
    """`swarmrl.config` of this checkout (src/ first on the path), installed or not."""
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    import swarmrl.config as config
    return config


# ---------------------------------------------------------------------------- config reference
def field_docstrings(cls: type) -> dict[str, str]:
    """{field name: docstring} for a dataclass: the string literal right after each field."""
    source = Path(inspect.getsourcefile(cls)).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            break
    else:
        raise LookupError(f"class {cls.__name__} not found in {inspect.getsourcefile(cls)}")
    docs: dict[str, str] = {}
    body = node.body
    for stmt, nxt in zip(body, body[1:] + [None]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def _type_name(f: dataclasses.Field) -> str:
    t = f.type
    if isinstance(t, str):  # `from __future__ import annotations`: the annotation as written
        return t
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _fmt_default(value) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if isinstance(value, str):
        return '`""`' if value == "" else f"`{value}`"
    return f"`{value!r}`"


def _is_section(f: dataclasses.Field) -> bool:
    return dataclasses.is_dataclass(_default(f))


def iter_fields(cls: type, prefix: str = ""):
    """Yield (dotted name, Field, owning class) for every leaf field, sections recursively."""
    for f in dataclasses.fields(cls):
        if _is_section(f):
            yield from iter_fields(type(_default(f)), f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f, cls


def _render_leaves(cls: type, prefix: str, level: int, out: list[str], missing: list[str]) -> None:
    docs = field_docstrings(cls)
    for f in dataclasses.fields(cls):
        if _is_section(f):
            continue
        name = f"{prefix}{f.name}"
        doc = docs.get(f.name, "")
        if not doc:
            missing.append(name)
        out.append(f"{'#' * level} `{name}`\n")
        out.append(f"*type* `{_type_name(f)}` · *default* {_fmt_default(_default(f))}\n")
        out.append((doc or "*(no docstring)*") + "\n")


def _render_sections(cls: type, prefix: str, level: int, out: list[str], missing: list[str]) -> None:
    """Each dataclass-valued field of `cls` as a heading at `level`, its fields one level below."""
    for f in dataclasses.fields(cls):
        if not _is_section(f):
            continue
        sub = type(_default(f))
        name = f"{prefix}{f.name}"
        out.append(f"{'#' * level} `{name}`\n")
        intro = inspect.cleandoc(sub.__doc__ or "")
        if intro and not intro.startswith(f"{sub.__name__}("):  # not the dataclass's generated signature
            out.append(intro + "\n")
        out.append(f"Section class `{sub.__module__}.{sub.__qualname__}`; "
                   f"{len(dataclasses.fields(sub))} fields.\n")
        _render_leaves(sub, f"{name}.", level + 1, out, missing)
        _render_sections(sub, f"{name}.", level + 1, out, missing)


def config_reference_markdown() -> tuple[str, list[str]]:
    """The config reference as Markdown, and the dotted names of fields without a docstring."""
    config = _import_config()
    cls = config.Config
    out: list[str] = []
    missing: list[str] = []
    names = [name for name, _, _ in iter_fields(cls)]
    sections = [f.name for f in dataclasses.fields(cls) if _is_section(f)]
    out.append(f"Generated from `{cls.__module__}.{cls.__qualname__}` when this site was built: "
               f"{len(sections)} sections, {len(names)} fields.\n")
    out.append("Top-level fields come first, then one section per heading: "
               + ", ".join(f"`{s}`" for s in sections) + ".\n")
    out.append("## Top level\n")
    _render_leaves(cls, "", 3, out, missing)
    _render_sections(cls, "", 2, out, missing)
    return "\n".join(out), missing


# ---------------------------------------------------------------------------- includes
def _shift_headings(text: str, shift: int) -> str:
    """Demote every Markdown heading by `shift` levels, leaving fenced code (`# comments`) alone."""
    out, fence = [], None
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
        elif fence is None and re.match(r"#{1,6} ", line):
            line = "#" * shift + line
        out.append(line)
    return "\n".join(out) + "\n"


def include_markdown(path: str, section: str | None, shift: int = 0) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    if section:
        lines = text.splitlines()
        start = next((i for i, line in enumerate(lines)
                      if line.startswith("## ") and line[3:].startswith(section)), None)
        if start is None:
            raise LookupError(f"{path}: no '## {section}...' section")
        # the section ends at the next `##` heading outside fenced code
        end, fence = len(lines), False
        for i in range(start + 1, len(lines)):
            if lines[i].lstrip().startswith(("```", "~~~")):
                fence = not fence
            elif not fence and lines[i].startswith("## "):
                end = i
                break
        text = "\n".join(lines[start:end]) + "\n"
    return _shift_headings(text, shift) if shift else text


def api_block(module: str) -> str:
    source = SRC.joinpath(*module.split("."))
    if source.with_suffix(".py").is_file() or (source / "__init__.py").is_file():
        return f"::: {module}\n"
    log.info("API page: %s does not exist yet, left out", module)
    return ""


# ---------------------------------------------------------------------------- MkDocs events
def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    if CONFIG_MARKER in markdown:
        reference, missing = config_reference_markdown()
        for name in missing:
            log.warning("config field '%s' has no docstring (write one right after the field)", name)
        markdown = markdown.replace(CONFIG_MARKER, reference)
    markdown = INCLUDE_RE.sub(lambda m: include_markdown(m["path"], m["section"], int(m["shift"] or 0)),
                          markdown)
    markdown = API_RE.sub(lambda m: api_block(m["module"]), markdown)
    return markdown


if __name__ == "__main__":
    text, missing = config_reference_markdown()
    print(text)
    if missing:
        print("no docstring: " + ", ".join(missing), file=sys.stderr)
        sys.exit(1)
