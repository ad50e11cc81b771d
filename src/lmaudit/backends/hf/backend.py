"""``hf``: a transformers-checkpoint backend honouring both contracts (label log-probabilities and sampling).

The model and tokenizer load with transformers (:mod:`lmaudit.backends.hf.load`), whose version is
part of the identity. The identity holds what the model is, not where it is
(:mod:`lmaudit.backends.hf.checkpoint`): a local folder's content digest, the commit a hub id
resolved to (and was loaded at), the embedded model's GGUF SHA-256.

Prompts are rendered with the chat template (``add_generation_prompt=True``) and tokenized
*without* adding special tokens: the template is the one source of BOS and turn markers (Gemma's
template writes ``<bos>`` itself; a tokenizer that also added one would double it). A doubled
leading BOS is collapsed all the same.

A label is scored by the single token it adds to the rendered prompt:
``ids(prompt + label) == ids(prompt) + [t]`` (gate G1). Scoring runs the prefix-cached, packed
forward of :mod:`lmaudit.backends.hf.packed.forward` over all the prompts of a call (each shared
prefix computed once, the vocabulary head only at each prompt's last token), and results are
streamed as they are ready (:meth:`HFBackend.iter_label_logprobs`). Sampling prefills each
prompt cut at its own message boundaries, memoising the KV cache of every cut
(:mod:`lmaudit.backends.hf.prefill`: prompts sharing leading messages compute them once, and
a draw never depends on which other prompts were sampled), and draws ``i`` with a generator
seeded by ``derive_seed(seed, i)``; the tokens decoded are told to a caller's ``on_tokens`` step
by step (:mod:`lmaudit.backends.hf.sampling`), which is how a bar moves within one long draw.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmaudit.backends.api import NAMING_KEYS, BackendAPI
from lmaudit.backends.base import LabelRequest, LabelResult, Message, SampleRequest, SampleResult
from lmaudit.backends.hf import load as hf_load
from lmaudit.backends.hf.checkpoint import Checkpoint, resolve, verify
from lmaudit.backends.hf.config import HF_DEFAULTS, HFModelConfig
from lmaudit.backends.hf.embedded import (
    EMBEDDED_MODEL_NAME,
    embedded_model,
    ensure_embedded_model,
    gguf_sha256,
)
from lmaudit.backends.hf.labels import label_results, label_tails, label_token_ids, pieces
from lmaudit.backends.hf.packed.attention import install_packed_attention
from lmaudit.backends.hf.packed.forward import ForwardStats, next_token_logits
from lmaudit.backends.hf.packed.trie import DEFAULT_MIN_SHARED_TOKENS, DEFAULT_UNIT_TOKENS
from lmaudit.backends.hf.prefill import PREFILL_KEY, PrefillMemo, message_cuts, segment_bounds
from lmaudit.backends.hf.sampling import TokenHook, prompt_groups, sample_completions
from lmaudit.backends.registry import register_backend
from lmaudit.errors import BackendError
from lmaudit.provenance.digest import sha256_text

#: Bump whenever a change alters what the backend returns for the same model and request
#: (2: transformers computes every model, the embedded Gemma 3 included).
BACKEND_VERSION = 2

_DTYPES = ("float32", "bfloat16", "float16")
_IGNORED_KEYS = NAMING_KEYS | {"_target_"}
# End-of-turn markers of common chat formats; those present in a tokenizer's added tokens stop sampling.
_END_OF_TURN = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>", "<|return|>")


@register_backend(
    "hf",
    schema=HFModelConfig,
    runners={"lightning": "lmaudit.backends.hf.lightning.runner:LightningRunner"},
)
class HFBackend(BackendAPI):
    """transformers-checkpoint backend. See the module docstring; construct with keywords or
    :meth:`from_config`. The defaults of the keywords a model config sets are its schema's
    (:class:`~lmaudit.backends.hf.config.HFModelConfig`); the others are this class's own.

    ``model``: ``"embedded:gemma3-270m"`` or ``"embedded:smollm2-135m"`` (the models that ship on
    PyPI, converted once, see :mod:`lmaudit.backends.hf.embedded`), a hub id, a local directory or
    a local GGUF file (dequantised on every load: convert it once with ``save_pretrained`` for speed).
    """

    identity_name = "hf"
    identity_version = BACKEND_VERSION
    #: :meth:`iter_samples` tells an ``on_tokens`` hook the decoding budget done, step by step
    reports_tokens = True

    def __init__(
        self,
        model: str = EMBEDDED_MODEL_NAME,
        *,
        revision: str | None = HF_DEFAULTS["revision"],
        dtype: str = HF_DEFAULTS["dtype"],
        chat_template: str | None = HF_DEFAULTS["chat_template"],
        chat_template_kwargs: Mapping[str, Any] | None = None,
        batch_size: int = HF_DEFAULTS["batch_size"],
        device: str = HF_DEFAULTS["device"],
        top_k: int = 10,
        progress: bool = True,
        model_dir: str | Path | None = None,
        min_shared_tokens: int = DEFAULT_MIN_SHARED_TOKENS,
        sample_block: int = 1,
        attn_implementation: str | None = None,
        pack_tokens: int = HF_DEFAULTS["pack_tokens"],
        unit_tokens: int = DEFAULT_UNIT_TOKENS,
    ) -> None:
        if dtype not in _DTYPES:
            raise BackendError(f"hf backend: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        if batch_size < 1 or sample_block < 1 or pack_tokens < 1 or unit_tokens < 1 or top_k < 0:
            raise BackendError(
                "hf backend: batch_size, sample_block, pack_tokens and unit_tokens must be >= 1 and top_k >= 0"
            )
        self.model_name = model
        self.revision = revision
        self.dtype = dtype
        self.device = device
        self.batch_size = int(batch_size)
        self.top_k = int(top_k)
        self.progress = bool(progress)
        self.min_shared_tokens = int(min_shared_tokens)
        self.sample_block = int(sample_block)
        self.pack_tokens = int(pack_tokens)
        self.unit_tokens = int(unit_tokens)
        self.attn_implementation = attn_implementation
        self.chat_template_kwargs: dict[str, Any] = dict(chat_template_kwargs or {})
        self.stats = ForwardStats()
        self.prefill_memo = PrefillMemo()
        self._model: Any = None
        self._context_length: int | None = None  # read on first use; 0: unknown

        shipped = embedded_model(model) if model.startswith("embedded:") else None
        # what the name holds now: a local folder's content digest, a hub id's commit (an
        # embedded model is named by its GGUF's published digest instead)
        self.checkpoint: Checkpoint | None = None if shipped is not None else resolve(model, revision)
        if shipped is not None:
            self.model_path: str = str(
                ensure_embedded_model(Path(model_dir) if model_dir else None, shipped.model)
            )
            self.model_id = f"{shipped.model}@{gguf_sha256(shipped.model)}"
            self._load_revision: str | None = None
        else:
            assert self.checkpoint is not None
            self.model_path = self.checkpoint.path
            self.model_id = self.checkpoint.name
            self._load_revision = self.checkpoint.load_revision
        self._gguf_file = self.checkpoint.gguf_file if self.checkpoint is not None else None
        self.tokenizer = hf_load.load_tokenizer(self.model_path, self._load_revision, self._gguf_file)

        template = chat_template if chat_template is not None else self.tokenizer.chat_template
        if isinstance(template, dict):
            template = template.get("default")
        if template is None and shipped is not None:
            template = shipped.chat_template
        if not template:
            raise BackendError(
                f"hf backend: model {model!r} has no chat template; set `chat_template` in its model config"
            )
        self.chat_template: str = template
        self.chat_template_sha256 = sha256_text(template)
        self.stop_token_ids = self._stop_token_ids()
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        self.pad_token_id = int(pad) if pad is not None else 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> HFBackend:
        """Build from a model config mapping (Hydra node or dict); unknown keys are an error.
        Without a ``progress`` key no progress bar is drawn: the cache layer in front of a
        backend draws it (the backend's own would double it)."""
        cfg = {"progress": False, **config}
        unknown = sorted(set(cfg) - _CONFIG_KEYS - _IGNORED_KEYS)
        if unknown:
            raise BackendError(
                f"hf backend config: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_CONFIG_KEYS))}"
            )
        kwargs = {k: v for k, v in cfg.items() if k in _CONFIG_KEYS}
        if kwargs.get("chat_template_kwargs") is not None:
            kwargs["chat_template_kwargs"] = dict(kwargs["chat_template_kwargs"])
        return cls(**kwargs)

    # ------------------------------------------------------------------ loading

    @property
    def model(self) -> Any:
        """The causal LM, loaded on first use (identity and G1 need only the tokenizer)."""
        if self._model is None:
            self._model = hf_load.load_model(
                self.model_path,
                self._load_revision,
                self.dtype,
                self.device,
                self.attn_implementation,
                self._gguf_file,
            )
            install_packed_attention(self._model, self.attn_implementation)
            if self.checkpoint is not None:
                verify(self.checkpoint)  # loaded what was identified, not files written since
        return self._model

    def load(self) -> None:
        """Load the model now (the pipeline does, before the first answer it needs)."""
        _ = self.model

    def context_length(self) -> int | None:
        """The most tokens the model holds, prompt and generated (:mod:`lmaudit.backends.context`)."""
        if self._context_length is None:
            self._context_length = (
                hf_load.context_length(self.model_path, self._load_revision, self.tokenizer, self._gguf_file)
                or 0
            )
        return self._context_length or None

    def prompt_lengths(self, prompts: Sequence[Sequence[Message]]) -> list[int]:
        """Each chat prompt's token count, rendered and tokenized as it is scored or sampled."""
        return [len(ids) for ids in self._encode_texts([self.render(m) for m in prompts])]

    def _stop_token_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        eos = self.tokenizer.eos_token_id
        if eos is not None:
            ids.add(int(eos))
        added = self.tokenizer.get_added_vocab()
        ids.update(int(added[t]) for t in _END_OF_TURN if t in added)
        return frozenset(ids)

    # ------------------------------------------------------------------ identity

    def identity_fields(self) -> dict[str, Any]:
        return {
            "model": self.model_id,
            "revision": self.checkpoint.revision if self.checkpoint is not None else self.revision,
            "dtype": self.dtype,
            "chat_template_sha256": self.chat_template_sha256,
            "chat_template_kwargs": self.chat_template_kwargs,
            **hf_load.implementation_identity(),
        }

    def describe(self) -> dict[str, Any]:
        """Identity plus what an audit record should show about how prompts were scored."""
        import torch

        try:
            probe: list[int] | None = self.encode([{"role": "user", "content": "x"}])
        except BackendError:  # a template that needs more than one user turn
            probe = None
        bos = self.tokenizer.bos_token_id
        out = dict(self.identity)
        out.update(
            {
                "model_path": self.model_path,
                "device": self.device,
                "torch": torch.__version__,
                "tokenizer": type(self.tokenizer).__name__,
                "batch_size": self.batch_size,
                "sample_block": self.sample_block,
                "prefill": PREFILL_KEY,
                "pack_tokens": self.pack_tokens,
                "unit_tokens": self.unit_tokens,
                "top_k": self.top_k,
                "bos": {
                    "token": self.tokenizer.bos_token,
                    "rendered_prompt_starts_with_bos": None
                    if probe is None
                    else bos is not None and probe[:1] == [bos],
                    "policy": "the chat template emits special tokens; none are added when tokenizing",
                },
                "stop_tokens": sorted(self.tokenizer.convert_ids_to_tokens(sorted(self.stop_token_ids))),
                "stats": self.stats.as_dict(),
            }
        )
        if self.checkpoint is not None:  # what the identity's revision stands for
            out["checkpoint"] = self.checkpoint.record
        if self._model is not None:
            out["n_parameters"] = sum(p.numel() for p in self._model.parameters())
        return out

    # ------------------------------------------------------------------ rendering

    def render(self, messages: Sequence[Message], *, generation_prompt: bool = True) -> str:
        """The prompt text: messages through the chat template, with the generation prompt."""
        try:
            text = self.tokenizer.apply_chat_template(
                [dict(m) for m in messages],
                chat_template=self.chat_template,
                tokenize=False,
                add_generation_prompt=generation_prompt,
                **self.chat_template_kwargs,
            )
        except Exception as exc:
            roles = [m.get("role") for m in messages]
            raise BackendError(
                f"hf backend: chat template failed on messages with roles {roles}: {exc}"
            ) from exc
        return str(text)

    def _encode_texts(self, texts: Sequence[str]) -> list[list[int]]:
        out = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        bos = self.tokenizer.bos_token_id
        return [ids[1:] if bos is not None and ids[:2] == [bos, bos] else list(ids) for ids in out]

    def encode(self, messages: Sequence[Message]) -> list[int]:
        return self._encode_texts([self.render(messages)])[0]

    def message_cuts(self, messages: Sequence[Message], ids: Sequence[int]) -> list[int]:
        """Where the prompt ``ids`` of ``messages`` may be cut (:func:`~lmaudit.backends.hf.prefill.message_cuts`)."""
        return message_cuts(messages, self.render, self._encode_texts, ids)

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        """Gate G1: each label's token pieces after the rendered prompt (passes when exactly one).

        A label whose text merges with the prompt's last token (so the prompt's own tokens change)
        is reported with a leading ``"<merges-with-prompt>"`` marker and never passes.
        """
        text = self.render(request.messages)
        ids = self._encode_texts([text])[0]
        tails = label_tails(self._encode_texts, text, ids, request.labels)
        return {label: pieces(self.tokenizer, ok, tail) for label, (ok, tail) in tails.items()}

    def _label_ids(self, request: LabelRequest, text: str, ids: list[int]) -> dict[str, int]:
        return label_token_ids(self._encode_texts, self.tokenizer, text, ids, request.labels, self.model_id)

    # ------------------------------------------------------------------ contracts

    def _progress(self, total: int, desc: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(
            total=total, desc=desc, unit="prompt", disable=not self.progress or total <= 8, leave=False
        )

    def label_logprobs(
        self, requests: list[LabelRequest], top_k: int | None = None, *, one_unit: bool = False
    ) -> list[LabelResult]:
        """Next-token probabilities of each request's labels, the remaining mass and the top-k tokens."""
        results: list[LabelResult | None] = [None] * len(requests)
        for i, res in self.iter_label_logprobs(requests, top_k, one_unit=one_unit):
            results[i] = res
        return [r for r in results if r is not None]

    def iter_label_logprobs(
        self, requests: Sequence[LabelRequest], top_k: int | None = None, *, one_unit: bool = False
    ) -> Iterator[tuple[int, LabelResult]]:
        """``(index, result)`` for every request, as each packed forward finishes (any order).

        The requests are cut into scoring units (``unit_tokens``; ``one_unit``: they are one
        unit, as the Lightning runner hands a rank each unit), each its own prefix trie, so a
        caller should pass every request it has; every request is checked (gate G1) before the
        model runs.
        """
        k = self.top_k if top_k is None else int(top_k)
        if not requests:
            return
        texts = [self.render(r.messages) for r in requests]
        ids = self._encode_texts(texts)
        label_ids = [self._label_ids(r, t, i) for r, t, i in zip(requests, texts, ids, strict=True)]
        with self._progress(len(requests), "hf label_logprobs") as bar:
            for idx, logits in next_token_logits(
                self.model,
                ids,
                stats=self.stats,
                pack_tokens=self.pack_tokens,
                min_shared=self.min_shared_tokens,
                unit_tokens=None if one_unit else self.unit_tokens,
                on_chunk=bar.update,
            ):
                yield from label_results(logits, idx, label_ids, k, self.tokenizer)

    def sample_key_extra(self, request: SampleRequest) -> dict[str, Any] | None:
        """How a draw's prompt was prefilled (:data:`~lmaudit.backends.hf.prefill.PREFILL_KEY`)
        and, for a multi-token draw, the decode block: both can change a draw's arithmetic (so,
        rarely, its tokens), so both are part of the draws' cache keys."""
        extra: dict[str, Any] = {"prefill": PREFILL_KEY}
        if request.max_tokens > 1:
            extra["sample_block"] = self.sample_block
        return extra

    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        """``n`` completions per request; draw ``i`` uses the seed ``derive_seed(request.seed, i)``."""
        return [res for _, res in self.iter_samples(requests)]

    def iter_samples(
        self, requests: list[SampleRequest], on_tokens: TokenHook | None = None
    ) -> Iterator[tuple[int, SampleResult]]:
        """:meth:`sample`'s results as ``(index, result)``, each as soon as its request's draws
        are done (the cache layer stores and counts them one by one). ``on_tokens`` is told the
        tokens of each decoding step as they are drawn, and a draw's budget it did not need when
        it stops: ``n x max_tokens`` per request in all."""
        for req in requests:
            if req.n < 0 or req.max_tokens < 1:
                raise BackendError(f"hf backend: sample needs n >= 0 and max_tokens >= 1, got {req}")
        with self._progress(len(requests), "hf sample") as bar:
            ids = [self.encode(req.messages) for req in requests]
            for a, b in prompt_groups(self.model, [len(i) for i in ids]):
                yield from enumerate(self._sample_group(requests[a:b], ids[a:b], bar, on_tokens), start=a)

    def _sample_group(
        self, requests: list[SampleRequest], ids: list[list[int]], bar: Any, on_tokens: TokenHook | None
    ) -> Iterator[SampleResult]:
        """The prompts' prefills first (hf.prefill: the same tensors as one prefill each, so a
        draw does not depend on the other requests), then each request's draws."""
        computed, forwards = self.prefill_memo.tokens_computed, self.prefill_memo.forwards
        prefilled = self.prefill_memo.prefill_many(
            self.model,
            [
                (i, segment_bounds(self.message_cuts(r.messages, i), len(i)))
                for r, i in zip(requests, ids, strict=True)
            ],
        )
        self.stats.forward_calls += self.prefill_memo.forwards - forwards
        self.stats.tokens_real += self.prefill_memo.tokens_computed - computed
        self.stats.tokens_padded += self.prefill_memo.tokens_computed - computed
        for req, prompt, pre in zip(requests, ids, prefilled, strict=True):
            seqs = sample_completions(
                self.model,
                pre,
                len(prompt),
                req,
                stop_ids=self.stop_token_ids,
                block=self.sample_block,
                on_tokens=on_tokens,
            )
            self.stats.requests += 1
            bar.update(1)
            yield SampleResult(texts=[self.tokenizer.decode(s, skip_special_tokens=True) for s in seqs])


#: The keys a model config may set: exactly the constructor's keyword parameters.
_CONFIG_KEYS = frozenset(inspect.signature(HFBackend.__init__).parameters) - {"self"}
