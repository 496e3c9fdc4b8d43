"""One entry point for every data set georag evaluates on: BEIR folders and multi-hop QA files."""

from __future__ import annotations

import os
from pathlib import Path

from georag.data.beir import BeirDataset, load_beir
from georag.data.multihop import load_multihop
from georag.resources import data_roots

__all__ = ["load_dataset", "MULTIHOP_FILES"]

# Short names of the multi-hop files in the shared data folder (see its README).
MULTIHOP_FILES = {
    "hotpotqa_dev500": "hotpotqa_dev500_ircot/dev_subsampled.jsonl",
    "musique_train100": "musique_small/musique_train100_hipporag.json",
    "musique_qa100": "musique_small/musique_qa100_kag.json",
}


def load_dataset(
    name_or_path: str | os.PathLike,
    *,
    split: str = "test",
    data_dir: str | os.PathLike | None = None,
) -> BeirDataset:
    """Load a BEIR folder or name, a multi-hop ``.json``/``.jsonl`` file, or a multi-hop name.

    Multi-hop sets pool every question's paragraphs into one corpus, with the supporting
    paragraphs as relevance labels (``split`` does not apply to them).
    """
    path = Path(name_or_path)
    if path.suffix in (".json", ".jsonl"):
        return load_multihop(path)
    name = str(name_or_path)
    if name in MULTIHOP_FILES:
        roots = data_roots(data_dir)
        for root in roots:
            if (root / MULTIHOP_FILES[name]).is_file():
                return load_multihop(root / MULTIHOP_FILES[name], name=name)
        raise ValueError(
            f"name_or_path: {name!r} not found under {[str(r) for r in roots]} "
            f"(expected {MULTIHOP_FILES[name]})"
        )
    return load_beir(name_or_path, split=split, data_dir=data_dir)
