"""What a model config's ``model`` names, resolved to what is loaded: the checkpoint's identity.

A name or a path can hold other weights tomorrow (a fine-tuning run saving into the same folder,
a hub branch that moves), so the ``hf`` backend's identity never rests on it alone:

* a **local folder**: a SHA-256 over the name and content digest of every file transformers
  may read from it (:func:`checkpoint_files`: weights, config, tokenizer, chat template,
  custom code), each file's digest computed once per version of the file
  (:mod:`lmaudit.provenance.file_state`). The identity is the folder's name and that digest,
  not its path: the same files elsewhere are the same model, so answers computed on a cluster
  are served on a laptop.
* a **GGUF file** (``model: /path/to/model.gguf``, loaded with transformers' ``gguf_file=``):
  the file's SHA-256 and its name.
* a **hub id**: the commit the requested revision (default ``main``) resolves to now, found
  with ``huggingface_hub.hf_hub_download`` (which reads the local cache's
  ``refs/<revision>`` when offline); tokenizer and model are then loaded at that commit, so
  what is loaded is what is identified.

The embedded model is identified by its GGUF file's published SHA-256 (see
:mod:`lmaudit.backends.hf.embedded`), not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmaudit.backends.hf.load import load_error
from lmaudit.errors import BackendError
from lmaudit.provenance.digest import canonical_json, sha256_text
from lmaudit.provenance.file_state import file_digests

#: Files of a checkpoint folder that loading never reads: documentation and a trainer's state.
_NOT_READ = re.compile(
    r"(README.*|LICEN[CS]E.*|.*\.md|optimizer\.(pt|bin)|scheduler\.pt|rng_state.*\.pth|"
    r"trainer_state\.json|training_args\.bin)",
    re.IGNORECASE,
)
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Checkpoint:
    """A resolved checkpoint: what transformers loads (``path`` at ``load_revision``), what the
    identity names (``name``, ``revision``) and what the audit record shows (``record``)."""

    path: str
    load_revision: str | None
    name: str
    revision: str | None
    record: dict[str, Any] = field(default_factory=dict)
    gguf_file: str | None = None  # a GGUF file in folder ``path``, loaded with ``gguf_file=``


def checkpoint_files(folder: Path) -> list[Path]:
    """The files of ``folder`` a load may read: every regular, non-hidden file at its top level
    but documentation and trainer state, sorted by name."""
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and not _NOT_READ.fullmatch(p.name)
    )


def folder_digest(folder: Path) -> tuple[str, dict[str, dict[str, Any]]]:
    """The folder's content digest and, per file, its size and SHA-256."""
    files = checkpoint_files(folder)
    if not files:
        raise BackendError(f"hf backend: model folder {str(folder)!r} holds no checkpoint files")
    digests = file_digests(files)
    per_file = {p.name: {"size": p.stat().st_size, "sha256": digests[p]} for p in files}
    return sha256_text(canonical_json({k: v["sha256"] for k, v in per_file.items()})), per_file


def hub_commit(repo: str, revision: str | None) -> str:
    """The commit ``revision`` of hub repository ``repo`` resolves to (offline: in the local
    cache); BackendError when it cannot be resolved."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        config = Path(hf_hub_download(repo, "config.json", revision=revision))
    except (OSError, ValueError, EntryNotFoundError) as exc:  # not cached offline, no such repo ...
        raise load_error(repo, exc) from exc
    commit = config.parent.name
    if config.parent.parent.name != "snapshots" or not _COMMIT.fullmatch(commit):
        raise BackendError(
            f"hf backend: model {repo!r} at revision {revision or 'main'!r} resolved to {config}, "
            "not a snapshot of the hub cache; cannot tell which commit it is"
        )
    return commit


def resolve(model: str, revision: str | None) -> Checkpoint:
    """``model`` (a local folder or a hub id) and the configured ``revision``, resolved."""
    folder = Path(model).expanduser()
    if folder.is_file() and folder.suffix.lower() == ".gguf":
        digest = file_digests([folder])[folder]
        found: dict[str, Any] = {"kind": "gguf", "path": str(folder.resolve()), "sha256": digest}
        return Checkpoint(str(folder.parent), None, folder.name, f"sha256:{digest}", found, folder.name)
    if folder.is_dir():
        digest, files = folder_digest(folder)
        name = folder.resolve().name
        found = {"kind": "folder", "path": str(folder.resolve()), "sha256": digest, "files": files}
        return Checkpoint(str(folder), None, name, f"sha256:{digest}", found)
    commit = hub_commit(model, revision)
    record: dict[str, Any] = {"kind": "hub", "repo": model, "requested_revision": revision, "commit": commit}
    return Checkpoint(model, commit, model, commit, record)


def verify(checkpoint: Checkpoint) -> None:
    """Refuse a local folder whose files changed since it was identified (the model was loaded
    from other weights than the identity names)."""
    kind = checkpoint.record.get("kind")
    if kind == "folder":
        digest, _ = folder_digest(Path(checkpoint.path))
    elif kind == "gguf":
        path = Path(checkpoint.record["path"])
        digest = file_digests([path])[path]
    else:
        return
    if digest != checkpoint.record["sha256"]:
        raise BackendError(
            f"hf backend: the files of model {checkpoint.record['path']!r} changed between identifying "
            "and loading it; run again once it is no longer being written"
        )
