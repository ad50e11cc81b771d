"""Gemma's tokenizer on SentencePiece: the token ids of ``tokenizer.json``, without its load.

Gemma's ``tokenizer.json`` is transformers' conversion (``GemmaConverter``) of its SentencePiece
BPE model, ``tokenizer.model``: the same pieces, with the merges the pieces' scores imply.
Building that BPE in ``tokenizers`` takes about 1.3 s for Gemma 3 (514,906 merges); SentencePiece
loads the model it was converted from in about 0.1 s. :class:`SentencePieceEngine` encodes and
decodes as the converted tokenizer does:

* encoding: the text is cut at its added tokens (leftmost, and at a position the longest, as
  ``tokenizers``' added vocabulary matches tokens whose ``lstrip``, ``rstrip``, ``single_word``
  and ``normalized`` are all false); an added token is its id, every other part is
  SentencePiece's encoding of it (no dummy prefix, spaces escaped to "▁", byte fallback);
* decoding: ``tokenizers``' Gemma decoder: each token's string ("▁" read as a space), each run of
  byte pieces ``<0xNN>`` read as UTF-8 (one "\\ufffd" per byte when the run is not valid
  UTF-8), concatenated; ``skip_special_tokens`` drops the special added tokens.

:func:`why_not` says when a checkpoint's files are not that shape (what the converter changes
relative to the pieces, added tokens that are not exactly the control, unknown and
user-defined pieces, equal scores, user-defined pieces inside normal ones, ...), and
:func:`verified` adds a comparison of the two engines on probe texts and id sequences, once
per set of files (its verdict is kept beside them). The equality with ``tokenizers`` holds
where ``tokenizer.json`` is the conversion of ``tokenizer.model``, which only the embedded
model guarantees (lmaudit writes both from the same GGUF, :mod:`lmaudit.backends.embedded`),
so :mod:`lmaudit.backends.hf_load` uses this engine for the embedded model only, when
:func:`verified` passes; tests compare the two on the real tokenizer and on tiny ones.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: what ``tokenizers``' ByteFallback decoder writes for each byte of an invalid UTF-8 run
_REPLACEMENT = "\ufffd"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_FLAGS_FALSE = ("lstrip", "rstrip", "normalized", "single_word")
# SentencePiece's piece kinds (ModelProto.SentencePiece.Type)
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_ADDED_KINDS = (_UNKNOWN, _CONTROL, _USER_DEFINED)
_KIND_NAMES = {_NORMAL: "normal", _BYTE: "byte"}
#: pieces transformers' GemmaConverter marks special whatever their kind
_TURN_MARKERS = frozenset({"<start_of_turn>", "<end_of_turn>"})
#: ids tokenizers accepts (u32)
_ID_LIMIT = 2**32
#: where :func:`verified` keeps its verdict, and the version of what it checks
VERDICT_FILE = "lmaudit-sentencepiece.json"
CHECK_VERSION = 2  # 2: added tokens matched on a character trie, plain parts memoised
#: the end of an added token in :class:`SentencePieceEngine`'s character trie
_END = ""
#: how many distinct plain parts :meth:`SentencePieceEngine.encode_ids` keeps the ids of
MEMO_PARTS = 65_536
#: probe texts (and random id sequences) :func:`verified` compares the two engines on
PROBE_TEXTS = 3000


def _proto(path: Path) -> Any:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    proto.ParseFromString(path.read_bytes())
    return proto


def why_not(model_dir: str | Path, cfg: Mapping[str, Any]) -> str | None:
    """Why :class:`SentencePieceEngine` does not reproduce ``model_dir``'s Gemma tokenizer (whose
    ``tokenizer_config.json`` is ``cfg``), or None."""
    path = Path(model_dir) / "tokenizer.model"
    if cfg.get("tokenizer_class") not in ("GemmaTokenizer", "GemmaTokenizerFast"):
        return f"tokenizer class {cfg.get('tokenizer_class')!r} is not Gemma's"
    if not path.is_file():
        return "no tokenizer.model"
    try:
        proto = _proto(path)
    except ImportError as exc:
        return f"sentencepiece is not importable ({exc})"
    except Exception as exc:  # protobuf's DecodeError and friends
        return f"unreadable tokenizer.model ({exc})"
    spec, norm = proto.trainer_spec, proto.normalizer_spec
    if spec.model_type != 2 or not spec.byte_fallback:
        return "tokenizer.model is not a byte-fallback BPE model"
    if norm.name != "identity" or norm.add_dummy_prefix or norm.remove_extra_whitespaces:
        return "tokenizer.model normalizes text (or adds a dummy prefix)"
    if not norm.escape_whitespaces:
        return "tokenizer.model does not escape spaces"
    if norm.precompiled_charsmap:
        return "tokenizer.model normalizes text (a precompiled character map)"
    # what transformers' GemmaConverter writes into tokenizer.json differently from the pieces
    pieces = [p.piece for p in proto.pieces]
    kinds = [int(p.type) for p in proto.pieces]
    if _UNUSED in kinds:
        return "tokenizer.model has unused pieces"
    if "\t" not in pieces and "<0x09>" in pieces:
        return "tokenizer.model has no tab piece (tokenizer.json would have renamed <0x09> to one)"
    for i, name in enumerate(("pad_token", "eos_token", "bos_token")):
        token = cfg.get(name)
        token = token.get("content") if isinstance(token, Mapping) else token
        if len(pieces) <= i or pieces[i] != token:
            return f"piece {i} of tokenizer.model is not the {name} (tokenizer.json would have it)"
    if spec.unk_id != 3:
        return "tokenizer.model's unknown piece is not id 3 (tokenizer.json's)"
    added = cfg.get("added_tokens_decoder") or {}
    for idx, tok in added.items():
        if any(tok.get(f) for f in _FLAGS_FALSE):
            return f"added token {idx} strips, is normalized or matches single words"
        i = int(idx)
        if not 0 <= i < len(pieces) or pieces[i] != tok.get("content"):
            return f"added token {idx} is not piece {idx} of tokenizer.model"
    # the converter adds the unknown, control and user-defined pieces as added tokens, special
    # but for the user-defined ones (the turn markers are special whatever their kind)
    for i, kind in enumerate(kinds):
        tok = added.get(str(i))
        if kind not in _ADDED_KINDS:
            if tok is not None:
                return f"added token {i} is a {_KIND_NAMES.get(kind, kind)} piece of tokenizer.model"
            continue
        if tok is None:
            return (
                f"piece {i} ({pieces[i]!r}) of tokenizer.model is not an added token in tokenizer_config.json"
            )
        special = kind != _USER_DEFINED or pieces[i] in _TURN_MARKERS
        if bool(tok.get("special")) != special:
            return f"added token {i} should be {'special' if special else 'not special'}, as tokenizer.json has it"
    # equal merges: a BPE merge order is ambiguous where two normal pieces have equal scores, and
    # SentencePiece never merges into a user-defined piece that the merges could reach
    scores = [p.score for p, k in zip(proto.pieces, kinds, strict=True) if k == _NORMAL]
    if len(set(scores)) != len(scores):
        return "tokenizer.model has normal pieces of equal score"
    normal = "\x00".join(p for p, k in zip(pieces, kinds, strict=True) if k == _NORMAL)
    checked: list[str] = []  # a piece containing one of these is in no normal piece either
    for piece in sorted((p for p, k in zip(pieces, kinds, strict=True) if k == _USER_DEFINED), key=len):
        if len(piece) > 1 and not any(c in piece for c in checked):
            if piece in normal:
                return f"user-defined piece {piece!r} is part of a normal piece"
            checked.append(piece)
    return None


def _probe(vocab: Sequence[str], seed: int = 0, n: int = PROBE_TEXTS) -> list[str]:
    """Texts to compare the engines on: random runs of the vocabulary's pieces (with "▁" as a
    space, or as itself), added-token fragments, whitespace runs and characters outside the
    vocabulary, deterministic for a vocabulary."""
    import random

    rng = random.Random(seed)
    sample = rng.sample(list(vocab), min(len(vocab), 4000))
    alphabet = sample + [p.replace("▁", " ") for p in sample]
    alphabet += [" ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "\x00", "▁", "<", ">", "<start_of", "_turn>"]
    alphabet += ["é", "ß", "日本", "🤖", "\u200b", "\u00a0", "\u3000", "ﬁ", "A\u030a", "\U0001f9ec"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(n)]


def _compare(model_dir: Path, cfg: Mapping[str, Any]) -> str | None:
    """The first probe text (or id sequence) the two engines encode (or decode) differently."""
    import random

    from lmaudit.backends.hf_tokenizer import TokenizersEngine

    fast, sp = TokenizersEngine(model_dir), SentencePieceEngine(model_dir, cfg)
    size = int(fast.get_vocab_size(with_added_tokens=True))
    if size != sp.get_vocab_size(with_added_tokens=True):
        return f"vocabulary sizes differ ({size} in tokenizer.json)"
    tokens = [fast.id_to_token(i) for i in range(size)]
    if tokens != [sp.id_to_token(i) for i in range(size)]:
        return "token strings differ from tokenizer.json's"
    texts = _probe([t for t in tokens if t is not None and not _BYTE_PIECE.fullmatch(t)])
    for text, a, b in zip(texts, fast.encode_ids(texts), sp.encode_ids(texts), strict=True):
        if a != b:
            return f"encodes {text!r} differently from tokenizer.json"
    rng = random.Random(1)
    byte_ids = [i for i, t in enumerate(tokens) if t is not None and _BYTE_PIECE.fullmatch(t)]
    seqs = [[i] for i in sorted(sp.added_tokens())]
    seqs += [
        [rng.choice(byte_ids) if byte_ids and rng.random() < 0.5 else rng.randrange(size) for _ in range(8)]
        for _ in range(PROBE_TEXTS)
    ]
    for seq in seqs:
        for skip in (False, True):
            if fast.decode(seq, skip) != sp.decode(seq, skip):
                return f"decodes {seq} differently from tokenizer.json (skip_special_tokens={skip})"
    return None


def _files_digest(model_dir: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for name in ("tokenizer.model", "tokenizer_config.json", "tokenizer.json"):
        path = model_dir / name
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"-")
    return h.hexdigest()


def verified(model_dir: str | Path, cfg: Mapping[str, Any]) -> str | None:
    """Why the SentencePiece engine is not to be used for ``model_dir``, or None: :func:`why_not`,
    then the two engines compared on :data:`PROBE_TEXTS` probe texts, every added token and as
    many random id sequences. The verdict is kept in ``model_dir`` (:data:`VERDICT_FILE`), for
    these files' sha256 and these library versions, so the comparison (about 2 s, and loading
    ``tokenizer.json``) runs once per converted model; a directory that cannot be written to
    runs it every time."""
    import sentencepiece
    import tokenizers

    from lmaudit.provenance.io import atomic_write_text

    model_dir = Path(model_dir)
    key = {
        "check": CHECK_VERSION,
        "files_sha256": _files_digest(model_dir),
        "sentencepiece": str(sentencepiece.__version__),
        "tokenizers": str(tokenizers.__version__),
    }
    path = model_dir / VERDICT_FILE
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(kept, dict) and {k: kept.get(k) for k in key} == key:
            reason = kept.get("why_not")
            return None if reason is None else str(reason)
    except (OSError, ValueError):
        pass
    print(
        f"lmaudit: checking the SentencePiece tokenizer against tokenizer.json (once per model) in {model_dir}",
        file=sys.stderr,
        flush=True,
    )
    reason = why_not(model_dir, cfg)
    if reason is None:
        reason = _compare(model_dir, cfg)
    if reason is not None:
        print(f"lmaudit: using tokenizers for {model_dir}: {reason}", file=sys.stderr, flush=True)
    with contextlib.suppress(OSError):
        atomic_write_text(path, json.dumps({**key, "why_not": reason}, indent=1, sort_keys=True), fsync=False)
    return reason


class SentencePieceEngine:
    """``tokenizer.model`` with the added tokens of ``tokenizer_config.json`` (see the module);
    the subset of ``tokenizers.Tokenizer`` that :class:`~lmaudit.backends.hf_tokenizer.FastTokenizer`
    calls. It does not check that it reproduces ``tokenizer.json``: :func:`verified` does."""

    name = "sentencepiece"

    def __init__(self, model_dir: str | Path, cfg: Mapping[str, Any]) -> None:
        import sentencepiece

        self.version = str(sentencepiece.__version__)
        self._sp = sentencepiece.SentencePieceProcessor(model_file=str(Path(model_dir) / "tokenizer.model"))
        self._size = int(self._sp.get_piece_size())
        self._added: dict[str, int] = {}
        self._flags: dict[int, dict[str, Any]] = {}
        for idx, tok in (cfg.get("added_tokens_decoder") or {}).items():
            self._added[str(tok["content"])] = int(idx)
            self._flags[int(idx)] = dict(tok)
        self._special = {i for i, tok in self._flags.items() if tok.get("special")}
        self._with_added = max([self._size, *(i + 1 for i in self._flags)])
        # the added tokens as a character trie (a node's _END entry: the token ending there), and
        # a character class of their first characters to find where one may start
        self._trie: dict[str, Any] = {}
        for content, idx in self._added.items():
            if content:
                node = self._trie
                for ch in content:
                    node = node.setdefault(ch, {})
                node[_END] = idx
        self._first = (
            re.compile("[" + "".join(re.escape(c) for c in sorted(self._trie)) + "]") if self._trie else None
        )
        # each plain part's ids (a prompt's turns recur across prompts); bounded, see encode_ids
        self._memo: dict[str, list[int]] = {}

    # the tokenizers.Tokenizer subset
    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self._with_added if with_added_tokens else self._size

    def id_to_token(self, idx: int) -> str | None:
        idx = int(idx)
        tok = self._flags.get(idx)
        if tok is not None:
            return str(tok["content"])
        return str(self._sp.id_to_piece(idx)) if 0 <= idx < self._size else None

    def token_to_id(self, token: str) -> int | None:
        if token in self._added:
            return self._added[token]
        idx = int(self._sp.piece_to_id(token))
        return idx if self._sp.id_to_piece(idx) == token else None

    def added_tokens(self) -> dict[int, dict[str, Any]]:
        """The added tokens by id, with their flags as ``tokenizer_config.json`` declares them."""
        return {i: dict(t) for i, t in sorted(self._flags.items())}

    def _split(self, text: str) -> list[str | int]:
        """``text`` cut into its added tokens (ids) and the parts between them (strings): the
        leftmost added token, at its position the longest, then on from its end."""
        out: list[str | int] = []
        if self._first is None:
            return [text] if text else []
        pos = start = 0
        n = len(text)
        while True:
            m = self._first.search(text, start)
            if m is None:
                break
            j = m.start()
            node: dict[str, Any] = self._trie
            k, hit, end = j, None, j
            while k < n:
                child = node.get(text[k])
                if child is None:
                    break
                node, k = child, k + 1
                if _END in node:
                    hit, end = node[_END], k
            if hit is None:
                start = j + 1
                continue
            if j > pos:
                out.append(text[pos:j])
            out.append(hit)
            pos = start = end
        if pos < len(text):
            out.append(text[pos:])
        return out

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, without special tokens added.

        Each distinct part between added tokens is encoded once and kept (up to
        ``MEMO_PARTS`` parts, then the memo starts over): a plain part's ids do not depend on
        what surrounds it, as the text is cut at its added tokens first. A few new parts are
        encoded one string at a time: SentencePiece's list call starts a thread pool per call.
        """
        parts = [self._split(t) for t in texts]
        memo = self._memo
        plain = dict.fromkeys(p for ps in parts for p in ps if isinstance(p, str))
        if len(memo) + len(plain) > MEMO_PARTS:
            memo.clear()
        new = [p for p in plain if p not in memo]
        if new:
            encoded = self._sp.encode(new) if len(new) > 64 else [self._sp.encode(p) for p in new]
            memo.update(zip(new, ([int(i) for i in ids] for ids in encoded), strict=True))
        out: list[list[int]] = []
        for ps in parts:
            ids: list[int] = []
            for p in ps:
                if isinstance(p, int):
                    ids.append(p)
                else:
                    ids.extend(memo[p])
            out.append(ids)
        return out

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        out: list[str] = []
        run = bytearray()

        def flush() -> None:
            if run:
                try:
                    out.append(run.decode("utf-8"))
                except UnicodeDecodeError:
                    out.append(_REPLACEMENT * len(run))
                run.clear()

        for idx in ids:
            if not 0 <= int(idx) < _ID_LIMIT:
                raise OverflowError(f"token id {idx} is out of range")
            if skip_special_tokens and int(idx) in self._special:
                continue
            token = self.id_to_token(int(idx))
            if token is None:
                continue
            token = token.replace("▁", " ")
            m = _BYTE_PIECE.fullmatch(token)
            if m is not None:
                run.append(int(m.group(1), 16))
                continue
            flush()
            out.append(token)
        flush()
        return "".join(out)
