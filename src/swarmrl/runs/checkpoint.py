"""Atomic, verified checkpoints: weights, optimizer, RNG and data position.

Layout of one checkpoint::

    run_dir/checkpoints/step_N/
        <group>.safetensors     one per tensor group ("policy", later per-role adapters)
        optim_<group>.pt        torch optimizer state_dict, one per optimizer group
        state.json              JSON extra state (rng, data position, curriculum) + "step"
        manifest.json           written LAST: name, size, sha256 of every file above

Why this much ceremony: a resumed run equals a straight run only if a resume never
silently picks up a half-written or bit-rotted checkpoint. So every file is first written
into a hidden temp dir, fsynced, and the dir is renamed into place in one step; a reader
trusts a checkpoint only if its manifest exists and every hash matches.
"""

from __future__ import annotations

import base64
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from swarmrl.runs.manifest import (FORMAT_VERSION, CheckpointError, file_entries, fsync_dir,
                                   fsync_file, pid_alive, read_json, temp_owner, verify_files,
                                   write_json)

MANIFEST = "manifest.json"
STATE = "state.json"
_STEP_DIR = re.compile(r"^step_(\d+)$")
# Group names become file names; keep them boring so no group can escape the directory.
_GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


@dataclass
class Checkpoint:
    step: int
    tensors: dict[str, dict[str, torch.Tensor]]  # group -> state dict (CPU tensors)
    optimizers: dict[str, dict]  # group -> optimizer.state_dict()
    state: dict  # JSON extra state, includes "step"
    path: Path


# --------------------------------------------------------------------------- writing


def _checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def _check_group(name: str) -> None:
    if not isinstance(name, str) or not _GROUP_NAME.match(name):
        raise ValueError(
            f"checkpoint group name {name!r} must match {_GROUP_NAME.pattern} "
            "(it becomes a file name)"
        )


