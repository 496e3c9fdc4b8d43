"""One entry point for every data set georag evaluates on: BEIR folders and multi-hop QA files."""

from __future__ import annotations

import os
from pathlib import Path

from georag.data.beir import BeirDataset, load_beir
from georag.data.multihop import load_multihop
from georag.data.multihop_readers import hipporag_files
from georag.resources import data_roots

__all__ = ["load_dataset", "MULTIHOP_FILES"]

# Short names of the multi-hop files and folders in the shared data folder (see its README).
MULTIHOP_FILES = {
    "hotpotqa_dev500": "hotpotqa_dev500_ircot/dev_subsampled.jsonl",
    "musique_train100": "musique_small/musique_train100_hipporag.json",
    "musique_qa100": "musique_small/musique_qa100_kag.json",
    "musique_train200": "musique_small/musique_train200_hipporag_kotlin.jsonl",
    "2wikimultihopqa_hipporag": "2wikimultihopqa_hipporag",
    "2wikimultihopqa_train500": "2wikimultihopqa_train500/2wikimultihopqa_train500_migres.json",
}


def load_dataset(
    name_or_path: str | os.PathLike,
    *,
    split: str = "test",
    data_dir: str | os.PathLike | None = None,
) -> BeirDataset:
    """Load a BEIR folder or name, a multi-hop file or folder, or a multi-hop name.

    Parameters
    ----------
    name_or_path : str or path
        A multi-hop ``.json``/``.jsonl`` file, a folder of HippoRAG's layout (``NAME.json``
        with ``NAME_corpus.json``), a name of :data:`MULTIHOP_FILES`, or a BEIR folder or
        name (see :func:`georag.data.beir.load_beir`).
    split : str
        The BEIR qrels split; multi-hop sets have one set of labels and ignore it.
    data_dir : path, optional
        Where names resolve; defaults to ``$GEORAG_DATA``.

    Returns
    -------
    BeirDataset
        Multi-hop sets pool every question's paragraphs into one corpus (HippoRAG's layout
        keeps its open corpus), with the supporting paragraphs as relevance labels; see
        :func:`georag.data.multihop.load_multihop`.
    """
    path = Path(name_or_path)
    if path.suffix in (".json", ".jsonl") or hipporag_files(path) is not None:
        return load_multihop(path)
    name = str(name_or_path)
    if name in MULTIHOP_FILES:
        roots = data_roots(data_dir)
        for root in roots:
            if (root / MULTIHOP_FILES[name]).exists():
                return load_multihop(root / MULTIHOP_FILES[name], name=name)
        raise ValueError(
            f"name_or_path: {name!r} not found under {[str(r) for r in roots]} "
            f"(expected {MULTIHOP_FILES[name]})"
        )
    return load_beir(name_or_path, split=split, data_dir=data_dir)
