"""A checkpoint's fast tokenizer on the ``tokenizers`` library alone, as transformers loads it.

A transformers fast tokenizer (``PreTrainedTokenizerFast``, and Gemma's, which adds only a
post-processor for ``add_special_tokens=True``) is a ``tokenizers.Tokenizer`` read from
``tokenizer.json``, plus the special tokens named in ``special_tokens_map.json`` /
``tokenizer_config.json`` and a chat template. :class:`FastTokenizer` is that, with the few
methods the ``hf`` backend calls, each computed as transformers computes it:

* ``tokenizer(texts, add_special_tokens=False)["input_ids"]``: ``encode_batch`` without special tokens;
* ``decode(ids, skip_special_tokens=...)``: the tokenizer's decoder, then transformers'
  clean-up of spaces before punctuation if the config asks for it;
* ``convert_ids_to_tokens``, ``get_added_vocab``, the special tokens and their ids;
* ``apply_chat_template(..., tokenize=False)``: :mod:`lmaudit.backends.chat_template` with
  transformers' template variables (the special tokens, ``tools`` and ``documents`` None).

:func:`unsupported` says when a checkpoint's tokenizer is more than that (another tokenizer
class, extra named special tokens, added tokens the config declares differently from
``tokenizer.json``, split special tokens): those load through transformers.

Encoding and decoding are done by an engine: :class:`TokenizersEngine` (``tokenizers`` on
``tokenizer.json``), or for Gemma's tokenizer where ``tokenizer.json`` is known to be the
conversion of ``tokenizer.model`` (the embedded model), SentencePiece on ``tokenizer.model``
(:mod:`lmaudit.backends.sp_tokenizer`: the same ids, loaded in ~0.1 s instead of ~1.3 s).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmaudit.backends.chat_template import render_chat_template

#: tokenizer classes that are exactly a ``tokenizer.json`` plus special tokens for encoding and decoding
CLASSES = frozenset({"PreTrainedTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"})
_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_FLAGS = ("content", "special", "lstrip", "rstrip", "normalized", "single_word")


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _content(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("content")
    return None if value is None else str(value)


def unsupported(model_dir: Path) -> str | None:
    """Why ``model_dir``'s tokenizer is not one :class:`FastTokenizer` reproduces, or None, from
    its small files (what only ``tokenizer.json`` can tell is checked when it is loaded:
    :class:`TokenizerMismatch`)."""
    model_dir = Path(model_dir)
    if not (model_dir / "tokenizer.json").is_file():
        return "no tokenizer.json"
    try:
        cfg = read_json(model_dir / "tokenizer_config.json")
    except (OSError, ValueError) as exc:
        return f"unreadable tokenizer_config.json ({exc})"
    cls = cfg.get("tokenizer_class")
    if cls not in CLASSES:
        return f"tokenizer class {cls!r}"
    if cfg.get("extra_special_tokens") or cfg.get("split_special_tokens"):
        return "extra or split special tokens"
    return None


class TokenizerMismatch(ValueError):
    """``tokenizer.json`` and the tokenizer config disagree in a way transformers would reconcile
    at load time (added tokens declared differently, special tokens that are not added tokens)."""


def _check(engine: Any, cfg: Mapping[str, Any], special: Mapping[str, str], where: Path) -> None:
    added = {i: tuple(t.get(f) for f in _FLAGS) for i, t in engine.added_tokens().items()}
    for idx, tok in (cfg.get("added_tokens_decoder") or {}).items():
        if added.get(int(idx)) != tuple(tok.get(f) for f in _FLAGS):
            raise TokenizerMismatch(
                f"{where}: added token {idx} differs between tokenizer_config.json and tokenizer.json"
            )
    contents = {flags[0] for flags in added.values()}
    for name, token in special.items():
        if token not in contents:
            raise TokenizerMismatch(
                f"{where}: special token {name}={token!r} is not an added token of tokenizer.json"
            )


class TokenizersEngine:
    """``tokenizer.json`` on the ``tokenizers`` library: what :class:`FastTokenizer` calls."""

    name = "tokenizers"

    def __init__(self, model_dir: Path) -> None:
        import tokenizers

        self.version = str(tokenizers.__version__)
        self._tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.get_vocab_size = self._tokenizer.get_vocab_size
        self.id_to_token = self._tokenizer.id_to_token
        self.token_to_id = self._tokenizer.token_to_id

    def added_tokens(self) -> dict[int, dict[str, Any]]:
        decoder = self._tokenizer.get_added_tokens_decoder()
        return {int(i): {f: getattr(t, f) for f in _FLAGS} for i, t in sorted(decoder.items())}

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(e.ids) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens))


def _clean_up_tokenization(text: str) -> str:
    """transformers' ``clean_up_tokenization``: no space before punctuation and contractions."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't")):
        text = text.replace(a, b)
    for a, b in ((" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


class FastTokenizer:
    """``model_dir``'s ``tokenizer.json`` with its special tokens and chat template (see the module)."""

    def __init__(self, model_dir: str | Path, engine: str = "tokenizers") -> None:
        model_dir = Path(model_dir)
        cfg = read_json(model_dir / "tokenizer_config.json")
        specials = read_json(model_dir / "special_tokens_map.json")
        if engine == "tokenizers":
            self._tokenizer: Any = TokenizersEngine(model_dir)
        elif engine == "sentencepiece":
            from lmaudit.backends.sp_tokenizer import SentencePieceEngine

            self._tokenizer = SentencePieceEngine(model_dir, cfg)
        else:
            raise ValueError(f"unknown tokenizer engine {engine!r} (tokenizers or sentencepiece)")
        self.clean_up_tokenization_spaces = bool(cfg.get("clean_up_tokenization_spaces", False))
        self._special: dict[str, str] = {}
        for name in _SPECIAL:
            token = _content(specials.get(name, cfg.get(name)))
            if token is not None:
                self._special[name] = token
        _check(self._tokenizer, cfg, self._special, model_dir)
        extra = specials.get("additional_special_tokens", cfg.get("additional_special_tokens")) or []
        self.additional_special_tokens = [str(_content(t)) for t in extra]
        self.chat_template: str | dict[str, str] | None = self._chat_template(model_dir, cfg)

    @staticmethod
    def _chat_template(model_dir: Path, cfg: Mapping[str, Any]) -> str | dict[str, str] | None:
        jinja = model_dir / "chat_template.jinja"
        if jinja.is_file():
            return jinja.read_text(encoding="utf-8")
        template = cfg.get("chat_template")
        if template is None:
            template = read_json(model_dir / "chat_template.json").get("chat_template")
        if isinstance(template, list):
            return {str(t["name"]): str(t["template"]) for t in template}
        return None if template is None else str(template)

    # special tokens, as transformers names them
    def _id(self, name: str) -> int | None:
        token = self._special.get(name)
        if token is None:
            return None
        idx = self._tokenizer.token_to_id(token)
        if idx is None and name != "unk_token":
            return self._id("unk_token")
        return None if idx is None else int(idx)

    @property
    def bos_token(self) -> str | None:
        return self._special.get("bos_token")

    @property
    def eos_token(self) -> str | None:
        return self._special.get("eos_token")

    @property
    def bos_token_id(self) -> int | None:
        return self._id("bos_token")

    @property
    def eos_token_id(self) -> int | None:
        return self._id("eos_token")

    @property
    def pad_token_id(self) -> int | None:
        return self._id("pad_token")

    @property
    def special_tokens_map(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self._special)
        if self.additional_special_tokens:
            out["additional_special_tokens"] = list(self.additional_special_tokens)
        return out

    def __len__(self) -> int:
        return int(self._tokenizer.get_vocab_size(with_added_tokens=True))

    # encoding and decoding
    @property
    def engine(self) -> str:
        """What encodes and decodes, with its version (``tokenizers 0.22.2``, ``sentencepiece 0.2.1``)."""
        return f"{self._tokenizer.name} {self._tokenizer.version}"

    def __call__(self, texts: str | Sequence[str], add_special_tokens: bool = False) -> dict[str, Any]:
        """``{"input_ids": ids}``: one list of ids for a string, a list of them for a list of strings
        (special tokens are never added: the chat template writes them)."""
        if add_special_tokens:
            raise ValueError("FastTokenizer encodes without adding special tokens (add_special_tokens=False)")
        if isinstance(texts, str):
            return {"input_ids": self._tokenizer.encode_ids([texts])[0]}
        return {"input_ids": self._tokenizer.encode_ids(list(texts))}

    def decode(self, ids: int | Sequence[int], skip_special_tokens: bool = False) -> str:
        seq = [int(ids)] if isinstance(ids, int) else [int(i) for i in ids]
        text = str(self._tokenizer.decode(seq, skip_special_tokens=skip_special_tokens))
        return _clean_up_tokenization(text) if self.clean_up_tokenization_spaces else text

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> Any:
        if isinstance(ids, int):
            return self._tokenizer.id_to_token(ids)
        return [self._tokenizer.id_to_token(int(i)) for i in ids]

    def get_added_vocab(self) -> dict[str, int]:
        return {str(t["content"]): i for i, t in self._tokenizer.added_tokens().items()}

    def apply_chat_template(
        self,
        conversation: Sequence[Mapping[str, Any]],
        *,
        chat_template: str,
        tokenize: bool = False,
        add_generation_prompt: bool = False,
        **kwargs: Any,
    ) -> str:
        if tokenize:
            raise ValueError("FastTokenizer.apply_chat_template renders text only (tokenize=False)")
        variables = {**self.special_tokens_map, **kwargs}
        variables.setdefault("tools", None)
        variables.setdefault("documents", None)
        return render_chat_template(
            chat_template,
            [dict(m) for m in conversation],
            add_generation_prompt=add_generation_prompt,
            **variables,
        )
