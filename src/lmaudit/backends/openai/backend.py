"""``openai``: both backend contracts over any OpenAI-compatible HTTP server.

Works with vLLM, the llama.cpp server, the llama-cpp-python server, Ollama and hosted APIs,
through plain ``requests`` (no SDK). Config keys (a Mapping; defaults in brackets):

* ``base_url`` (required), e.g. ``http://127.0.0.1:8000/v1``; ``model`` (required), the served name.
* ``endpoint`` [``"chat"``]: ``"chat"`` posts messages to ``/chat/completions`` (the server
  applies its chat template); ``"completions"`` renders the messages locally with
  ``chat_template`` (required in that mode; jinja2, rendered as transformers does with
  ``messages``, ``add_generation_prompt=True`` and ``bos_token``) and posts the text to
  ``/completions``.
* ``bos_token`` [``""``]: passed to the template. Servers add BOS themselves when they tokenize
  a raw prompt (llama.cpp, llama-cpp-python, vLLM), so rendering it too would double it.
* ``api_key_env`` [``"OPENAI_API_KEY"``]: name of the environment variable holding the key.
  The key is optional (local servers), read at request time, sent only in the
  ``Authorization`` header and never stored on the backend, so it cannot reach ``repr``,
  ``identity``, logs or exceptions (any server message echoing it is redacted as well).
* ``timeout_s`` [60], ``max_retries`` [5], ``backoff_base_s`` [0.5], ``backoff_cap_s`` [30],
  ``request_deadline_s`` [600]: 429, 5xx, dropped connections and timeouts are retried with
  exponential backoff and full jitter (``Retry-After`` is honoured up to ``backoff_cap_s``),
  within a total deadline per request; any other 4xx fails at once with the server's message.
  A server that cannot be reached at all fails at once with ``cannot reach <url>``; it is
  checked (``GET <base_url>/models``) before the first request (:mod:`lmaudit.backends.openai.client`).
* ``max_answer_bytes`` [8 MiB]: the most bytes of one answer read; a larger answer is refused in
  one line naming the URL and the bound, and never cached.
* ``revision`` [None]: a user-declared string naming the served weights (see ``identity``).
  What the server reports it serves (``/models``, an answer's ``model`` and
  ``system_fingerprint``) is not in the identity (a re-run from the cache needs no server) but
  recorded beside the cache's answers and checked before any is served: a server serving
  another model than they were made with is refused (:mod:`lmaudit.backends.openai.served`).
* ``top_logprobs`` [20]: how many alternatives the server is asked for (hosted OpenAI allows
  at most 20 for chat and 5 for legacy completions).
* ``label_space_variants`` [False]: also read ``" A"`` as label ``"A"`` (see below).
* ``max_concurrency`` [1]: parallel HTTP requests.
* ``tokenizer`` [``"auto"``]: which tokenize endpoint gate G1 uses: ``"llama-cpp-python"``
  (``POST /extras/tokenize``), ``"llama.cpp"`` / ``"vllm"`` (``POST /tokenize``), ``"none"`` (the
  server has none: qq refuses at once), or ``"auto"`` (probe in that order). ``server_root`` [``base_url`` minus a trailing ``/v1``] is
  where those live.

**Label read-out.** ``probs[label] = exp(logprob)`` of the top-logprob entry whose text equals
the label exactly, at the first generated position. A label absent from the top-k gets 0.0
and its true mass lands in ``other``: the conservative choice (it never invents mass), which
the QQ robustness envelope covers by treating ``other`` as unassigned. With
``label_space_variants`` the ``" A"`` entry counts for ``"A"`` too (the two are added) and the
result records which variants matched (``matched_variants``).

**Gate G1** tokenizes the rendered prompt and prompt+label through the server's tokenize
endpoint and reports the pieces after their common prefix. The rendered prompt is the one
posted (completions), or in chat mode ``chat_template`` when set (declared to be the
server's), else the server's own rendering where it shows it (llama.cpp's
``/apply-template``; vLLM's ``/tokenize`` with messages, then ``/detokenize``).
``label_check_refusal()`` says, before any request is made, when a server cannot decide G1
(no tokenize endpoint; a chat template applied unseen): see :mod:`.g1` and docs/servers.md.
When G1 is asked anyway, each label gets ``UNVERIFIED_PIECES`` — two pieces, so the gate
FAILS rather than passes silently; the pieces say why.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from lmaudit.backends.api import BackendAPI
from lmaudit.backends.base import (
    LabelRequest,
    LabelResult,
    Message,
    Refused,
    SampleRequest,
    SampleResult,
    derive_seed,
)
from lmaudit.backends.openai import g1
from lmaudit.backends.openai.client import HttpClient, server_and_model
from lmaudit.backends.openai.config import OPENAI_DEFAULTS, OPENAI_FIELDS, OpenAIModelConfig
from lmaudit.backends.openai.served import ServedCheck
from lmaudit.backends.openai.start import start_hint
from lmaudit.backends.openai.wire import (
    detokenize_via,
    first_position_top,
    read_labels,
    render_chat_template,
    tokenize_via,
)
from lmaudit.backends.registry import register_backend
from lmaudit.errors import BackendError, ServerUnreachable
from lmaudit.provenance.digest import sha256_text
from lmaudit.provenance.redact import redact_url

log = logging.getLogger(__name__)

BACKEND_VERSION = 1
ENDPOINTS = ("chat", "completions")
TOKENIZERS = ("auto", "llama-cpp-python", "llama.cpp", "vllm", "none")
UNVERIFIED = "<unverified>"
UNVERIFIED_PIECES = [UNVERIFIED, "<no tokenize endpoint answered>"]
_T = TypeVar("_T")
_R = TypeVar("_R")


@register_backend("openai", schema=OpenAIModelConfig)
class OpenAIBackend(BackendAPI):
    """Label log-probabilities and sampling from an OpenAI-compatible server. A field the
    config leaves out takes its schema's default (:class:`~lmaudit.backends.openai.config.OpenAIModelConfig`)."""

    identity_name = "openai"
    identity_version = BACKEND_VERSION

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        cfg = {**OPENAI_DEFAULTS, **config}
        unknown = sorted(k for k in cfg if k not in OPENAI_FIELDS and not str(k).startswith("_"))
        if unknown:
            log.warning("openai backend config: ignoring unknown keys %s", unknown)
        self.base_url, self.model = server_and_model(cfg, "openai backend")
        self.endpoint = str(cfg["endpoint"] or OPENAI_DEFAULTS["endpoint"])
        if self.endpoint not in ENDPOINTS:
            raise BackendError(
                f"openai backend config: field 'endpoint' = {self.endpoint!r} is not one of {ENDPOINTS}"
            )
        self.chat_template: str | None = cfg.get("chat_template") or None
        if self.endpoint == "completions" and not self.chat_template:
            raise BackendError(
                "openai backend config: field 'chat_template' is required when endpoint='completions'"
            )
        self.bos_token = str(cfg["bos_token"] or "")
        rev = cfg["revision"]
        self.revision: str | None = None if rev is None else str(rev)
        self.top_logprobs = int(cfg["top_logprobs"])
        self.label_space_variants = bool(cfg["label_space_variants"])
        self.max_concurrency = max(1, int(cfg["max_concurrency"]))
        self.tokenizer = str(cfg["tokenizer"] or OPENAI_DEFAULTS["tokenizer"])
        if self.tokenizer not in TOKENIZERS:
            raise BackendError(
                f"openai backend config: field 'tokenizer' = {self.tokenizer!r} is not one of {TOKENIZERS}"
            )
        root = cfg.get("server_root") or (
            self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        )
        self.server_root = str(root).rstrip("/")
        self._http = HttpClient.from_config(
            self.base_url,
            cfg,
            sleep=sleep,
            clock=clock,
            rng=rng,
            unreachable_hint=start_hint(self.base_url, self.model),
        )
        if self._http.max_retries < 0 or self.top_logprobs < 1 or self._http.timeout_s <= 0:
            raise BackendError(
                "openai backend config: need max_retries >= 0, top_logprobs >= 1, timeout_s > 0"
            )
        self._context: int | None = None  # the server's context, asked once; 0: unknown
        self._tok_dialect: str | None = None
        self._served = ServedCheck(self.model, redact_url(self.base_url))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> OpenAIBackend:
        return cls(cfg)

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(base_url={redact_url(self.base_url)!r}, model={self.model!r}, "
            f"endpoint={self.endpoint!r}, revision={self.revision!r})"
        )

    def describe(self) -> dict[str, Any]:
        """How this backend reaches its model, for the audit record (credentials redacted)."""
        return {
            "base_url": redact_url(self.base_url),
            "server_root": redact_url(self.server_root),
            "api_key_env": self._http.api_key_env,
            "timeout_s": self._http.timeout_s,
            "max_retries": self._http.max_retries,
            "backoff_cap_s": self._http.backoff_cap_s,
            "request_deadline_s": self._http.deadline_s,
            "max_answer_bytes": self._http.max_answer_bytes,
            "max_concurrency": self.max_concurrency,
            "tokenizer": self._tok_dialect or self.tokenizer,
            "served": self._served.describe(),
        }

    def identity_fields(self) -> dict[str, Any]:
        """Everything that changes outputs. Not the base_url nor the key: the same served model
        answers alike wherever it is hosted (localhost, a cluster, a tunnel), so caches stay
        shareable; ``revision`` is the user's declaration that tells served weights apart (what
        the server reports is checked against the cache, not part of it: :mod:`.served`)."""
        ident: dict[str, Any] = {
            "model": self.model,
            "endpoint": self.endpoint,
            "revision": self.revision,
            "top_logprobs": self.top_logprobs,
            "label_space_variants": self.label_space_variants,
        }
        if self.endpoint == "completions":
            assert self.chat_template is not None
            ident["chat_template_sha256"] = sha256_text(self.chat_template)
            ident["bos_token"] = self.bos_token
        return ident

    # --- HTTP ------------------------------------------------------------------------------

    def check_server(self) -> None:
        """Raise a BackendError now if the server cannot be reached (see :mod:`.client`)."""
        self._http.check_server()

    def attach_cache(self, root: Path, digest: str) -> None:
        """Check what the server serves against the record in cache folder ``root`` (:mod:`.served`)."""
        self._served.attach(root, digest, self._http.check_server)

    def _post(self, url: str, body: dict[str, Any]) -> Any:
        return self._http.post(url, body)

    def _map(self, fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        if self.max_concurrency == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def _render(self, messages: Sequence[Message]) -> str:
        assert self.chat_template is not None
        try:
            return render_chat_template(self.chat_template, messages, self.bos_token)
        except Exception as e:  # jinja2 errors: show the template's complaint
            raise BackendError(
                f"openai backend: chat_template failed to render: {type(e).__name__}: {e}"
            ) from None

    def _generate(self, messages: Sequence[Message], extra: dict[str, Any]) -> dict[str, Any]:
        if self.endpoint == "chat":
            body = {"model": self.model, "messages": [dict(m) for m in messages], **extra}
            out = self._post(f"{self.base_url}/chat/completions", body)
        else:
            body = {"model": self.model, "prompt": self._render(messages), **extra}
            out = self._post(f"{self.base_url}/completions", body)
        choices = out.get("choices") if isinstance(out, dict) else None
        if not choices or not isinstance(choices, list):
            raise BackendError(
                f"openai backend: response from {self.endpoint} endpoint has no choices: {str(out)[:300]}"
            )
        if not isinstance(choices[0], dict):
            raise BackendError(
                f"openai backend: response from {self.endpoint} endpoint: choices[0] is "
                f"{type(choices[0]).__name__} {str(choices[0])[:200]!r}, not an object"
            )
        self._served.answered(out)
        return dict(choices[0])

    # --- label log-probabilities -----------------------------------------------------------

    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]:
        return self._map(lambda r: self._one_label(r, top_k), requests)

    def _one_label(self, request: LabelRequest, top_k: int) -> LabelResult:
        k = self.top_logprobs
        extra: dict[str, Any] = {"max_tokens": 1, "temperature": 0.0}
        if self.endpoint == "chat":
            extra.update(logprobs=True, top_logprobs=k)
        else:
            extra.update(logprobs=k)
        entries = first_position_top(self._generate(request.messages, extra))
        return read_labels(entries, request.labels, top_k, self.label_space_variants)

    # --- gate G1 ---------------------------------------------------------------------------

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        dialect = self._dialect()
        prompt = g1.context(self, dialect, request.messages) if dialect is not None else None
        if prompt is None or dialect is None:
            log.warning(
                "openai backend: gate G1 cannot tokenize on this server; labels marked %s", UNVERIFIED
            )
            return {label: list(UNVERIFIED_PIECES) for label in request.labels}
        base_ids, _ = self._tokenize(dialect, prompt)
        out: dict[str, list[str]] = {}
        for label in request.labels:
            ids, pieces = self._tokenize(dialect, prompt + label)
            n = 0
            while n < min(len(ids), len(base_ids)) and ids[n] == base_ids[n]:
                n += 1
            out[label] = pieces[n:] if pieces is not None else [self._detokenize(dialect, i) for i in ids[n:]]
        return out

    def label_check_refusal(self) -> str | None:
        """None when gate G1 can be decided on this server, else why not (:mod:`.g1`)."""
        return g1.refusal(self)

    def _dialect(self) -> str | None:
        if self._tok_dialect is None:
            candidates = {"auto": TOKENIZERS[1:-1], "none": ()}.get(self.tokenizer, (self.tokenizer,))
            self._tok_dialect = "none"
            for d in candidates:
                try:
                    if self._tokenize(d, "Hello")[0]:
                        self._tok_dialect = d
                        break
                except ServerUnreachable:
                    self._tok_dialect = None
                    raise
                except BackendError as e:
                    log.info("tokenize endpoint %s did not answer: %s", d, e)
        return None if self._tok_dialect == "none" else self._tok_dialect

    # --- the context check (lmaudit.backends.context) ----------------------------------------

    def context_length(self) -> int | None:
        """The context the server reports for the model, where it does (:mod:`.context`)."""
        from lmaudit.backends.openai.context import served_context

        if self._context is None:
            self._context = served_context(self) or 0
        return self._context or None

    def prompt_lengths(self, prompts: Sequence[Sequence[Message]]) -> list[int]:
        """Each chat prompt's token count as the server's model reads it."""
        from lmaudit.backends.openai.context import prompt_tokens

        return self._map(lambda m: prompt_tokens(self, m), list(prompts))

    def _tokenize(self, dialect: str, text: str) -> tuple[list[int], list[str] | None]:
        return tokenize_via(self._post, self.server_root, self.model, dialect, text)

    def _detokenize(self, dialect: str, token_id: int) -> str:
        return detokenize_via(self._post, self.server_root, self.model, dialect, token_id)

    # --- sampling --------------------------------------------------------------------------

    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        jobs = [(r, i) for r in requests for i in range(r.n)]
        draws = self._map(lambda job: self._one_draw(*job), jobs)
        out: list[SampleResult] = []
        pos = 0
        for r in requests:
            mine = draws[pos : pos + r.n]
            refusals = tuple(d.reason if isinstance(d, Refused) else None for d in mine)
            texts = ["" if isinstance(d, Refused) else d for d in mine]
            out.append(SampleResult(texts=texts, refusals=refusals if any(refusals) else ()))
            pos += r.n
        return out

    def _one_draw(self, request: SampleRequest, draw: int) -> str | Refused:
        extra = {
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            "seed": derive_seed(request.seed, draw),
            "n": 1,
        }
        choice = self._generate(request.messages, extra)
        found = choice.get("message")
        message: dict[str, Any] = found if isinstance(found, dict) else {}
        text = message.get("content") if self.endpoint == "chat" else choice.get("text")
        if isinstance(text, str) and not message.get("refusal"):
            return text
        if text is not None and not message.get("refusal"):
            raise BackendError(f"openai backend: the answer's text is {type(text).__name__}, not a string")
        # no text: a refusal or a filtered answer (hosted APIs answer content null with
        # finish_reason "content_filter", or a ``refusal`` message), recorded as such by the
        # study and never cached as the model's answer
        said = message.get("refusal")
        reason = str(choice.get("finish_reason") or "no text")
        return Refused(f"{reason}: {str(said)[:200]}" if said else reason)
