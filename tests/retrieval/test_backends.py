"""Encoder backends (ONNX Runtime, OpenVINO, int8) against the torch path."""

from __future__ import annotations

import builtins
import shutil

import pytest
import torch

from georag._io import ArtifactError
from georag.cli import main
from georag.retrieval import backends
from georag.retrieval import encoder as encoder_module
from georag.retrieval.backends import Session, check_backend, with_backend
from georag.retrieval.encoder import TextEncoder

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")

TEXTS = [
    "What is the role of p53 in tumour suppression?",
    "Microglia respond to amyloid plaques in Alzheimer's disease.",
    "short",
    "A longer abstract about the boundary layer of a flat plate in hypersonic flow, " * 6,
]


@pytest.fixture(scope="session")
def export_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("georag-encoders")


@pytest.fixture(scope="session")
def reference():
    return TextEncoder(device="cpu", show_progress=False).encode(TEXTS)


@pytest.fixture(scope="session")
def encoders(export_cache):
    """MiniLM under every backend, exported once into a cache for the run; ``openvino-int8``
    is calibrated on a tenth of its texts here (10 s less; the slow recipe tests and the
    benchmarks calibrate on all of them)."""
    queries, passages = backends.calibration_texts()
    with pytest.MonkeyPatch.context() as patch:
        tenth = (queries[::10], passages[::10])
        patch.setattr(encoder_module, "calibration_texts", lambda: tenth)
        return {
            name: TextEncoder(
                device="cpu", backend=name, show_progress=False, cache_dir=export_cache
            )
            for name in backends.BACKENDS[1:]
        }


@pytest.mark.parametrize("name", ["onnx", "openvino"])
def test_fp32_backends_match_torch(encoders, reference, name):
    embeddings = encoders[name].encode(TEXTS)
    assert embeddings.shape == reference.shape
    assert (embeddings * reference).sum(1).min() >= 0.9999
    torch.testing.assert_close(embeddings.norm(dim=1), torch.ones(len(TEXTS)))


@pytest.mark.parametrize("name", ["onnx-int8", "openvino-int8"])
def test_int8_backends_stay_close(encoders, reference, name):
    assert (encoders[name].encode(TEXTS) * reference).sum(1).min() >= 0.95


def test_openvino_int8_keeps_the_first_feed_forward_output_in_fp32(encoders):
    import openvino as ov

    model = ov.Core().read_model(encoders["openvino-int8"].session.path)
    quantized = [
        o.get_friendly_name() for o in model.get_ops() if o.get_type_name() == "FakeQuantize"
    ]
    gelu = [n for n in quantized if "intermediate_act_fn" in n]  # inputs of the FFN outputs
    assert len(gelu) == 5 and not any("layer.0/" in n for n in gelu)
    assert any(n.startswith(r"/module/module.0/encoder/layer.0/") for n in quantized)


def test_order_and_batching_do_not_change_embeddings(encoders):
    encoder = encoders["onnx"]
    whole = encoder.encode(TEXTS)
    encoder.batch_size = 1
    try:
        torch.testing.assert_close(encoder.encode(TEXTS[::-1]), whole.flip(0), atol=1e-5, rtol=0)
    finally:
        encoder.batch_size = 64


def test_cache_keys_separate_backends(encoders):
    torch_encoder = TextEncoder.__new__(TextEncoder)
    torch_encoder.name, torch_encoder.backend = encoders["onnx"].name, "torch"
    names = {torch_encoder.cache_name} | {e.cache_name for e in encoders.values()}
    assert len(names) == len(backends.BACKENDS)
    assert torch_encoder.cache_name == encoders["onnx"].name  # torch keys stay as they were
    assert encoders["onnx"].cache_key() != encoders["onnx-int8"].cache_key()


def test_export_is_reused(export_cache, encoders):
    path = encoders["onnx"].session.path
    again = TextEncoder(device="cpu", backend="onnx", show_progress=False, cache_dir=export_cache)
    assert again.session.path == path
    assert path.parents[3] == export_cache / "encoders"
    assert path.parents[1].name == backends.RECIPE == "v3"  # a changed recipe exports anew


