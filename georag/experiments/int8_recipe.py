"""How ``openvino-int8`` was chosen: int8 recipes of MiniLM side by side on training sets.

Each recipe runs the fp32 ONNX export of :mod:`georag.retrieval.backends`:

- ``activations``: NNCF post-training quantization with ``ModelType.TRANSFORMER`` (int8
  weights and activations, calibrated on :func:`~georag.retrieval.backends.calibration_texts`),
  the recipe of ``openvino-int8``;
- ``ffn-fp32``: the same with the feed-forward output projections (the MatMul after GELU,
  whose inputs have the widest range) left in fp32;
- ``weights``: NNCF's data-free weight compression (INT8_ASYM; activations stay fp32);
- ``onnx-int8``: ONNX Runtime's dynamic quantization, the ``onnx-int8`` backend.

Quality is read on training sets only (musique_train200, 2wikimultihopqa_train500): the
dense Recall@5 over each set's pooled corpus, its change from torch, and the cosine of every
embedding to torch's. Speed: B=1 median latency over the set's questions and documents/s
over its passages, on the caller's thread count.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from georag.retrieval.backends import Session, quantize_openvino
from georag.retrieval.encoder import TextEncoder

__all__ = ["RECIPES", "TRAINING_SETS", "compare"]

RECIPES = ("activations", "ffn-fp32", "weights", "onnx-int8")
TRAINING_SETS = ("musique_train200", "2wikimultihopqa_train500")
_FFN_OUT = r".*layer\.\d+/output/dense/MatMul$"


def _build(recipe: str, folder: Path, encoder: TextEncoder) -> Session:
    """A session of ``recipe`` (``ffn-fp32`` and ``weights`` written into ``folder``);
    ``encoder`` (torch) tokenizes the calibration texts."""
    if recipe in ("activations", "onnx-int8"):
        backend = "openvino-int8" if recipe == "activations" else recipe
        return TextEncoder(device="cpu", backend=backend, show_progress=False).session
    import nncf
    import openvino as ov

    fp32 = TextEncoder(device="cpu", backend="onnx", show_progress=False).session.path
    model = ov.convert_model(str(fp32))
    if recipe == "weights":
        model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    else:
        model = quantize_openvino(model, encoder._calibration, ignored=(_FFN_OUT,))
    path = folder / recipe / "model.xml"
    ov.save_model(model, str(path), compress_to_fp16=False)
    return Session(path)


def _encode(encoder: TextEncoder, session: Session | None, texts: list[str]) -> np.ndarray:
    """Unit rows (N, D) of ``texts`` by ``session`` run as the torch ``encoder``'s exported
    model (the torch model itself when None), 64 texts per call."""
    if session is None:
        return encoder.encode(texts).numpy()
    saved, encoder.session = encoder.session, session
    try:
        return encoder.encode(texts).numpy()
    finally:
        encoder.session = saved


def _recall_at_5(queries: np.ndarray, corpus: np.ndarray, gold: list[set[int]]) -> float:
    top = np.argsort(-(queries @ corpus.T), axis=1)[:, :5]
    return float(np.mean([len(set(row) & g) / len(g) for row, g in zip(top, gold)]))


def _training_set(name: str, data_dir: str | None) -> tuple[list[str], list[str], list[set[int]]]:
    from georag.data.datasets import load_dataset

    data = load_dataset(name, data_dir=data_dir)
    ids = list(data.corpus)
    row = {doc_id: i for i, doc_id in enumerate(ids)}
    qids = [q for q in data.queries if any(r > 0 for r in data.qrels.get(q, {}).values())]
    gold = [{row[d] for d, r in data.qrels[q].items() if r > 0 and d in row} for q in qids]
    texts = [data.corpus[d].full_text for d in ids]
    return [data.queries[q] for q in qids], texts, gold


def _speed(encoder: TextEncoder, session: Session | None, queries, passages) -> dict:
    times = []
    for query in queries[:8] + queries[:200]:
        start = time.perf_counter()
        _encode(encoder, session, [query])
        times.append(1000.0 * (time.perf_counter() - start))
    start = time.perf_counter()
    _encode(encoder, session, passages[:500])
    return {
        "b1_median_ms": float(np.median(times[8:])),
        "docs_per_s": min(500, len(passages)) / (time.perf_counter() - start),
    }


def compare(data_dir: str | None, recipes=RECIPES, sets=TRAINING_SETS) -> list[dict]:
    """One row per (recipe, training set), torch first: Recall@5, its change from torch,
    the cosine to torch (min, mean over questions and passages), B=1 ms and docs/s."""
    encoder = TextEncoder(device="cpu", show_progress=False)
    data = {name: _training_set(name, data_dir) for name in sets}
    reference = {
        name: (_encode(encoder, None, q), _encode(encoder, None, c))
        for name, (q, c, _) in data.items()
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for recipe in ("torch", *recipes):
            session = None
            if recipe != "torch":
                (Path(tmp) / recipe).mkdir()
                session = _build(recipe, Path(tmp), encoder)
            for name, (queries, passages, gold) in data.items():
                q, c = (
                    reference[name]
                    if session is None
                    else (_encode(encoder, session, queries), _encode(encoder, session, passages))
                )
                cosine = np.concatenate(
                    [(q * reference[name][0]).sum(1), (c * reference[name][1]).sum(1)]
                )
                recall = _recall_at_5(q, c, gold)
                rows.append(
                    {
                        "recipe": recipe,
                        "set": name,
                        "recall@5": recall,
                        "delta": recall - _recall_at_5(*reference[name], gold),
                        "cos_min": float(cosine.min()),
                        "cos_mean": float(cosine.mean()),
                        **_speed(encoder, session, queries, passages),
                    }
                )
                print(rows[-1], flush=True)
    return rows