def _snapshot_tensors(group: str, sd: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Detached, contiguous CPU copies.

    The copy matters for tied weights: safetensors refuses two names that share storage
    (e.g. tied embedding / lm_head). Separate copies save both names; on load,
    `load_state_dict` writes the same values into the one shared parameter twice.
    """
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if not isinstance(v, torch.Tensor):
            raise TypeError(
                f"checkpoint group {group!r}: value for {k!r} is {type(v).__name__}, "
                "not a tensor; put non-tensor state in `state`"
            )
        out[k] = v.detach().to("cpu", copy=True).contiguous()
    return out


def _on_cpu(tree: Any) -> Any:
    """An optimizer state_dict with every tensor on the CPU: the file then loads on a machine
    without the learner's GPU, and `Optimizer.load_state_dict` moves the state to wherever the
    parameters live (so a checkpoint resumes on a GPU or the CPU alike)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu()
    if isinstance(tree, dict):
        return {k: _on_cpu(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_on_cpu(v) for v in tree)
    return tree


def save_checkpoint(
    run_dir: Path,
    step: int,
    tensors: dict[str, dict[str, torch.Tensor]],
    optimizers: dict[str, dict],
    state: dict,
) -> Path:
    """Write checkpoint `step` atomically and return its directory `checkpoints/step_N`.

    A crash at any point leaves either the old `step_N` (if any) or the new complete one,
    never a partial `step_N`: readers only ever see renamed, manifest-complete dirs.
    """
    step = int(step)
    if step < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    for name in list(tensors) + list(optimizers):
        _check_group(name)

    ckpt_root = _checkpoints_dir(run_dir)
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = ckpt_root / f"step_{step}"
    tmp = ckpt_root / f".tmp_step_{step}_{os.getpid()}"
    old = ckpt_root / f".old_step_{step}_{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()

    try:
        _write_contents(tmp, step, tensors, optimizers, state)
        _swap_into_place(tmp, final, old)
        fsync_dir(ckpt_root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _write_contents(tmp: Path, step: int, tensors: dict[str, dict[str, torch.Tensor]],
                    optimizers: dict[str, dict], state: dict) -> None:
    """Every file of the checkpoint into `tmp`, each fsynced, the manifest last."""
    files: list[str] = []
    for group, sd in tensors.items():
        name = f"{group}.safetensors"
        save_file(_snapshot_tensors(group, sd), str(tmp / name), metadata={"group": group})
        fsync_file(tmp / name)
        files.append(name)
    for group, osd in optimizers.items():
        name = f"optim_{group}.pt"
        with open(tmp / name, "wb") as f:
            torch.save(_on_cpu(osd), f)
            f.flush()
            os.fsync(f.fileno())
        files.append(name)
    write_json(tmp / STATE, {**state, "step": step})
    files.append(STATE)

    manifest = {
        "format_version": FORMAT_VERSION,
        "step": step,
        "tensor_groups": list(tensors),
        "optimizer_groups": list(optimizers),
        "files": file_entries(tmp, files),
    }
    write_json(tmp / MANIFEST, manifest)  # last: its presence means "complete"
    fsync_dir(tmp)


def _swap_into_place(tmp: Path, final: Path, old: Path) -> None:
    """Rename `tmp` to `final`; an existing `final` survives if the swap fails."""
    if not final.exists():
        os.rename(tmp, final)
        return
    # os.rename cannot replace a non-empty dir, so move the existing one aside first
    # and put it back if the swap fails.
    if old.exists():
        shutil.rmtree(old)
    os.rename(final, old)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(old, final)
        raise
    shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- reading


def _verify_manifest(path: Path) -> dict:
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise CheckpointError(f"partial checkpoint: {mpath} missing")
    manifest = read_json(mpath)
    verify_files(path, manifest, mpath)
    return manifest


def load_checkpoint(path: Path) -> Checkpoint:
    """Load and verify a `checkpoints/step_N` directory; raise CheckpointError if unsound."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory not found: {path}")
    manifest = _verify_manifest(path)

    tensors: dict[str, dict[str, torch.Tensor]] = {}
    for group in manifest.get("tensor_groups", []):
        fpath = path / f"{group}.safetensors"
        try:
            tensors[group] = load_file(str(fpath), device="cpu")
        except Exception as e:
            raise CheckpointError(f"corrupt checkpoint file {fpath}: {e}") from e

    optimizers: dict[str, dict] = {}
    for group in manifest.get("optimizer_groups", []):
        fpath = path / f"optim_{group}.pt"
        try:
            # weights_only=True: standard optimizer state (tensors, numbers, lists, dicts)
            # loads without unpickling arbitrary objects from a possibly foreign file.
            optimizers[group] = torch.load(fpath, map_location="cpu", weights_only=True)
        except Exception as e:
            raise CheckpointError(f"corrupt checkpoint file {fpath}: {e}") from e

    spath = path / STATE
    state = read_json(spath)
    if not isinstance(state, dict) or "step" not in state:
        raise CheckpointError(f"corrupt checkpoint file {spath}: no 'step' entry")
    return Checkpoint(
        step=int(state["step"]), tensors=tensors, optimizers=optimizers, state=state, path=path
    )


def _step_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    root = _checkpoints_dir(run_dir)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = _STEP_DIR.match(p.name)  # hidden .tmp_/.old_ dirs never match
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """Highest `step_N` that has a manifest (cheap check; load_checkpoint verifies hashes)."""
    for _, p in reversed(_step_dirs(run_dir)):
        if (p / MANIFEST).is_file():
            return p
    return None


def prune_checkpoints(run_dir: Path, keep_last: int | None) -> list[Path]:
    """Delete all but the newest `keep_last` complete checkpoints; return what was removed.

    Partial `step_N` dirs older than the newest complete one and temp dirs left by dead
    processes are removed too (they can never become complete). `None` keeps everything.
    """
    if keep_last is None:
        return []
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1 or None, got {keep_last}")
    dirs = _step_dirs(run_dir)
    complete = [(s, p) for s, p in dirs if (p / MANIFEST).is_file()]
    keep = {p for _, p in complete[-keep_last:]}
    newest = complete[-1][0] if complete else None
    removed = []
    for s, p in dirs:
        if p in keep:
            continue
        is_partial = not (p / MANIFEST).is_file()
        if is_partial and (newest is None or s > newest):
            continue  # may be a checkpoint being written right now by someone else
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    root = _checkpoints_dir(run_dir)
    for p in root.iterdir() if root.is_dir() else []:
        pid = temp_owner(p.name)
        if pid is not None and pid != os.getpid() and not pid_alive(pid):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def newest_valid_checkpoint(run_dir: Path, log=print) -> Checkpoint | None:
    """Load the newest checkpoint that verifies; a corrupt newer one is skipped with a warning
    through `log` (it costs re-running its steps, which a resume reproduces exactly)."""
    for _, p in reversed(_step_dirs(run_dir)):
        if not (p / MANIFEST).is_file():
            continue  # never complete: not a candidate (save renames only finished dirs)
        try:
            return load_checkpoint(p)
        except CheckpointError as e:
            log(f"warning: skipping checkpoint {p.name}: {e}")
    return None


# --------------------------------------------------------------------------- RNG


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.numpy().tobytes()).decode("ascii")


def _unb64(s: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8).clone()


def capture_rng() -> dict:
    """JSON-safe snapshot of python `random`, numpy's global and torch's CPU/CUDA RNGs."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    out = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available():
        out["cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return out


def restore_rng(d: dict) -> None:
    """Inverse of capture_rng. CUDA states are restored only when the device count matches."""
    version, internal, gauss = d["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = d["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(_unb64(d["torch"]))
    cuda = d.get("cuda")
    if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all([_unb64(s) for s in cuda])