def test_corrupt_export_in_cache_fails_on_load(tmp_path, encoders):
    source = encoders["onnx"].session.path.parents[2]
    cache = tmp_path / "cache"
    shutil.copytree(source, cache / "encoders" / source.name)
    model = cache / "encoders" / source.name / backends.RECIPE / "onnx" / "model.onnx"
    model.write_bytes(model.read_bytes()[:-10])
    with pytest.raises(ArtifactError, match=r"model\.onnx: .*truncated.*remove") as err:
        TextEncoder(device="cpu", backend="onnx", show_progress=False, cache_dir=cache)
    assert "\n" not in str(err.value)
    assert model.stat().st_size > 0  # never exported over


def test_missing_runtime_names_the_extra(monkeypatch):
    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == "openvino":
            raise ImportError("No module named 'openvino'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match=r"pip install 'georag\[openvino\]'"):
        backends.require_runtime("openvino-int8")


def test_unknown_backend_and_cuda():
    with pytest.raises(ValueError, match="encoder_backend: expected one of"):
        check_backend("tensorrt")
    with pytest.raises(ValueError, match="runs on the CPU"):
        check_backend("onnx", torch.device("cuda"))
    assert check_backend("torch", torch.device("cuda")) == "torch"


def test_cli_rejects_an_unknown_backend(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--dataset", "scifact", "--encoder-backend", "tensorrt"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("georag: error:") and "--encoder-backend" in err


def test_options_reach_the_encoder_stages():
    options = with_backend("ricci+bi", {"ricci": {"k": 3}}, "onnx")
    assert options == {"ricci": {"k": 3}, "bi": {"encoder_backend": "onnx"}}
    assert with_backend("ricci+ce", {"ce": {"encoder_backend": "torch"}}, "onnx") == {
        "ce": {"encoder_backend": "torch"}
    }
    assert with_backend("maniscope", None, "onnx-int8") == {}


def test_thread_policy_reaches_the_sessions(encoders):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name in ("onnx", "openvino"):
            session = Session(encoders[name].session.path)
            assert session.threads == 1
        ort = Session(encoders["onnx"].session.path, threads=2)
        assert ort._session.get_session_options().intra_op_num_threads == 2
        assert ort._session.get_session_options().inter_op_num_threads == 1
        ov = Session(encoders["openvino"].session.path, threads=1)
        assert int(ov._compiled.get_property("INFERENCE_NUM_THREADS")) == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_mpnet_bi_encoder_through_onnx(export_cache, monkeypatch):
    from georag.rerank.bi_encoder import BiEncoderConfig, BiEncoderReranker, _parts_installed

    if not _parts_installed():
        pytest.skip("all-mpnet-base-v2 is not installed (extra 'mpnet')")
    monkeypatch.setenv("GEORAG_CACHE", str(export_cache))
    embeddings = {}
    for name in ("torch", "onnx", "openvino"):
        config = BiEncoderConfig(cache=False, encoder_backend=name)
        embeddings[name] = BiEncoderReranker(config).encode(TEXTS)
    for name in ("onnx", "openvino"):
        assert (embeddings[name] * embeddings["torch"]).sum(1).min() >= 0.9999


def test_commands_take_the_backend():
    from georag.cli import _build_parser, _eval_config, _serve_config

    parser = _build_parser()
    serve = parser.parse_args(["serve", "--method", "maniscope", "--encoder-backend", "onnx"])
    assert _serve_config(serve).encoder_backend == "onnx"
    evaluate = parser.parse_args(["eval", "--dataset", "x", "--encoder-backend", "openvino"])
    assert _eval_config(evaluate).encoder_backend == "openvino"
    for command in (["demo"], ["index", "--dataset", "x", "--out", "y"]):
        assert parser.parse_args(command).encoder_backend == "torch"


def test_reranker_api_on_onnx(encoders, export_cache, monkeypatch):
    from georag import Reranker

    monkeypatch.setenv("GEORAG_CACHE", str(export_cache))
    docs = [{"id": str(i), "text": t} for i, t in enumerate(TEXTS)]
    ranked = {
        name: Reranker("maniscope", encoder_backend=name).rank("p53 and tumours", docs)
        for name in ("torch", "onnx")
    }
    assert [d.id for d in ranked["onnx"]] == [d.id for d in ranked["torch"]]


def test_index_built_with_another_backend(tmp_path, encoders, export_cache, monkeypatch, capsys):
    from georag.data.beir import load_beir
    from georag.data.bundled import DEMO_DIR
    from georag.retrieval.store import IndexStore, build_store

    monkeypatch.setenv("GEORAG_CACHE", str(export_cache))
    data = load_beir(str(DEMO_DIR))
    corpus = dict(list(data.corpus.items())[:20])
    data = type(data)(data.name, corpus, data.queries, data.qrels)
    build_store(data, tmp_path / "index", encoder_backend="onnx")
    store = IndexStore.load(tmp_path / "index")
    assert store.encoder_backend == "onnx" and store.search("tumour", k=2, first_stage="dense")
    argv = ["search", "--index", str(tmp_path / "index"), "--encoder-backend", "torch", "tumour"]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("georag: error: --encoder-backend:") and "built with 'onnx'" in err


def test_corpus_index_records_the_backend(tmp_path, encoders):
    from georag.retrievers.index import CorpusIndex, build_index

    docs = [{"id": str(i), "title": "", "text": t} for i, t in enumerate(TEXTS)]
    index = build_index(docs, tmp_path / "corpus", encoder=encoders["onnx"])
    assert index.manifest["encoder_backend"] == "onnx"
    assert CorpusIndex.open(tmp_path / "corpus").store().encoder_backend == "onnx"
    index.check_encoder(encoders["onnx"])
    with pytest.raises(ValueError, match="encoder_backend is 'onnx', the encoder's is 'onnx-int8'"):
        index.check_encoder(encoders["onnx-int8"])
    index.manifest["encoder_export"] = "v1"  # an index of an older export recipe
    with pytest.raises(ValueError, match="encoder_export is 'v1', the encoder's is 'v3'"):
        index.check_encoder(encoders["onnx"])


def test_calibration_texts_are_queries_and_passages():
    queries, passages = backends.calibration_texts()
    assert len(queries) >= 50 and len(passages) >= 100
    assert len(set(queries + passages)) == len(queries) + len(passages)
    assert max(len(q.split()) for q in queries) < min(len(p.split()) for p in passages)


@pytest.mark.parametrize("name", ["openvino", "openvino-int8"])
def test_openvino_pads_to_few_shapes_without_changing_rows(encoders, monkeypatch, name):
    assert [backends.padded_size(n) for n in (1, 3, 5, 8, 9, 17, 64, 65)] == [
        1,
        4,
        8,
        8,
        16,
        24,
        64,
        72,
    ]
    texts = TEXTS[:3]  # three rows of uneven length: padded to four rows of a multiple of 8
    padded = encoders[name].encode(texts)
    monkeypatch.setattr(backends, "_padded", lambda arrays: arrays)
    # int8: another length may round an activation to the next int8 step (1.3e-4 seen with
    # a calibration on a tenth of the texts), which is why a row runs at one padded length
    atol = 1e-5 if name == "openvino" else 1e-3
    torch.testing.assert_close(encoders[name].encode(texts), padded, atol=atol, rtol=0)


def test_int8_embedding_does_not_depend_on_the_batch(encoders):
    """A text runs at its own padded length in any batch, so int8 rounds it the same way."""
    encoder = encoders["openvino-int8"]
    texts = TEXTS + [
        f"{word} of the tumour suppressor in {n} cells"
        for n, word in enumerate(
            ["the role", "a function", "what is the effect", "loss", "expression"], start=3
        )
    ]
    alone = torch.cat([encoder.encode([t]) for t in texts])
    torch.testing.assert_close(encoder.encode(texts), alone, atol=1e-6, rtol=0)
    torch.testing.assert_close(encoder.encode(texts[::-1]), alone.flip(0), atol=1e-6, rtol=0)
