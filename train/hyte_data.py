"""Query-document pairs with BM25 hard negatives for training the HyTE-H projection.

Training pairs come from a BEIR training qrels split (scifact has ``qrels/train.tsv``).
Validation (the checkpoint monitor) uses a seeded share of the *training* queries held out
from the pairs (``val_fraction``), never the test split. Texts are tokenized once in
:meth:`HyTEDataModule.setup`; batches carry padded word-piece ids.
"""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from georag.data.beir import load_beir
from georag.models.hyte import TokenIds
from georag.resources import DEFAULT_MODEL
from georag.retrieval.bm25 import BM25Index

__all__ = ["HyTEDataModule", "PairDataset"]


class PairDataset(Dataset):
    """(query, positive document, hard negatives) index triples.

    Parameters
    ----------
    pairs : numpy.ndarray, shape (P, 2), int64
        Rows ``(query index, positive document index)``.
    negatives : list of numpy.ndarray
        For each query index, BM25-ranked documents that are not positives.
    hard_negatives : int
        Negatives drawn per pair (uniformly from the query's list, with replacement).
    """

    def __init__(self, pairs: np.ndarray, negatives: list[np.ndarray], hard_negatives: int):
        self.pairs = pairs
        self.negatives = negatives
        self.hard_negatives = hard_negatives

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> tuple[int, int, np.ndarray]:
        query, positive = self.pairs[i]
        pool = self.negatives[query]
        draw = torch.randint(len(pool), (self.hard_negatives,)).numpy() if len(pool) else []
        return int(query), int(positive), pool[draw].astype(np.int64)


