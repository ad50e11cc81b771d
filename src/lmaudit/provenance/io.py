"""Atomic file output and careful input: nothing is ever left half-written."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from lmaudit.errors import InputError, StrictJsonError
from lmaudit.provenance.jsoncheck import strict_loads


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def atomic_write_bytes(path: str | Path, data: bytes | Iterable[bytes], *, fsync: bool = True) -> Path:
    """Write ``data`` (bytes, or chunks written as they come) to ``path`` via a temporary
    file in the same folder, then rename.

    Readers see the old file or the new one, never a part: an error while the chunks are made
    leaves no file. ``fsync=False`` keeps the atomicity but skips flushing to disk (for cache
    entries, which are cheap to re-make).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual permissions
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, bytes | bytearray | memoryview):
                fh.write(data)
            else:
                for chunk in data:
                    fh.write(chunk)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:  # a full disk or a size limit: name the file
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise
    return path


def atomic_write_text(path: str | Path, text: str, *, fsync: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)


def dumps_json(obj: Any) -> str:
    """The project's JSON style for human-read files: sorted keys, 2-space indent, newline."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, dumps_json(obj))


def atomic_write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    """One row a line, written as the rows come (none is kept): a lazy ``rows`` streams."""
    lines = (
        (json.dumps(r, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        for r in rows
    )
    return atomic_write_bytes(path, lines)


#: The most bytes lmaudit reads whole from one input file (an item bank, an import, a
#: registration), and the longest line it reads from a JSON Lines file: past this an input is
#: refused instead of being read into memory.
_CHUNK = 1 << 24  # bytes per read of an input file
MAX_INPUT_BYTES = 1 << 30

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(path: Path, mode: int) -> InputError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return InputError(f"{path}: {kind}, not a regular file; inputs are read from regular files only")


def open_input(path: str | Path) -> IO[bytes]:
    """Open an input file for reading, refusing at once (InputError naming it) anything but a
    regular file: a named pipe would block the open, a device (``/dev/zero``) never ends.

    The file is opened non-blocking and checked again on its descriptor, so a path swapped for
    a pipe after the first check cannot block either."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode)
    return os.fdopen(fd, "rb")


def read_input(path: str | Path) -> bytes:
    """The bytes of a regular input file (:func:`open_input`) of at most
    :data:`MAX_INPUT_BYTES`; a larger one is refused, naming the bound."""
    limit = MAX_INPUT_BYTES
    chunks: list[bytes] = []
    total = 0
    with open_input(path) as fh:
        # a buffer of the file's size (one read of the bound would allocate the bound up front),
        # then chunks for a file that grows meanwhile
        want = os.fstat(fh.fileno()).st_size + 1
        while total <= limit and (chunk := fh.read(min(want, limit + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
            want = _CHUNK
    if total > limit:
        raise InputError(f"{path}: larger than {limit:,} bytes, the most lmaudit reads from one input file")
    return b"".join(chunks)


def read_utf8(path: str | Path) -> str:
    """The file's text (:func:`read_input`); InputError naming the file when it is missing, not
    a regular file, too large or not UTF-8."""
    try:
        return read_input(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None


def read_json(path: str | Path) -> Any:
    """The decoded file; InputError naming the file and the line for invalid JSON, or the
    JSON path for a key given twice in one object or a number that is not finite (NaN,
    Infinity)."""
    path = Path(path)
    text = read_utf8(path)
    try:
        return strict_loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    except StrictJsonError as e:
        raise InputError(f"{path}: {e}") from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line; errors name the line (and the
    key given twice or the field holding a non-finite number, as :func:`read_json`)."""
    path = Path(path)
    limit = MAX_INPUT_BYTES
    with open_input(path) as fh:
        for lineno, raw in enumerate(iter(lambda: fh.readline(limit + 1), b""), start=1):
            if len(raw) > limit:
                raise InputError(f"{path}: line {lineno}: longer than {limit:,} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{path}: line {lineno}: not UTF-8 text (byte {e.start})") from None
            if not line.strip():
                continue
            try:
                obj = strict_loads(line)
            except json.JSONDecodeError as e:
                raise InputError(
                    f"{path}: line {lineno}: not valid JSON ({e.msg}, column {e.colno})"
                ) from None
            except StrictJsonError as e:
                raise InputError(f"{path}: line {lineno}: {e}") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}: line {lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def check_fields(
    obj: Mapping[str, Any], where: str, required: Sequence[str] = (), optional: Sequence[str] = ()
) -> None:
    """Refuse an input object, naming ``where``, that lacks a ``required`` field or holds one
    that is neither ``required`` nor ``optional`` (:class:`InputError`)."""
    missing = [k for k in required if k not in obj]
    if missing:
        raise InputError(f"{where}: missing field(s) {missing}")
    unknown = sorted(set(obj) - set(required) - set(optional))
    if unknown:
        raise InputError(
            f"{where}: unknown field(s) {unknown} (allowed: {', '.join([*required, *optional])})"
        )
