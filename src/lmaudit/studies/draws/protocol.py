"""What the draws study asks: probes -> sampling requests, and raw answers -> categories.

A probe is ``{id, prompt, system?}`` (one JSON object a line in the probe file). For each
probe, condition and replicate, one :class:`~lmaudit.backends.base.SampleRequest` asks for
``n`` draws with the same prompt; draw ``i`` is the ``i``-th answer of the sequence. The
messages are: the system prompt (the condition's, else the probe's, if any), the study's
answer-format exemplar turns, then the probe. The request seed is a digest of the study
seed, probe, condition and replicate, so every sequence has its own reproducible seed.

Normalisation (``normalise.kind``) maps a raw completion to a categorical answer; the raw
text is kept beside it:

* ``first_word``: the first whitespace-delimited word, stripped of surrounding punctuation;
* ``regex``: the first match of ``pattern`` (its first group if it has one);
* ``labels``: the label occurring first in the text as a whole word.

Matching and results are case-folded unless ``case_sensitive``. A completion with no answer
becomes ``<empty>`` (nothing to read) or ``<nomatch>`` (no match / no label): these are
answers too, kept in their place in the sequence.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.backends.base import Message, SampleRequest
from lmaudit.errors import InputError
from lmaudit.provenance.io import check_fields, iter_jsonl
from lmaudit.provenance.jsoncheck import suggest

__all__ = ["EMPTY", "NOMATCH", "Probe", "build_requests", "load_probes", "make_normaliser", "request_seed"]

EMPTY, NOMATCH = "<empty>", "<nomatch>"


@dataclass(frozen=True)
class Probe:
    id: str
    prompt: str
    system: str | None = None


def load_probes(path: str | Path, ids: Sequence[str] | None = None) -> list[Probe]:
    """The probes of a JSONL file (``id``, ``prompt``, optional ``system``), optionally a subset."""
    probes: list[Probe] = []
    seen: set[str] = set()
    for line, obj in iter_jsonl(path):
        where = f"{path}: line {line}"
        check_fields(obj, where, optional=("id", "prompt", "system"))
        for key in ("id", "prompt"):
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise InputError(f"{where}: field {key!r} must be a non-empty string")
        system = obj.get("system")
        if system is not None and not isinstance(system, str):
            raise InputError(f"{where}: field 'system' must be a string or absent")
        if obj["id"] in seen:
            raise InputError(f"{where}: field 'id' = {obj['id']!r} is used twice")
        seen.add(obj["id"])
        probes.append(Probe(obj["id"], obj["prompt"], system))
    if not probes:
        raise InputError(f"{path}: no probes")
    if ids is not None:
        missing = sorted(set(ids) - seen)
        if missing:
            hint = suggest(missing[0], sorted(seen))
            raise InputError(f"study: field 'probe_ids' names probes not in {path}: {missing}{hint}")
        probes = [p for p in probes if p.id in set(ids)]
    return probes


def request_seed(seed: int, probe: str, condition: str, replicate: int) -> int:
    h = hashlib.sha256(f"draws:{seed}:{probe}:{condition}:{replicate}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


def messages_for(
    probe: Probe, system: str | None, exemplars: Sequence[Mapping[str, str]]
) -> tuple[Message, ...]:
    msgs: list[Message] = []
    sys_text = system if system is not None else probe.system
    if sys_text:
        msgs.append({"role": "system", "content": sys_text})
    for ex in exemplars:
        msgs += [
            {"role": "user", "content": str(ex["prompt"])},
            {"role": "assistant", "content": str(ex["answer"])},
        ]
    msgs.append({"role": "user", "content": probe.prompt})
    return tuple(msgs)


def build_requests(
    probes: Sequence[Probe],
    conditions: Sequence[Mapping[str, Any]],
    exemplars: Sequence[Mapping[str, str]],
    *,
    replicates: int,
    n: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
) -> list[SampleRequest]:
    """One request per probe x condition x replicate, in that nesting order."""
    out = []
    for probe in probes:
        for cond in conditions:
            name = str(cond["name"])
            temp = cond.get("temperature")
            for rep in range(replicates):
                out.append(
                    SampleRequest(
                        messages=messages_for(probe, cond.get("system"), exemplars),
                        n=n,
                        temperature=float(temperature if temp is None else temp),
                        top_p=top_p,
                        max_tokens=max_tokens,
                        seed=request_seed(seed, probe.id, name, rep),
                        meta={"study": "draws", "probe": probe.id, "condition": name, "replicate": rep},
                    )
                )
    return out


def _strip_punct(word: str) -> str:
    def is_p(ch: str) -> bool:
        return unicodedata.category(ch)[0] in "PS"

    i, j = 0, len(word)
    while i < j and is_p(word[i]):
        i += 1
    while j > i and is_p(word[j - 1]):
        j -= 1
    return word[i:j]


def make_normaliser(
    kind: str, *, pattern: str | None = None, labels: Sequence[str] = (), case_sensitive: bool = False
) -> Callable[[str], str]:
    """The configured rule as a function ``raw text -> answer``; InputError names a bad field."""
    fold: Callable[[str], str] = (lambda s: s) if case_sensitive else str.casefold
    flags = 0 if case_sensitive else re.IGNORECASE
    if kind == "first_word":

        def first_word(text: str) -> str:
            for word in text.split():
                w = _strip_punct(word)
                if w:
                    return fold(w)
            return EMPTY

        return first_word
    if kind == "regex":
        if not pattern:
            raise InputError("study.normalise: field 'pattern' is required for kind 'regex'")
        try:
            rx = re.compile(pattern, flags)
        except re.error as e:
            raise InputError(f"study.normalise: field 'pattern' is not a valid regex ({e})") from None

        def regex(text: str) -> str:
            if not text.strip():
                return EMPTY
            m = rx.search(text)
            if m is None:
                return NOMATCH
            got = m.group(1) if rx.groups else m.group(0)
            return fold(got) if got else NOMATCH

        return regex
    if kind == "labels":
        if not labels or not all(isinstance(x, str) and x.strip() for x in labels):
            raise InputError(
                "study.normalise: field 'labels' must be a non-empty list of strings for kind 'labels'"
            )
        alts = sorted({x.strip() for x in labels}, key=len, reverse=True)
        rx_l = re.compile(r"(?<!\w)(" + "|".join(re.escape(x) for x in alts) + r")(?!\w)", flags)
        canon = {fold(x.strip()): x.strip() for x in labels}

        def label(text: str) -> str:
            if not text.strip():
                return EMPTY
            m = rx_l.search(text)
            return fold(canon.get(fold(m.group(1)), m.group(1))) if m else NOMATCH

        return label
    raise InputError(f"study.normalise: field 'kind' = {kind!r} is not one of first_word, regex, labels")
