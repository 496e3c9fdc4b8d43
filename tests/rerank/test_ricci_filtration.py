"""RicciFiltration: graph construction, surgery, padding, bad input and composition."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from georag.batch import CandidateBatch
from georag.geometry.graphs import cosine_dissimilarity, threshold_graph
from georag.geometry.ricci import ricci_flow
from georag.rerank.geometric.ricci_filtration import RicciFiltration, RicciFiltrationConfig
from georag.rerank.pipeline import RerankPipeline
from georag.rerank.text.bi_encoder import BiEncoderConfig, BiEncoderReranker, mpnet_from_pypi_parts

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "ricci_scifact.json"


def clustered_batch(
    b: int = 4, m: int = 20, d: int = 16, *, seed: int = 0, dtype: torch.dtype = torch.float32
) -> CandidateBatch:
    """Queries with a relevant cluster around them and a far cluster of distractors."""
    gen = torch.Generator().manual_seed(seed)
    query = torch.randn(b, d, generator=gen, dtype=torch.float64)
    other = torch.randn(b, d, generator=gen, dtype=torch.float64)
    near = query.unsqueeze(1) + 0.6 * torch.randn(b, m, d, generator=gen, dtype=torch.float64)
    far = other.unsqueeze(1) + 0.6 * torch.randn(b, m, d, generator=gen, dtype=torch.float64)
    is_near = torch.rand(b, m, generator=gen) < 0.6
    cands = torch.where(is_near.unsqueeze(2), near, far).to(dtype)
    query = query.to(dtype)
    scores = torch.nn.functional.cosine_similarity(cands, query.unsqueeze(1), dim=2)
    return CandidateBatch(
        query=query,
        cands=cands,
        scores=scores,
        mask=torch.ones(b, m, dtype=torch.bool),
        query_ids=[f"q{i}" for i in range(b)],
        doc_ids=[[f"d{i}_{j}" for j in range(m)] for i in range(b)],
        query_texts=[f"query {i}" for i in range(b)],
        cand_texts=[[f"doc {i} {j}" for j in range(m)] for i in range(b)],
    )


def test_config_matches_the_paper():
    cfg = RicciFiltrationConfig()
    assert (cfg.top_m, cfg.quantile, cfg.iterations, cfg.alpha, cfg.exp_power, cfg.eta) == (
        20,
        0.5,
        20,
        0.5,
        2.0,
        1.0,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_filter_follows_the_geometry_step_by_step(dtype):
    batch = clustered_batch(dtype=dtype)
    out = RicciFiltration().filtrate(batch)
    result = RicciFiltration()(batch)
    # by hand: nodes = query + candidates in first-stage order
    order = torch.argsort(batch.scores, dim=1, descending=True, stable=True)
    nodes = torch.cat(
        [
            batch.query.unsqueeze(1),
            torch.gather(batch.cands, 1, order.unsqueeze(2).expand(-1, -1, 16)),
        ],
        1,
    )
    adjacency = threshold_graph(cosine_dissimilarity(nodes), quantile=0.5, force_node=0)
    flow = ricci_flow(
        adjacency.to(dtype),
        adjacency,
        iterations=20,
        method="sinkhorn",
        epsilon=0.1,
        max_iter=50,
        tol=1e-3,
        accuracy=None,
    )
    expected = torch.zeros_like(batch.mask).scatter(1, order, flow.lengths[:, 0, 1:] <= 1 + 1e-5)
    assert torch.equal(out.keep, expected) and torch.equal(result.keep, expected)
    assert torch.equal(out.slots, order)
    assert result.scores.dtype == dtype
    assert torch.equal(result.scores[result.keep], batch.scores[result.keep])
    assert torch.isinf(result.scores[~result.keep]).all()
    # the flow separates the two clusters: most near candidates stay, most far ones go
    assert 0 < result.keep.sum(1).min() and result.keep.sum(1).max() < 20


def scifact_fixture() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The stored SciFact graphs (B, 21, 21), keep decisions (B, 20) and query-edge
    lengths (B, 20) of scripts/reference/ricci_kept_fixture.py."""
    spec = json.loads(FIXTURE.read_text())
    n = spec["nodes"]
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    graphs = []
    for g in spec["graphs"]:
        bits = bin(int(g["edges"], 16))[2:].zfill(int(upper.sum()))
        adjacency = torch.zeros(n, n, dtype=torch.bool)
        adjacency[upper] = torch.tensor([c == "1" for c in bits])
        graphs.append(adjacency | adjacency.T)
    keep = torch.tensor([[c == "1" for c in g["keep"]] for g in spec["graphs"]])
    lengths = torch.tensor([g["query_lengths"] for g in spec["graphs"]], dtype=torch.float64)
    return torch.stack(graphs), keep, lengths


