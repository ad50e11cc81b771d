"""lmaudit's own Gemma 3 (``backends/gemma3.py``), tokenizer (``hf_tokenizer.py``) and chat-template
renderer (``chat_template.py``) against transformers' implementations of the same things, on tiny
random checkpoints built here.

The claim is equality bit for bit (``torch.equal``, ``==`` on floats and strings), not closeness:
the same torch operations in the same order. Where a test compares against transformers, the
reference is computed by transformers itself in the same process.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tiny_hf import (  # noqa: E402
    CHAT_TEMPLATE,
    WORDS,
    fuzz_texts,
    one_thread,
    qq_requests,
    tiny_spm_meta,
    write_model,
    write_tokenizer,
)

from lmaudit.backends import embedded, gemma3  # noqa: E402
from lmaudit.backends.base import BackendError, SampleRequest, identity_digest  # noqa: E402
from lmaudit.backends.hf import HFBackend  # noqa: E402
from lmaudit.backends.hf_batching import ForwardStats, next_token_logits  # noqa: E402
from lmaudit.backends.hf_prefill import PACK_MIN_TOKENS, PrefillMemo  # noqa: E402
from lmaudit.backends.hf_sampling import sample_completions  # noqa: E402
from lmaudit.backends.hf_tokenizer import FastTokenizer, TokenizerMismatch  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

#: Gemma 3 variants: what each exercises beyond the base (a window shorter than the prompts,
#: three layers with the last sliding, linear RoPE scaling, a final soft-cap, untied head)
CONFIGS: dict[str, dict[str, Any]] = {
    "base": {},
    "window-8": {
        "sliding_window": 8,
        "layer_types": ("sliding_attention", "full_attention", "sliding_attention"),
    },
    "linear-rope": {"rope_scaling": {"rope_type": "linear", "factor": 4.0}},
    "softcap": {"final_logit_softcapping": 3.0, "sliding_window": 8},
    "untied": {"tie_word_embeddings": False},
}


_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def _checkpoint(path: Path, **extra: Any) -> Path:
    tok = write_tokenizer(path)
    layer_types = extra.pop("layer_types", ("sliding_attention", "full_attention"))
    write_model(path, "gemma3", len(tok), layer_types=layer_types, **extra)
    return path


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """(lmaudit's model, transformers' model) of one random checkpoint."""
    path = _checkpoint(tmp_path_factory.mktemp(f"g3-{request.param}"), **CONFIGS[request.param])
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    return gemma3.load_model(path), ref


def _seqs(vocab: int, lengths: tuple[int, ...], seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(6, vocab, (n,), generator=g).tolist() for n in lengths]


def _same_cache(a: Any, b: Any) -> bool:
    return len(a.layers) == len(b.layers) and all(
        torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values)
        for x, y in zip(a.layers, b.layers, strict=True)
    )


@torch.inference_mode()
def test_forward_equals_transformers_bit_for_bit(pair: tuple[Any, Any]) -> None:
    """Whole sequences (one and two rows, longer and shorter than the window), with their caches."""
    mine, ref = pair
    vocab = ref.config.vocab_size
    for seq in _seqs(vocab, (1, 5, 23)):
        ids = torch.tensor([seq])
        a, b = mine(input_ids=ids), ref(input_ids=ids)
        assert torch.equal(a.logits, b.logits)
        assert _same_cache(a.past_key_values, b.past_key_values)
    rows = torch.tensor(_seqs(vocab, (17, 17), seed=1))
    assert torch.equal(mine(input_ids=rows).logits, ref(input_ids=rows).logits)
    keep = torch.tensor(_seqs(vocab, (19,), seed=2))
    assert torch.equal(
        mine(input_ids=keep, logits_to_keep=1).logits, ref(input_ids=keep, logits_to_keep=1).logits
    )


@torch.inference_mode()
def test_segmented_prefill_and_decoding_equal_transformers(pair: tuple[Any, Any]) -> None:
    """Prefill in message-like segments over the cache, then decoding: sampling's path."""
    mine, ref = pair
    (seq,) = _seqs(ref.config.vocab_size, (29,), seed=3)
    bounds = [6, 13, 29]
    la, ca = PrefillMemo().prefill(mine, seq, bounds)
    lb, cb = PrefillMemo().prefill(ref, seq, bounds)
    assert torch.equal(la, lb) and _same_cache(ca, cb)
    for block in (1, 3):
        kw: dict[str, Any] = dict(
            n=4, seed=11, temperature=1.0, top_p=0.9, max_tokens=5, stop_ids=frozenset({1})
        )
        got = sample_completions(mine, (la, ca), len(seq), block=block, **kw)
        want = sample_completions(ref, (lb, cb), len(seq), block=block, **kw)
        assert got == want and any(len(s) > 1 for s in got)