class HyTEDataModule(L.LightningDataModule):
    """Training pairs, BM25 hard negatives and a validation split of a BEIR data set.

    Parameters
    ----------
    dataset : str
        A BEIR name (resolved under ``data_dir`` or ``$GEORAG_DATA``, else downloaded by
        :func:`georag.data.beir.load_beir`) or folder.
    data_dir : str, optional
        Where named data sets live.
    train_split : str
        Qrels file of the training queries.
    val_fraction : float
        Share of the training queries (seeded) held out for validation NDCG@10; their pairs
        are not trained on. 0 trains on every query without validation (then also pass
        ``trainer.limit_val_batches=0`` and no checkpoint monitor): a refit for an epoch
        count chosen on held-out queries before.
    val_split : str, optional
        Validate on this qrels split instead of held-out training queries (a dev split);
        ``test`` is refused, since validation picks the checkpoint.
    model_path : str
        The checkpoint whose tokenizer the projection's word embeddings belong to.
    batch_size : int
        Pairs per batch (in-batch negatives: the other pairs' documents).
    hard_negatives : int
        BM25 hard negatives per pair (0 for in-batch negatives only).
    random_negatives : int
        Documents drawn uniformly from the corpus per batch, shared by its queries: they
        keep documents that never appear in a pair from drifting towards every query.
    negative_depth : int
        Hard negatives are drawn from this many top BM25 non-positives.
    max_pairs : int, optional
        Use a seeded random subset of the training pairs (for short runs and tests).
    max_corpus : int, optional
        Keep at most this many documents: all judged ones, then others in corpus order.
    max_tokens : int
        Word pieces kept per document.
    bm25_tokenizer : str
        BM25 tokenizer for hard negatives and validation candidates (paper: whitespace).
    val_top_m : int
        BM25 candidates per validation query for the hybrid metric (paper: 50).
    seed : int
        Seed of the pair subset.
    num_workers : int
        DataLoader workers.
    """

    def __init__(
        self,
        dataset: str = "scifact",
        data_dir: str | None = None,
        train_split: str = "train",
        val_fraction: float = 0.2,
        val_split: str | None = None,
        model_path: str = DEFAULT_MODEL,
        batch_size: int = 32,
        hard_negatives: int = 1,
        random_negatives: int = 0,
        negative_depth: int = 20,
        max_pairs: int | None = None,
        max_corpus: int | None = None,
        max_tokens: int = 512,
        bm25_tokenizer: str = "whitespace",
        val_top_m: int = 50,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        if batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 for in-batch negatives, got {batch_size}")
        if hard_negatives < 0 or random_negatives < 0 or negative_depth < 1:
            raise ValueError(
                f"need hard_negatives >= 0, random_negatives >= 0 and "
                f"negative_depth >= 1, got {hard_negatives}, {random_negatives}, "
                f"{negative_depth}"
            )
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"val_fraction must lie in [0, 1), got {val_fraction}")
        if val_split == "test":
            raise ValueError(
                "val_split: 'test' would choose the checkpoint on the test split; "
                "leave it unset to validate on held-out training queries"
            )
        self.save_hyperparameters()
        self._ready = False

    # ------------------------------------------------------------------ setup
    def setup(self, stage: str | None = None) -> None:
        if self._ready:
            return
        hp = self.hparams
        train = load_beir(hp.dataset, split=hp.train_split, data_dir=hp.data_dir)
        if hp.val_split is not None:
            val = load_beir(hp.dataset, split=hp.val_split, data_dir=hp.data_dir)
            val_qrels, val_queries = val.qrels, val.queries
        else:  # hold out a seeded share of the training queries
            judged_q = sorted(q for q, docs in train.qrels.items() if any(docs.values()))
            order = np.random.default_rng(hp.seed).permutation(len(judged_q))
            held = {judged_q[i] for i in order[: round(hp.val_fraction * len(judged_q))]}
            val_qrels = {q: train.qrels[q] for q in sorted(held)}
            val_queries = {q: train.queries[q] for q in sorted(held)}
            train_qrels = {q: d for q, d in train.qrels.items() if q not in held}
            train = type(train)(
                train.name, train.corpus, {q: train.queries[q] for q in train_qrels}, train_qrels
            )
        self.held_out_qids = sorted(val_queries) if hp.val_split is None else []
        pairs = sorted(
            (q, d) for q, docs in train.qrels.items() for d, rel in docs.items() if rel > 0
        )
        if hp.max_pairs is not None and hp.max_pairs < len(pairs):
            pick = np.random.default_rng(hp.seed).permutation(len(pairs))[: hp.max_pairs]
            pairs = [pairs[i] for i in sorted(pick)]
        if not pairs:
            raise ValueError(f"train_split: {hp.train_split!r} has no positive pairs")
        judged = {d for _, d in pairs} | {d for docs in val_qrels.values() for d in docs}
        doc_ids = list(train.corpus)
        if hp.max_corpus is not None:
            others = [d for d in doc_ids if d not in judged]
            keep = judged | set(others[: max(hp.max_corpus - len(judged), 0)])
            doc_ids = [d for d in doc_ids if d in keep]
        self.doc_ids = doc_ids
        position = {d: i for i, d in enumerate(doc_ids)}
        texts = [train.corpus[d].full_text for d in doc_ids]

        tokens = TokenIds.from_pretrained(hp.model_path, max_tokens=hp.max_tokens)
        self.corpus_ids = tokens(texts)
        self.train_qids = sorted({q for q, _ in pairs})
        qpos = {q: i for i, q in enumerate(self.train_qids)}
        self.train_query_ids = tokens([train.queries[q] for q in self.train_qids])
        self.pairs = np.asarray([(qpos[q], position[d]) for q, d in pairs], dtype=np.int64)
        self.positives = [set() for _ in self.train_qids]
        for q, d in pairs:
            self.positives[qpos[q]].add(position[d])
        for q in self.train_qids:  # judged positives outside the subset are not negatives
            self.positives[qpos[q]] |= {
                position[d] for d, rel in train.qrels[q].items() if rel > 0 and d in position
            }

        bm25 = BM25Index.build(texts, tokenizer=hp.bm25_tokenizer)
        depth = hp.negative_depth + max(len(p) for p in self.positives)
        _, ranked = bm25.search([train.queries[q] for q in self.train_qids], depth)
        self.negatives = [
            np.asarray(
                [d for d in row if d not in self.positives[i]][: hp.negative_depth], dtype=np.int64
            )
            for i, row in enumerate(ranked.tolist())
        ]

        self.val_qids = list(val_queries)
        self.val_qrels = val_qrels
        self.val_query_ids = tokens([val_queries[q] for q in self.val_qids])
        self.val_bm25_scores, self.val_bm25_indices = bm25.search(
            [val_queries[q] for q in self.val_qids], hp.val_top_m
        )
        self._ready = True

    # ------------------------------------------------------------------ loaders
    def train_dataloader(self) -> DataLoader:
        data = PairDataset(self.pairs, self.negatives, self.hparams.hard_negatives)
        return DataLoader(
            data,
            batch_size=self.hparams.batch_size,
            shuffle=True,
            drop_last=True,
            collate_fn=self._collate_train,
            num_workers=self.hparams.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(
            range(len(self.val_qids)),
            batch_size=256,
            collate_fn=self._collate_val,
            num_workers=self.hparams.num_workers,
        )

    def _collate_train(self, items: list[tuple[int, int, np.ndarray]]) -> dict:
        queries = [q for q, _, _ in items]
        docs = [p for _, p, _ in items] + [int(n) for _, _, negs in items for n in negs]
        extra = torch.randint(len(self.corpus_ids), (self.hparams.random_negatives,))
        docs += extra.tolist()
        query_ids, query_mask = TokenIds.pad([self.train_query_ids[q] for q in queries])
        doc_ids, doc_mask = TokenIds.pad([self.corpus_ids[d] for d in docs])
        # a document that is a positive of query i is no negative for it (except its own)
        known = torch.tensor([[d in self.positives[q] for d in docs] for q in queries])
        known[torch.arange(len(queries)), torch.arange(len(queries))] = False
        return {
            "query_ids": query_ids,
            "query_mask": query_mask,
            "doc_ids": doc_ids,
            "doc_mask": doc_mask,
            "false_negatives": known,
        }

    def _collate_val(self, rows: list[int]) -> dict:
        index = torch.tensor(rows, dtype=torch.long)
        return {
            "rows": index,
            "bm25_scores": self.val_bm25_scores[index],
            "bm25_indices": self.val_bm25_indices[index],
        }