@pytest.mark.parametrize("backend", ["tensor", "compiled"])
def test_kept_sets_on_scifact_graphs_match_the_stored_behaviour(backend):
    # the filter's flow on 32 real SciFact graphs, one at a time (B=1) and as one batch,
    # against the decisions stored from the tensor solver before the speed work (5d7b479);
    # the tensor path reproduces them within another CPU's float32 rounding; the compiled
    # path stops each transport at its own first iteration within tol (the tensor path
    # iterates a graph's problems together, checked every 10), so its lengths move by up to
    # about a tenth, not its decisions
    adjacency, keep, stored = scifact_fixture()
    cfg = RicciFiltrationConfig()
    options = dict(cfg.flow_options(), backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = torch.cat(
            [ricci_flow(g[None].float(), g[None], **options).lengths[:, 0, 1:] for g in adjacency]
        )
        together = ricci_flow(adjacency.float(), adjacency, **options).lengths[:, 0, 1:]
    tolerance = 1e-3 if backend == "tensor" else 0.15
    for lengths in (alone, together):
        kept = lengths <= cfg.eta + cfg.eta_atol
        assert (kept == keep).double().mean() >= 0.995
        torch.testing.assert_close(lengths.double(), stored, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(together, alone, rtol=1e-3, atol=1e-4)  # batch-independent


def test_exact_and_sinkhorn_keep_the_same_candidates_on_clear_clusters():
    batch = clustered_batch(b=3, m=10, seed=1)
    fast = RicciFiltration()(batch).keep
    exact = RicciFiltration(RicciFiltrationConfig(method="exact"))(batch).keep
    assert (fast == exact).float().mean() >= 0.9


def test_padded_candidates_are_isolated_and_never_kept():
    full = clustered_batch(b=2, m=12, seed=2)
    mask = full.mask.clone()
    mask[0, 8:] = False
    cands = full.cands.clone()
    cands[0, 8:] = 0.0  # padding may hold zero vectors
    scores = full.scores.masked_fill(~mask, 0.0)
    padded = CandidateBatch(
        query=full.query,
        cands=cands,
        scores=scores,
        mask=mask,
        query_ids=full.query_ids,
        doc_ids=full.doc_ids,
    )
    out = RicciFiltration().filtrate(padded)
    assert not out.keep[0, 8:].any()
    assert torch.isnan(out.query_lengths[0, 8:]).all()
    nodes_of_padding = 1 + torch.nonzero(~torch.gather(mask[0], 0, out.slots[0])).squeeze(1)
    assert not out.flow.adjacency[0, nodes_of_padding].any()
    # the real candidates of row 0 are filtered exactly as without the padding
    alone = CandidateBatch(
        query=full.query[:1],
        cands=full.cands[:1, :8],
        scores=full.scores[:1, :8],
        mask=full.mask[:1, :8],
        query_ids=full.query_ids[:1],
        doc_ids=[full.doc_ids[0][:8]],
    )
    assert torch.equal(RicciFiltration()(alone).keep[0], out.keep[0, :8])


def test_only_the_top_m_candidates_can_survive():
    batch = clustered_batch(b=2, m=30, seed=3)
    keep = RicciFiltration()(batch).keep
    rank = torch.argsort(torch.argsort(batch.scores, dim=1, descending=True), dim=1)
    assert not keep[rank >= 20].any()


def test_tiny_candidate_lists():
    batch = clustered_batch(b=3, m=4, seed=4)
    mask = batch.mask.clone()
    mask[0, 1:] = False  # one real candidate: a 2-node graph, nothing to separate
    mask[1, :] = False  # no candidate at all
    tiny = CandidateBatch(
        query=batch.query,
        cands=batch.cands,
        scores=batch.scores,
        mask=mask,
        query_ids=batch.query_ids,
        doc_ids=batch.doc_ids,
    )
    keep = RicciFiltration()(tiny).keep
    assert keep[0].tolist() == [True, False, False, False]
    assert not keep[1].any()
    with pytest.raises(ValueError, match="M >= 2"):
        RicciFiltration()(
            CandidateBatch(
                query=batch.query,
                cands=batch.cands[:, :1],
                scores=batch.scores[:, :1],
                mask=batch.mask[:, :1],
                query_ids=batch.query_ids,
                doc_ids=[row[:1] for row in batch.doc_ids],
            )
        )


def test_identical_embeddings_keep_everything():
    batch = clustered_batch(b=2, m=8, seed=5)
    same = CandidateBatch(
        query=torch.ones(2, 16),
        cands=torch.ones(2, 8, 16),
        scores=torch.ones(2, 8),
        mask=batch.mask,
        query_ids=batch.query_ids,
        doc_ids=batch.doc_ids,
    )
    out = RicciFiltration().filtrate(same)
    assert out.keep.all()
    assert torch.allclose(out.query_lengths, torch.ones(2, 8))


def test_zero_and_nan_vectors_are_rejected():
    batch = clustered_batch(b=2, m=6, seed=6)
    cands = batch.cands.clone()
    cands[1, 2] = 0.0
    zero = CandidateBatch(
        query=batch.query,
        cands=cands,
        scores=batch.scores,
        mask=batch.mask,
        query_ids=batch.query_ids,
        doc_ids=batch.doc_ids,
    )
    with pytest.raises(ValueError, match="zero vectors"):
        RicciFiltration()(zero)
    cands[1, 2] = torch.nan
    with pytest.raises(ValueError, match="non-finite"):
        CandidateBatch(
            query=batch.query,
            cands=cands,
            scores=batch.scores,
            mask=batch.mask,
            query_ids=batch.query_ids,
            doc_ids=batch.doc_ids,
        )


def test_bad_config_is_rejected():
    for kwargs in (dict(top_m=1), dict(quantile=2.0), dict(eta=0.0), dict(method="cvxpy")):
        with pytest.raises(ValueError):
            RicciFiltrationConfig(**kwargs)


class _Recorder:
    """A second stage that remembers which candidates it was shown."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: torch.Tensor | None = None

    def __call__(self, batch: CandidateBatch):
        from georag.batch import RerankResult

        self.seen = batch.mask.clone()
        return RerankResult.from_scores(-batch.scores, batch.mask.clone())


def test_pipeline_reranks_the_kept_set_only():
    batch = clustered_batch(seed=7)
    recorder = _Recorder()
    result = RerankPipeline([RicciFiltration(), recorder], top_k=5)(batch)
    kept = RicciFiltration()(batch).keep
    assert torch.equal(recorder.seen, kept)
    assert (result.keep <= kept).all()
    assert (result.keep.sum(1) == torch.clamp(kept.sum(1), max=5)).all()


class _StubEncoder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> torch.Tensor:
        self.calls.append(list(texts))
        seeds = [sum(map(ord, t)) for t in texts]
        vectors = [torch.randn(8, generator=torch.Generator().manual_seed(s)) for s in seeds]
        return torch.nn.functional.normalize(torch.stack(vectors), dim=1)


def test_bi_encoder_scores_cosine_and_encodes_the_kept_set_only():
    batch = clustered_batch(b=2, m=5, seed=8)
    keep = torch.tensor([[True, False, True, False, False], [False] * 4 + [True]])
    encoder = _StubEncoder()
    uncached = BiEncoderConfig(cache=False)  # the stub's calls are the point, not the cache
    result = BiEncoderReranker(uncached, encoder=encoder)(batch.restrict(keep))
    assert encoder.calls[1] == ["doc 0 0", "doc 0 2", "doc 1 4"]
    q = encoder.encode(batch.query_texts)
    c = encoder.encode(["doc 0 2"])
    assert torch.allclose(result.scores[0, 2], (q[0] * c[0]).sum())
    assert torch.equal(result.keep, keep) and torch.isinf(result.scores[~keep]).all()
    no_text = CandidateBatch(
        query=batch.query,
        cands=batch.cands,
        scores=batch.scores,
        mask=batch.mask,
        query_ids=batch.query_ids,
        doc_ids=batch.doc_ids,
    )
    with pytest.raises(ValueError, match="texts"):
        BiEncoderReranker(uncached, encoder=encoder)(no_text)
    with pytest.raises(ValueError, match="batch_size"):
        BiEncoderConfig(batch_size=0)


def test_mpnet_parts_resolve_or_report_absent():
    folder = mpnet_from_pypi_parts()  # extracted once into ~/.cache/georag/models
    assert folder is None or (folder / "modules.json").exists()


@pytest.mark.peers
def test_kept_set_matches_graphriccicurvature(tmp_path):
    peer = ROOT / ".venv-peers" / "bin" / "python"
    if not peer.exists():
        pytest.skip(".venv-peers is absent (run `make peers`)")
    batch = clustered_batch(b=6, m=12, seed=9)
    out = RicciFiltration(RicciFiltrationConfig(top_m=12)).filtrate(batch)
    adjacency = out.flow.adjacency.numpy()
    np.savez(tmp_path / "g.npz", lengths=adjacency.astype(float), adjacency=adjacency)
    subprocess.run(
        [
            str(peer),
            str(ROOT / "scripts" / "reference" / "ricci_reference.py"),
            str(tmp_path / "g.npz"),
            str(tmp_path / "r.npz"),
            "--mode",
            "flow",
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    ref = np.load(tmp_path / "r.npz")["lengths"][:, 0, 1:] <= 1 + 1e-5
    ours = out.flow.lengths[:, 0, 1:].numpy() <= 1 + 1e-5
    assert (ref == ours).mean() >= 0.95
