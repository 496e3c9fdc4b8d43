"""``georag explain``: why ``hipporag2`` or ``iso_entity`` ranks what it ranks for one
question, as text and as a picture (PNG, or an HTML page with ``--html``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from georag.perf.bench import positive_int

__all__ = ["add_explain_parser", "cmd_explain"]

METHODS = ("hipporag2", "iso_entity")


def add_explain_parser(sub) -> None:
    """The ``explain`` subcommand's options, on the subparsers ``sub``."""
    parser = sub.add_parser(
        "explain",
        help="seeds, paths and pruning behind one question's ranking by a graph retriever",
    )
    parser.add_argument("--dataset", help="data set name or folder (e.g. the bundled demo's)")
    parser.add_argument("--data-dir", help="where data set names resolve")
    parser.add_argument("--query", help="with --dataset: the id of the question to explain")
    parser.add_argument("--index", type=Path, help="an index folder ('georag index') instead")
    parser.add_argument("question", nargs="*", help="with --index: the question's text")
    parser.add_argument("--method", choices=METHODS, default="hipporag2", help="graph retriever")
    parser.add_argument("-k", type=positive_int, default=5, help="top passages explained")
    parser.add_argument("--out", type=Path, help="PNG to draw (default runs/explain/QUERY.png)")
    parser.add_argument("--html", type=Path, help="write this HTML page instead of a PNG")


def _from_dataset(args: argparse.Namespace):
    from georag.data.datasets import load_dataset
    from georag.eval.demo import fitted_retriever, query_batch
    from georag.resources import DEFAULT_MODEL
    from georag.retrieval.encoder import TextEncoder

    if args.query is None:
        raise ValueError("--query: give the id of a question of --dataset")
    if args.question:
        raise ValueError("question: a text goes with --index; with --dataset give --query ID")
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    query_batch(dataset, args.query, None)  # an unknown id fails before the model loads
    encoder = TextEncoder(DEFAULT_MODEL)
    query = query_batch(dataset, args.query, encoder)
    retriever = fitted_retriever(dataset, args.method, encoder)
    return retriever, query, set(dataset.qrels.get(args.query, {})), args.query


def _from_index(args: argparse.Namespace):
    from georag.batch import QueryBatch
    from georag.rerank.registry import make_reranker
    from georag.retrieval.encoder import TextEncoder
    from georag.retrievers.index import CorpusIndex

    text = " ".join(args.question).strip()
    if not text:
        raise ValueError("question: give the question's text after --index DIR")
    if args.query is not None:
        raise ValueError("--query: names a question of --dataset; with --index give its text")
    index = CorpusIndex.open(args.index)
    backend = index.manifest.get("encoder_backend", "torch")
    encoder = TextEncoder(index.model, show_progress=False, backend=backend)
    retriever = make_reranker(args.method).fit(index.corpus())
    embeddings = encoder.encode([text]).to(index.embeddings.dtype)
    return retriever, QueryBatch(["question"], [text], embeddings), None, "question"


def cmd_explain(args: argparse.Namespace) -> None:
    from georag.eval.explain import explain
    from georag.eval.explain_draw import draw_png, drawing, write_html

    if (args.dataset is None) == (args.index is None):
        raise ValueError("--dataset or --index: give exactly one")
    if args.out is not None and args.html is not None:
        raise ValueError("--html: writes the picture instead of --out; give one of them")
    if args.index is not None:
        retriever, query, relevant, name = _from_index(args)
    else:
        retriever, query, relevant, name = _from_dataset(args)
    explanation = explain(retriever, query, k=args.k, relevant=relevant)
    text = explanation.text()
    print(text)
    picture = drawing(explanation)
    if args.html is not None:
        written = write_html(picture, text, args.html)
    else:
        written = draw_png(picture, args.out or Path("runs/explain") / f"{name}.png")
    print(f"wrote {written}")