@pytest.mark.parametrize("block_attention", [True, False])
def test_packed_scoring_equals_transformers(pair: tuple[Any, Any], block_attention: bool) -> None:
    """The prefix-trie packed forward (block or dense attention, the last layer at prompt ends)."""
    mine, ref = pair
    base = _seqs(ref.config.vocab_size, (14,), seed=4)[0]
    ids = [base + tail for tail in _seqs(ref.config.vocab_size, (3, 9, 1, 12), seed=5)] + [base[:7]]
    got: dict[str, dict[int, Any]] = {"mine": {}, "ref": {}}
    for name, model in (("mine", mine), ("ref", ref)):
        for idx, logits in next_token_logits(
            model, ids, stats=ForwardStats(), pack_tokens=10, block_attention=block_attention
        ):
            got[name].update(zip(idx, logits, strict=True))
    assert sorted(got["mine"]) == list(range(len(ids)))
    assert all(torch.equal(got["mine"][i], got["ref"][i]) for i in got["ref"])


def test_kv_cache_layers_behave_as_dynamic_cache() -> None:
    """Growing, config-shaped (sliding layers bounded) and pre-filled caches, update by update."""
    cfg_t = transformers.Gemma3TextConfig(
        num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], sliding_window=4
    )
    cfg_m = gemma3.Gemma3TextConfig.from_dict(cfg_t.to_dict())
    g = torch.Generator().manual_seed(0)
    first = [(torch.randn(1, 2, 3, 4, generator=g), torch.randn(1, 2, 3, 4, generator=g)) for _ in range(2)]
    pairs = [
        (gemma3.KVCache(), transformers.DynamicCache()),
        (gemma3.KVCache(config=cfg_m), transformers.DynamicCache(config=cfg_t)),
        (gemma3.KVCache(ddp_cache_data=first), transformers.DynamicCache(ddp_cache_data=first)),
    ]
    for mine, ref in pairs:
        for step, n in enumerate((3, 1, 2, 1, 5)):
            pos = torch.arange(n)
            for layer in range(2):
                assert mine.get_mask_sizes(pos, layer) == ref.get_mask_sizes(pos, layer)
                k, v = torch.randn(1, 2, n, 4, generator=g), torch.randn(1, 2, n, 4, generator=g)
                got, want = mine.update(k, v, layer), ref.update(k, v, layer)
                assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (step, layer)
                assert mine.get_seq_length(layer) == ref.get_seq_length(layer)
            assert mine.is_sliding == ref.is_sliding and _same_cache(mine, ref)
        mine.batch_repeat_interleave(3)
        ref.batch_repeat_interleave(3)
        assert _same_cache(mine, ref)


