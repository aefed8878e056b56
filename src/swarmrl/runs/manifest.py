"""File manifests (name, size, sha256) and the durable-write helpers shared by run artifacts.

A directory is trusted only if its manifest exists and every listed file matches it; the
manifest is written last, inside a hidden temp directory that is then renamed into place,
so a crash can never leave a directory that passes verification but is incomplete.

Temp names carry the writer's PID (`.NAME.tmp_PID`, `.NAME.old_PID`, and the checkpoint
forms `.tmp_step_N_PID`, `.old_step_N_PID`) so that leftovers of a killed process can be
told apart from the work of a live one and removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

FORMAT_VERSION = 1
# The manifest of a run's model/ and final/; its own name so that a model dir is never taken
# for a checkpoint dir (those hold manifest.json).
POLICY_MANIFEST = "swarmrl_manifest.json"
_TEMP_NAME = re.compile(r"^\.(?:.+\.(?:tmp|old)|(?:tmp|old)_step_\d+)_(\d+)$")


class CheckpointError(Exception):
    """A checkpoint or saved model is missing, partial or corrupt. The message names the file."""


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    # Directory fsync makes a rename itself durable; not every platform allows it.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def weights_digest(dirs: list[Path]) -> str:
    """One sha256 over every `.safetensors` file under `dirs` (names relative to their dir, and
    contents): what identifies the weights a result was computed from. A path or cache key does
    not: the same warm-start key trains other weights on a CPU that rounds differently."""
    h = hashlib.sha256()
    for d in dirs:
        for f in sorted(Path(d).rglob("*.safetensors")):
            h.update(f"{f.relative_to(d)}:{sha256(f)};".encode())
    return h.hexdigest()


def write_json(path: Path, obj: Any) -> None:
    # allow_nan=False: manifests and state must be strict JSON so any tool can read them.
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, allow_nan=False)
        f.flush()
        os.fsync(f.fileno())


def read_json(path: Path, what: str = "checkpoint") -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"corrupt {what} file {path}: {e}") from e


def file_entries(directory: Path, names: list[str]) -> list[dict]:
    return [{"name": n, "size": (directory / n).stat().st_size, "sha256": sha256(directory / n)}
            for n in names]


def verify_files(directory: Path, manifest: dict, mpath: Path, what: str = "checkpoint") -> None:
    """Every file the manifest lists exists with its size and hash; else CheckpointError."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise CheckpointError(f"corrupt {what} file {mpath}: no 'files' entry")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"unsupported {what} format {version!r} in {mpath} (expected {FORMAT_VERSION})")
    for entry in manifest["files"]:
        fpath = directory / entry["name"]
        if not fpath.is_file():
            raise CheckpointError(f"corrupt {what}: file {fpath} listed in manifest is missing")
        size = fpath.stat().st_size
        if size != entry["size"]:
            raise CheckpointError(
                f"corrupt {what} file {fpath}: size {size} != {entry['size']} in manifest")
        if sha256(fpath) != entry["sha256"]:
            raise CheckpointError(f"corrupt {what} file {fpath}: sha256 mismatch")


def write_with_manifest(directory: Path, fill: Callable[[Path], None], manifest_name: str,
                        extra: dict | None = None) -> None:
    """`fill(directory)` writes the files; then they are fsynced and the manifest of all of
    them is written last. `directory` must be a private temp dir: see `move_into_place`."""
    fill(directory)
    names = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name != manifest_name)
    for n in names:
        fsync_file(directory / n)
    write_json(directory / manifest_name, {"format_version": FORMAT_VERSION, **(extra or {}),
                                           "files": file_entries(directory, names)})
    fsync_dir(directory)


def move_into_place(tmp: Path, final: Path) -> None:
    """Rename the complete dir `tmp` to `final`, replacing an existing `final`. A crash
    leaves the old `final`, the new one, or none (and a stale temp); never a mix."""
    old = final.with_name(f".{final.name}.old_{os.getpid()}")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.rename(final, old)  # rename cannot replace a non-empty dir
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)
    fsync_dir(final.parent)


def write_dir_atomically(final: Path, fill: Callable[[Path], None], manifest_name: str,
                         extra: dict | None = None) -> Path:
    """Build directory `final` in a hidden sibling temp dir, then move it into place."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp_{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        write_with_manifest(tmp, fill, manifest_name, extra)
        move_into_place(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temp_owner(name: str) -> int | None:
    """The PID in a swarmrl temp name, or None if `name` is not one."""
    m = _TEMP_NAME.match(name)
    return int(m.group(1)) if m else None


def remove_stale_temps(directory: Path, prefix: str = ".") -> list[Path]:
    """Remove temp files/dirs under `directory` whose writer is no longer running (or is this
    process: a caller starts or resumes a run before writing anything, so any temp with our
    own PID is a leftover of an earlier, failed attempt in this process)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for p in directory.iterdir():
        pid = temp_owner(p.name)
        if pid is None or not p.name.startswith(prefix):
            continue
        if pid == os.getpid() or not pid_alive(pid):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed
