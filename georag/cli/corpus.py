"""``georag index`` (build, ``add``, ``delete``) and ``georag search``: the commands over
a saved index (a corpus index, a first-stage store or a Lorentz index)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["cmd_index", "cmd_search"]


def cmd_index(args: argparse.Namespace) -> None:
    if args.action is not None:
        _index_update(args)
        return
    if args.out is None:
        raise ValueError("--out is required")
    if args.corpus is None and args.dataset is None:
        raise ValueError("--corpus or --dataset is required")
    if args.hyperbolic:
        from georag.data.beir import load_beir
        from georag.rerank.geometric.hyte import HyTEConfig, build_index

        if args.dataset is None:
            raise ValueError("--hyperbolic: give the corpus as --dataset")
        dataset = load_beir(args.dataset, data_dir=args.data_dir)
        docs = {doc_id: doc.full_text for doc_id, doc in dataset.corpus.items()}
        index = build_index(docs, args.out, HyTEConfig(weights=args.weights))
        print(f"indexed {len(index.texts)} chunks of {len(docs)} documents into {args.out}")
        return
    from georag.retrieval.encoder import TextEncoder
    from georag.retrievers.index import build_index, documents_from_dataset, read_documents

    if args.corpus is not None:
        documents = read_documents(args.corpus)
    else:
        from georag.data.datasets import load_dataset

        documents = documents_from_dataset(load_dataset(args.dataset, data_dir=args.data_dir))
    encoder = None
    if args.encoder_backend != "torch":
        encoder = TextEncoder(args.model, backend=args.encoder_backend)
    index = build_index(
        documents, args.out, model=args.model, kind=args.kind, graphs=args.graph, encoder=encoder
    )
    graphs = ", ".join(index.graphs) or "none"
    print(f"indexed {index.size} documents into {args.out} (graphs: {graphs})")


def _index_update(args: argparse.Namespace) -> None:
    from georag.retrievers.index import read_documents, update_index

    if args.action == "add":
        index = update_index(args.index, add=read_documents(args.documents))
        print(f"added; {args.index} holds {index.size} documents ({index.generation.name})")
        return
    ids = list(args.ids)
    if args.ids_file is not None:
        if not args.ids_file.is_file():
            raise ValueError(f"--ids-file: no such file {args.ids_file}")
        ids += [line.strip() for line in args.ids_file.read_text().splitlines() if line.strip()]
    if not ids:
        raise ValueError("delete: give ids or --ids-file")
    index = update_index(args.index, delete=ids)
    print(f"deleted; {args.index} holds {index.size} documents ({index.generation.name})")


def _is_lorentz_index(folder: Path) -> bool:
    import json

    from georag.retrieval.lorentz_index import FORMAT

    manifest = folder / "manifest.json"
    try:
        return json.loads(manifest.read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def cmd_search(args: argparse.Namespace) -> None:
    query = " ".join(args.query)
    if _is_lorentz_index(args.index):
        from georag.retrieval.lorentz_index import LorentzIndex

        index = LorentzIndex.load(args.index)
        alpha = index.alpha if args.alpha is None else args.alpha
        scores, rows = index.search([query], k=args.k, alpha=alpha)
        print(
            f"Lorentz index {args.index}: BM25 top-{index.top_m}, then "
            f"score = {alpha:g} * BM25/max + {1 - alpha:g} * sigmoid(<p_d, p_q>_L + "
            f"{index.offset:g}) (higher is better); id = source#chunk"
        )
        hits = [
            (index.chunk_ids[j], s, index.texts[j])
            for s, j in zip(scores[0].tolist(), rows[0].tolist())
        ]
    elif args.method is not None:
        from georag.retrievers.retriever import Retriever

        retriever = Retriever(args.index, method=args.method)
        print(f"index {args.index}: method {args.method} (higher is better)")
        hits = [(d.id, d.score, d.text) for d in retriever.retrieve(query, k=args.k)]
    else:
        from georag.retrieval.generations import is_root
        from georag.retrieval.store import IndexStore

        if is_root(args.index):
            from georag.retrievers.index import CorpusIndex

            store = CorpusIndex.open(args.index).store()
        else:
            store = IndexStore.load(args.index)
        if args.encoder_backend not in (None, store.encoder_backend):
            raise ValueError(
                f"--encoder-backend: the index {args.index} was built with "
                f"{store.encoder_backend!r}, not {args.encoder_backend!r}"
            )
        print(f"index {args.index}: {_SEARCH_MODES[args.first_stage]}")
        hits = store.search(query, k=args.k, first_stage=args.first_stage)
    for rank, (doc_id, score, text) in enumerate(hits, start=1):
        print(f"{rank:3d}  {score:8.4f}  {doc_id}  {' '.join(text.split())[:100]}")


_SEARCH_MODES = {
    "hybrid": "hybrid first stage, score = reciprocal-rank fusion (k=60) of dense and BM25 "
    "(higher is better)",
    "dense": "dense first stage, score = cosine similarity",
    "bm25": "BM25 first stage, score = BM25 (Lucene)",
}