@pytest.mark.parametrize("past", [0, 2, 3, 4, 9])
@pytest.mark.parametrize("q", [1, 2, 5])
def test_masks_equal_transformers_sdpa_masks(past: int, q: int) -> None:
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    cfg_t = transformers.Gemma3TextConfig(
        num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], sliding_window=4
    )
    cfg_t._attn_implementation = "sdpa"
    mine, ref = (
        gemma3.KVCache(config=gemma3.Gemma3TextConfig.from_dict(cfg_t.to_dict())),
        transformers.DynamicCache(config=cfg_t),
    )
    if past:
        for layer in range(2):
            kv = torch.zeros(1, 1, past, 2)
            mine.update(kv, kv, layer)
            ref.update(kv, kv, layer)
    cache_position = torch.arange(past, past + q)
    embeds = torch.zeros(1, q, 8)
    args = dict(
        config=cfg_t,
        input_embeds=embeds,
        attention_mask=None,
        cache_position=cache_position,
        past_key_values=ref,
        position_ids=cache_position[None],
    )
    want = {
        "full_attention": create_causal_mask(**args),
        "sliding_attention": create_sliding_window_causal_mask(**args),
    }
    got = gemma3.default_masks(
        gemma3.Gemma3TextConfig.from_dict(cfg_t.to_dict()), embeds, cache_position, mine
    )
    for kind in want:
        if want[kind] is None:
            assert got[kind] is None, kind
        else:
            assert got[kind] is not None and torch.equal(got[kind], want[kind]), kind


# ----------------------------------------------------------------------------- the backend


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("g3-backend"), sliding_window=8)


def test_backend_answers_equal_across_implementations(tiny: Path) -> None:
    mine = HFBackend(str(tiny), progress=False)
    ref = HFBackend(str(tiny), progress=False, implementation="transformers")
    assert (mine.implementation, ref.implementation) == ("lmaudit", "transformers")
    requests = qq_requests(3)
    assert [r.to_json() for r in mine.label_logprobs(requests, top_k=5)] == [
        r.to_json() for r in ref.label_logprobs(requests, top_k=5)
    ]
    draws = [
        SampleRequest(messages=requests[1].messages, n=6, temperature=1.0, top_p=1.0, max_tokens=1, seed=5),
        SampleRequest(messages=requests[2].messages, n=3, temperature=0.7, top_p=0.8, max_tokens=6, seed=6),
    ]
    assert [r.texts for r in mine.sample(draws)] == [r.texts for r in ref.sample(draws)]
    assert mine.describe()["n_parameters"] == ref.describe()["n_parameters"]
    # what computed the answers is part of the identity; nothing else differs
    a, b = dict(mine.identity), dict(ref.identity)
    assert a.pop("implementation") == f"lmaudit.gemma3/{gemma3.IMPLEMENTATION_VERSION}"
    assert b.pop("transformers") == transformers.__version__
    assert a == b and identity_digest(mine.identity) != identity_digest(ref.identity)


def test_bfloat16_equals_transformers(tiny: Path) -> None:
    requests = qq_requests(2)
    mine = HFBackend(str(tiny), progress=False, dtype="bfloat16").label_logprobs(requests)
    ref = HFBackend(
        str(tiny), progress=False, dtype="bfloat16", implementation="transformers"
    ).label_logprobs(requests)
    assert [r.probs for r in mine] == [r.probs for r in ref]


def test_auto_chooses_transformers_where_lmaudit_does_not_apply(tmp_path: Path, tiny: Path) -> None:
    capped = _checkpoint(tmp_path / "capped", attn_logit_softcapping=5.0)
    assert HFBackend(str(capped), progress=False).implementation == "transformers"
    with pytest.raises(BackendError, match=r"implementation=lmaudit cannot load .*soft-capping"):
        HFBackend(str(capped), progress=False, implementation="lmaudit")
    assert HFBackend(str(tiny), progress=False, attn_implementation="eager").implementation == "transformers"
    llama = tmp_path / "llama"
    write_model(llama, "llama", len(write_tokenizer(llama)))
    assert HFBackend(str(llama), progress=False).implementation == "transformers"
    with pytest.raises(BackendError, match="implementation must be one of"):
        HFBackend(str(tiny), progress=False, implementation="jax")


def test_a_checkpoint_missing_weights_is_refused_by_name(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    path = _checkpoint(tmp_path / "broken")
    weights = load_file(str(path / "model.safetensors"))
    del weights["model.layers.1.mlp.up_proj.weight"]
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(BackendError, match=r"missing weights \['model.layers.1.mlp.up_proj.weight'\]"):
        _ = HFBackend(str(path), progress=False).model


def test_a_sharded_checkpoint_loads_as_the_single_file(tmp_path: Path, tiny: Path) -> None:
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(tiny), dtype=torch.float32)
    sharded = tmp_path / "sharded"
    ref.save_pretrained(str(sharded), max_shard_size="20KB")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (sharded / name).write_bytes((tiny / name).read_bytes())
    assert (
        not (sharded / "model.safetensors").exists() and (sharded / "model.safetensors.index.json").exists()
    )
    a, b = gemma3.load_model(sharded), gemma3.load_model(tiny)
    assert all(
        torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )


