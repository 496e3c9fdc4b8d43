"""How ``openvino-int8`` was chosen: int8 recipes of MiniLM side by side on training sets.

Each recipe runs the fp32 ONNX export of :mod:`georag.retrieval.backends`:

- ``openvino-int8``: the backend, NNCF post-training quantization with
  ``ModelType.TRANSFORMER`` (int8 weights and activations, calibrated on
  :func:`~georag.retrieval.backends.calibration_texts`), SmoothQuant at alpha 0.8 and the
  first layer's feed-forward output projection in fp32;
- ``all-int8``: NNCF's defaults (SmoothQuant at 0.95, every MatMul int8);
- ``smoothquant-0.8`` and ``layer0-ffn-fp32``: each half of the backend's change alone;
- ``ffn-fp32``: NNCF's defaults with every feed-forward output projection (the MatMul after
  GELU, whose inputs have the widest range) in fp32;
- ``weights``: NNCF's data-free weight compression (INT8_ASYM; activations stay fp32);
- ``onnx-int8``: ONNX Runtime's dynamic quantization, the ``onnx-int8`` backend.

:func:`sensitivity` located the int8 error first: the cosine to torch of NNCF variants
that keep one kind of operation, one layer or one layer's feed-forward output projection in
fp32, or move SmoothQuant's alpha (:data:`SCAN`).

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

from georag.retrieval.backends import (
    INT8_FP32_OPS,
    SMOOTH_QUANT_ALPHA,
    Session,
    quantize_openvino,
)
from georag.retrieval.encoder import TextEncoder

__all__ = ["RECIPES", "SCAN", "TRAINING_SETS", "compare", "sensitivity"]

RECIPES = (
    "openvino-int8",
    "all-int8",
    "smoothquant-0.8",
    "layer0-ffn-fp32",
    "ffn-fp32",
    "weights",
    "onnx-int8",
)
TRAINING_SETS = ("musique_train200", "2wikimultihopqa_train500")
_FFN_OUT = r".*layer\.{}/output/dense/MatMul$"
#: the sensitivity scan's NNCF variants: (operations kept in fp32, SmoothQuant alpha on
#: MatMuls; None: NNCF's 0.95, -1: off)
SCAN = {
    "nncf-defaults": ((), None),
    "ffn-out-fp32": ((_FFN_OUT.format(r"\d+"),), None),
    "ffn-in-fp32": ((r".*intermediate/dense/MatMul$",), None),
    "attention-out-fp32": ((r".*attention/output/dense/MatMul$",), None),
    "qkv-fp32": ((r".*attention/self/(query|key|value)/MatMul$",), None),
    **{f"layer{i}-fp32": ((rf".*layer\.{i}/.*",), None) for i in range(6)},
    **{f"layer{i}-ffn-out-fp32": ((_FFN_OUT.format(i),), None) for i in range(6)},
    "smoothquant-off": ((), -1),
    **{f"smoothquant-{alpha}": ((), alpha) for alpha in (0.8, 0.9, 0.99)},
    "layer0-ffn-out-fp32, smoothquant-0.9": ((_FFN_OUT.format(0),), 0.9),
    "layer0-ffn-out-fp32, smoothquant-0.8 (openvino-int8)": (INT8_FP32_OPS, SMOOTH_QUANT_ALPHA),
    "layer0-1-ffn-out-fp32, smoothquant-0.8": ((_FFN_OUT.format("[01]"),), 0.8),
}


#: NNCF recipes other than the backend's, as variants of :data:`SCAN`
_NNCF = {
    "all-int8": SCAN["nncf-defaults"],
    "smoothquant-0.8": SCAN["smoothquant-0.8"],
    "layer0-ffn-fp32": SCAN["layer0-ffn-out-fp32"],
    "ffn-fp32": SCAN["ffn-out-fp32"],
}


def _onnx_export() -> Path:
    """MiniLM's fp32 ONNX export (made on first use), the source of every NNCF variant."""
    return TextEncoder(device="cpu", backend="onnx", show_progress=False).session.path


def _fp32_model(onnx: Path):
    """A fresh fp32 OpenVINO model of the ONNX export ``onnx``."""
    import openvino as ov

    return ov.convert_model(str(onnx))


def _saved(model, path: Path) -> Session:
    import openvino as ov

    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(path), compress_to_fp16=False)
    return Session(path)


def _build(recipe: str, folder: Path, encoder: TextEncoder, onnx: Path) -> Session:
    """A session of ``recipe`` (all but the backends written into ``folder``, from the
    ONNX export ``onnx``); ``encoder`` (torch) tokenizes the calibration texts."""
    if recipe in ("openvino-int8", "onnx-int8"):
        return TextEncoder(device="cpu", backend=recipe, show_progress=False).session
    model = _fp32_model(onnx)
    if recipe == "weights":
        import nncf

        model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    else:
        model = quantize_openvino(model, encoder._calibration, *_NNCF[recipe])
    return _saved(model, folder / recipe / "model.xml")


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
    onnx = _onnx_export()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for recipe in ("torch", *recipes):
            session = None
            if recipe != "torch":
                session = _build(recipe, Path(tmp), encoder, onnx)
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


def sensitivity(
    data_dir: str | None, variants: dict = SCAN, sets=TRAINING_SETS, per_set: int = 200
) -> list[dict]:
    """Where the int8 error comes from: one row per NNCF variant of :data:`SCAN`, the
    cosine of its embeddings to torch's (mean, 1st percentile, min) over ``per_set``
    questions and ``2 * per_set`` passages of each training set."""
    encoder = TextEncoder(device="cpu", show_progress=False)
    texts = []
    for name in sets:
        queries, passages, _ = _training_set(name, data_dir)
        texts += queries[:per_set] + passages[: 2 * per_set]
    reference = _encode(encoder, None, texts)
    onnx = _onnx_export()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (variant, (ignored, alpha)) in enumerate(variants.items()):
            model = quantize_openvino(_fp32_model(onnx), encoder._calibration, ignored, alpha)
            cosine = (
                _encode(encoder, _saved(model, Path(tmp) / str(i) / "model.xml"), texts) * reference
            ).sum(1)
            rows.append(
                {
                    "variant": variant,
                    "cos_mean": float(cosine.mean()),
                    "cos_p1": float(np.percentile(cosine, 1)),
                    "cos_min": float(cosine.min()),
                }
            )
            print(rows[-1], flush=True)
    return rows