def test_scoring_and_sampling_never_import_transformers(tiny: Path) -> None:
    code = (
        "import sys\n"
        "from lmaudit.backends.hf import HFBackend\n"
        "from lmaudit.backends.base import SampleRequest\n"
        "from lmaudit.backends.base import LabelRequest\n"
        f"b = HFBackend({str(tiny)!r}, progress=False)\n"
        "msgs = ({'role': 'user', 'content': 'is it true that A'},)\n"
        "b.label_logprobs([LabelRequest(msgs, ('A', 'B'))])\n"
        "b.sample([SampleRequest(messages=msgs, n=2, temperature=1.0, top_p=1.0, max_tokens=3, seed=1)])\n"
        "b.describe()\n"
        "print(b.implementation, sorted(m for m in ('transformers', 'torch._dynamo', 'accelerate') if m in sys.modules))\n"
    )
    env = {
        "PYTHONPATH": str(REPO / "src"),
        "PATH": "/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["lmaudit", "[]"]


# ----------------------------------------------------------------------------- the tokenizer


def _gemma_tokenizer_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tab: bool = True) -> Path:
    """A tokenizer saved as the embedded model's is: Gemma's, rebuilt from GGUF metadata."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(embedded, "read_gguf_metadata", lambda path: tiny_spm_meta(tab))
    out = tmp_path / "gemma-tok"
    embedded.build_gemma3_tokenizer(tmp_path / "unused.gguf", tmp_path).save_pretrained(str(out))
    return out


TEXTS = [
    "the user is in the inn",
    "<start_of_turn>user\nis it true<end_of_turn>\n<start_of_turn>model\n",
    "<bos><bos>A B Yes No",
    "  leading  and trailing  ",
    "Zürich é ∑ 🤖 unknown chars",
    "question<end_of_turn>answer<eos>",
    "",
]


@pytest.mark.parametrize("kind", ["generic", "gemma", "gemma-sentencepiece"])
def test_tokenizer_equals_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    if kind == "generic":
        path = tmp_path / "tok"
        write_tokenizer(path)
    else:
        path = _gemma_tokenizer_dir(tmp_path, monkeypatch)
    engine = "sentencepiece" if kind.endswith("sentencepiece") else "tokenizers"
    mine, ref = FastTokenizer(path, engine=engine), transformers.AutoTokenizer.from_pretrained(str(path))
    assert mine.engine.split()[0] == engine
    texts = TEXTS + [" ".join(WORDS[i::7]) for i in range(7)]
    ids = mine(texts)["input_ids"]
    assert ids == ref(texts, add_special_tokens=False)["input_ids"]
    assert [mine(t)["input_ids"] for t in texts] == [
        ref(t, add_special_tokens=False)["input_ids"] for t in texts
    ]
    for seq in ids:
        for skip in (False, True):
            assert mine.decode(seq, skip_special_tokens=skip) == ref.decode(seq, skip_special_tokens=skip)
        assert mine.convert_ids_to_tokens(seq) == ref.convert_ids_to_tokens(seq)
    assert mine.decode(ids[1][0]) == ref.decode(ids[1][0])
    assert mine.get_added_vocab() == ref.get_added_vocab()
    for name in (
        "bos_token",
        "eos_token",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "special_tokens_map",
    ):
        assert getattr(mine, name) == getattr(ref, name), name
    assert mine.chat_template == ref.chat_template and len(mine) == len(ref)


def test_sentencepiece_engine_equals_tokenizers_on_fuzzed_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemma's tokenizer as the embedded model saves it: SentencePiece on tokenizer.model gives
    tokenizer.json's ids and decodings (2,000 random texts; random id sequences, byte runs valid
    and not, with and without special tokens)."""
    path = _gemma_tokenizer_dir(tmp_path, monkeypatch)
    fast, sp = FastTokenizer(path), FastTokenizer(path, engine="sentencepiece")
    pieces = [p for p in fast.convert_ids_to_tokens(list(range(len(fast)))) if not p.startswith("<0x")]
    texts = fuzz_texts(pieces, 2000, seed=0)
    ids = fast(texts)["input_ids"]
    assert sp(texts)["input_ids"] == ids
    assert sum(map(len, ids)) > 20_000
    assert any(8 <= i < 8 + 256 for seq in ids for i in seq)  # byte fallback (pieces <0x00>...<0xFF>)
    everything = list(range(len(fast)))
    assert sp.convert_ids_to_tokens(everything) == fast.convert_ids_to_tokens(everything)
    rng = random.Random(1)
    seqs = ids[:500] + [[rng.choice(everything) for _ in range(rng.randint(1, 10))] for _ in range(2000)]
    runs = [
        8 + 0xC3,
        8 + 0xA9,
        8 + 0x41,
        8 + 0xFF,
        2,
        5,
    ]  # bytes of "é", "A", an invalid one; <bos>, <end_of_turn>
    seqs += [[rng.choice(runs) for _ in range(6)] for _ in range(500)]
    for seq in seqs:
        for skip in (False, True):
            assert sp.decode(seq, skip_special_tokens=skip) == fast.decode(seq, skip_special_tokens=skip), seq
    for token in ("<bos>", "▁the", "the", "▁▁", "\n", "<0x41>", "not-a-piece"):
        assert sp._tokenizer.token_to_id(token) == fast._tokenizer.token_to_id(token), token
    assert sp.get_added_vocab() == fast.get_added_vocab() and len(sp) == len(fast)


def test_sentencepiece_engine_ids_do_not_depend_on_grouping_or_its_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine keeps each plain part's ids (prompts repeat their turns) and encodes a few new
    parts one string at a time, many in one list call: the ids are tokenizer.json's whether the
    texts come all at once, one per call, in reverse order, or through a memo that overflows and
    starts over."""
    from lmaudit.backends import sp_tokenizer

    path = _gemma_tokenizer_dir(tmp_path, monkeypatch)
    fast = FastTokenizer(path)
    pieces = [p for p in fast.convert_ids_to_tokens(list(range(len(fast)))) if not p.startswith("<0x")]
    base = fuzz_texts(pieces, 150, seed=3)
    turns = [f"<start_of_turn>user\n{t}<end_of_turn>\n" for t in base[:20]]
    texts = base + ["".join(turns[k % 20] for k in range(i, i + 4)) + t for i, t in enumerate(base)]
    ref = fast(texts)["input_ids"]

    def engine() -> FastTokenizer:
        return FastTokenizer(path, engine="sentencepiece")

    sp = engine()
    added = sp.get_added_vocab()
    # the leftmost added token, at its position the longest ("\n\n" of "\n\n\n"), then on from its end
    assert sp._tokenizer._split("a<start_of_turn>\n\n\nx<start_of") == [
        "a",
        added["<start_of_turn>"],
        added["\n\n"],
        added["\n"],
        "x<start_of",
    ]
    assert sp(texts)["input_ids"] == ref  # many new parts: one list call
    assert sp(texts[::-1])["input_ids"] == ref[::-1]  # every part kept
    sp = engine()
    assert [sp(t)["input_ids"] for t in texts] == ref  # a few new parts per call, one string at a time
    monkeypatch.setattr(sp_tokenizer, "MEMO_PARTS", 7)
    sp = engine()
    assert [sp(texts[i : i + 3])["input_ids"] for i in range(0, len(texts), 3)] == [
        ref[i : i + 3] for i in range(0, len(texts), 3)
    ]
    assert len(sp._tokenizer._memo) <= 7 + 3 * 30


def test_sentencepiece_engine_only_where_it_reproduces_the_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lmaudit.backends import hf_load, sp_tokenizer

    gemma = _gemma_tokenizer_dir(tmp_path, monkeypatch)
    cfg = json.loads((gemma / "tokenizer_config.json").read_text())
    assert sp_tokenizer.why_not(gemma, cfg) is None
    assert hf_load.tokenizer_engine(str(gemma), embedded=True) == "sentencepiece"
    assert hf_load.tokenizer_engine(str(gemma), embedded=False) == "tokenizers"
    generic = tmp_path / "tok"
    write_tokenizer(generic)
    generic_cfg = json.loads((generic / "tokenizer_config.json").read_text())
    assert "not Gemma's" in str(sp_tokenizer.why_not(generic, generic_cfg))
    assert hf_load.tokenizer_engine(str(generic), embedded=True) == "tokenizers"
    first = next(iter(cfg["added_tokens_decoder"]))
    stripping = json.loads(json.dumps(cfg))
    stripping["added_tokens_decoder"][first]["lstrip"] = True
    assert f"added token {first} strips" in str(sp_tokenizer.why_not(gemma, stripping))
    moved = json.loads(json.dumps(cfg))
    moved["added_tokens_decoder"][first]["content"] = "<moved>"
    assert f"added token {first} is not piece" in str(sp_tokenizer.why_not(gemma, moved))
    missing = json.loads(json.dumps(cfg))
    del missing["added_tokens_decoder"]["4"]  # <start_of_turn>: the text would be split otherwise
    assert "piece 4 ('<start_of_turn>') of tokenizer.model is not an added token" in str(
        sp_tokenizer.why_not(gemma, missing)
    )
    unspecial = json.loads(json.dumps(cfg))
    unspecial["added_tokens_decoder"]["5"]["special"] = False  # <end_of_turn>, special in tokenizer.json
    assert "added token 5 should be special" in str(sp_tokenizer.why_not(gemma, unspecial))
    tabless = _gemma_tokenizer_dir(tmp_path / "tabless", monkeypatch, tab=False)
    assert "no tab piece" in str(sp_tokenizer.why_not(tabless, cfg))
    (gemma / "tokenizer.model").write_bytes(b"not a model")
    assert "unreadable tokenizer.model" in str(sp_tokenizer.why_not(gemma, cfg))
    assert hf_load.tokenizer_engine(str(gemma), embedded=True) == "tokenizers"
    (gemma / "tokenizer.model").unlink()
    assert sp_tokenizer.why_not(gemma, cfg) == "no tokenizer.model"
    with pytest.raises(ValueError, match="unknown tokenizer engine"):
        FastTokenizer(gemma, engine="spm")


def test_sentencepiece_engine_verified_once_against_tokenizer_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """verified() compares the engines on probe texts and keeps its verdict beside the files, for
    their digest: a tokenizer.json whose BPE differs from tokenizer.model's (one merge removed,
    which the structural checks cannot see) is caught, and the engine is not used."""
    from lmaudit.backends import hf_load, sp_tokenizer

    gemma = _gemma_tokenizer_dir(tmp_path, monkeypatch)
    cfg = json.loads((gemma / "tokenizer_config.json").read_text())
    verdict = gemma / sp_tokenizer.VERDICT_FILE
    assert not verdict.exists()
    assert sp_tokenizer.verified(gemma, cfg) is None
    kept = json.loads(verdict.read_text())
    assert kept["why_not"] is None and kept["check"] == sp_tokenizer.CHECK_VERSION
    verdict.write_text(json.dumps({**kept, "why_not": "kept verdict"}))
    assert "checking the SentencePiece tokenizer" in capsys.readouterr().err
    assert sp_tokenizer.verified(gemma, cfg) == "kept verdict"  # read, not recomputed
    assert capsys.readouterr().err == ""
    assert hf_load.tokenizer_engine(str(gemma), embedded=True) == "tokenizers"
    tj = json.loads((gemma / "tokenizer.json").read_text())
    merges = tj["model"]["merges"]
    kept_merges = [m for m in merges if "".join(m if isinstance(m, list) else m.split(" ")) != "▁the"]
    assert 0 < len(kept_merges) < len(merges)
    tj["model"]["merges"] = kept_merges  # "▁the" is no longer reachable
    (gemma / "tokenizer.json").write_text(json.dumps(tj))
    assert sp_tokenizer.why_not(gemma, cfg) is None  # the structure is the same
    reason = sp_tokenizer.verified(gemma, cfg)  # new files: compared again
    assert reason is not None and "differently from tokenizer.json" in reason
    assert json.loads(verdict.read_text())["why_not"] == reason
    assert f"using tokenizers for {gemma}: encodes" in capsys.readouterr().err
    assert hf_load.tokenizer_engine(str(gemma), embedded=True) == "tokenizers"
    backend_tok = hf_load.load_tokenizer("lmaudit", str(gemma), None, embedded=True)
    assert backend_tok.engine.startswith("tokenizers ")


def test_tokenizer_config_that_disagrees_with_tokenizer_json_goes_to_transformers(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "ckpt")
    cfg = json.loads((path / "tokenizer_config.json").read_text())
    first = next(iter(cfg["added_tokens_decoder"]))
    cfg["added_tokens_decoder"][first]["lstrip"] = True  # transformers would re-add it with lstrip
    (path / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(TokenizerMismatch, match=f"added token {first}"):
        FastTokenizer(path)
    assert HFBackend(str(path), progress=False).implementation == "transformers"
    with pytest.raises(BackendError, match=f"implementation=lmaudit cannot load .*added token {first}"):
        HFBackend(str(path), progress=False, implementation="lmaudit")


# ----------------------------------------------------------------------------- chat templates

TEMPLATES = {
    "tiny": CHAT_TEMPLATE,
    "gemma3": embedded.GEMMA3_CHAT_TEMPLATE,
    "gemma3-config": (REPO / "conf/model/gemma3_270m.yaml")
    .read_text()
    .split("chat_template: |-\n", 1)[1]
    .replace("\n  ", "\n")
    .strip(),
    "tools-and-json": (
        "{% if tools is not none %}T{% endif %}{% if documents is none %}D{% endif %}"
        "{% for m in messages %}{{ m | tojson }}{% if loop.last %}{% break %}{% endif %}{% endfor %}"
        "{{ eos_token }}{{ additional_special_tokens | join(',') }}{{ extra | default('-') }}"
    ),
    "generation": "{% for m in messages %}{% generation %}[{{ m['content'] }}]{% endgeneration %}{% endfor %}",
}
MESSAGES = [
    {"role": "system", "content": "legend: A means ü"},
    {"role": "user", "content": "  is it <true>?  "},
    {"role": "assistant", "content": "A"},
    {"role": "user", "content": "second"},
]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_chat_templates_render_as_transformers_renders_them(tmp_path: Path, name: str) -> None:
    path = tmp_path / "tok"
    write_tokenizer(path)
    mine, ref = FastTokenizer(path), transformers.AutoTokenizer.from_pretrained(str(path))
    for messages in (MESSAGES, MESSAGES[1:2]):
        for gen in (True, False):
            for extra in ({}, {"extra": "x"}):
                kw = dict(chat_template=TEMPLATES[name], tokenize=False, add_generation_prompt=gen, **extra)
                assert mine.apply_chat_template(messages, **kw) == ref.apply_chat_template(messages, **kw)


def test_raise_exception_in_a_template_raises_as_in_transformers(tmp_path: Path) -> None:
    from jinja2 import TemplateError

    path = tmp_path / "tok"
    write_tokenizer(path)
    template = "{{ raise_exception('roles must alternate') }}"
    for tok in (FastTokenizer(path), transformers.AutoTokenizer.from_pretrained(str(path))):
        with pytest.raises(TemplateError, match="roles must alternate"):
            tok.apply_chat_template(MESSAGES, chat_template=template, tokenize=False)


@torch.inference_mode()
def test_packed_prefill_equals_one_forward_per_segment(pair: tuple[Any, Any]) -> None:
    """Segments of several prompts in one forward (a segment with its parent, two branches of
    one parent, a parent from an earlier forward, segments longer than the window, segments of
    PACK_MIN_TOKENS tokens, the shortest the memo packs) get bitwise the last hidden row and KV cache of a forward of their own over the same parent
    cache (the path test_segmented_prefill_and_decoding_equal_transformers holds to
    transformers)."""
    from lmaudit.backends.gemma3.prefill import Segment, packed_prefill
    from lmaudit.backends.hf_prefill import _forward_alone

    mine, _ = pair
    a, b, c, d, e = _seqs(mine.config.vocab_size, (19, 17, 22, PACK_MIN_TOKENS, PACK_MIN_TOKENS), seed=4)
    _, earlier = _forward_alone(mine, a, 0, None)  # a parent computed before the packed forward
    segments = [
        Segment(b, 0, None),  # a prompt's start
        Segment(c, len(b), 0),  # continues segment 0 in the same forward
        Segment(d, len(b), 0),  # a second branch of segment 0
        Segment(e, len(b) + len(d), 2),  # one token after the branch
        Segment(c, len(a), earlier),  # continues a cache from before
        Segment(b + d, len(a) + len(c), 4),  # and a segment after that
    ]
    got = packed_prefill(mine, segments)
    caches: list[Any] = []
    for seg, (row, cache) in zip(segments, got, strict=True):
        parent = caches[seg.parent] if isinstance(seg.parent, int) else seg.parent
        want_row, want_cache = _forward_alone(mine, seg.ids, seg.start, parent)
        assert torch.equal(row, want_row) and _same_cache(cache, want_cache)
        caches.append(want_cache)
    # the parents were not written into
    _, again = _forward_alone(mine, a, 0, None)
    assert _same_cache(earlier, again)
    with pytest.raises(ValueError, match="earlier one"):
        packed_prefill(mine, [Segment(b, 0, 0)])


@pytest.mark.parametrize("threads", [1, 3, 6])
@torch.inference_mode()
def test_packed_prefill_is_exact_whatever_the_thread_count(tmp_path: Path, threads: int) -> None:
    """With Gemma 3 270M's layer shapes (width 640, 4 heads of 256, one key-value head, MLP
    width 2,048), an element-wise kernel over packed rows splits them between threads by their
    count (and rounds a thread's last elements on a scalar path); random packings of segments
    of at least PACK_MIN_TOKENS tokens (the memo packs no shorter one), with and without parents,
    still give every segment the bits of its own forward at 1, 3 and 6 threads. (The real
    shapes matter: on an AMD EPYC with AVX-512 at 6 threads, MKL's products of width 64 are
    not row-independent below about 20 rows; those of the model's widths are from 4 rows.)"""
    import random

    from lmaudit.backends.gemma3.prefill import Segment, packed_prefill
    from lmaudit.backends.hf_prefill import _forward_alone

    model = gemma3.load_model(
        _checkpoint(
            tmp_path,
            hidden_size=640,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            intermediate_size=2048,
            sliding_window=8,
        )
    )
    vocab = model.config.vocab_size
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rnd = random.Random(threads)
        for trial in range(12):
            lengths = tuple(rnd.randint(PACK_MIN_TOKENS, 60) for _ in range(rnd.randint(2, 6)))
            seqs = _seqs(vocab, lengths, seed=trial)
            _, earlier = _forward_alone(model, seqs[0], 0, None)
            segments = [Segment(seqs[0], len(seqs[0]), earlier)]  # over a cache from before
            for k, seq in enumerate(seqs[1:], start=1):  # alternately a start and a continuation
                parent = k - 1 if k % 2 == 0 else None
                start = segments[k - 1].start + len(segments[k - 1].ids) if parent is not None else 0
                segments.append(Segment(seq, start, parent))
            caches: list[Any] = []
            for seg, (row, cache) in zip(segments, packed_prefill(model, segments), strict=True):
                parent_cache = caches[seg.parent] if isinstance(seg.parent, int) else seg.parent
                want_row, want_cache = _forward_alone(model, seg.ids, seg.start, parent_cache)
                assert torch.equal(row, want_row) and _same_cache(cache, want_cache), (
                    threads,
                    trial,
                    lengths,
                )
                caches.append(want_cache)
    finally:
        torch.set_num_threads(before)
