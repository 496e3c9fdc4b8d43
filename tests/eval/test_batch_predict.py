import os
import subprocess
import sys

import pytest

from georag.batch import RerankResult
from georag.data.beir import BeirDataset, load_beir
from georag.data.bundled import DEMO_DIR
from georag.eval.batch_predict import rerank_run_file, shard_path
from georag.eval.trec import read_run, stream_run, write_run
from georag.rerank.base import IdentityReranker
from georag.retrieval.candidates import FirstStage, FirstStageConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, embedding_cache_dir):
    """A dense top-10 TREC run over the demo corpus."""
    demo = load_beir(DEMO_DIR)
    stage = FirstStage(
        demo, FirstStageConfig(top_m=10), cache_dir=embedding_cache_dir / "embeddings"
    )
    ids = list(demo.queries)
    batch = stage.retrieve(ids, [demo.queries[q] for q in ids])
    path = tmp_path_factory.mktemp("run") / "dense.trec"
    write_run(IdentityReranker()(batch).to_run(batch), path)
    return demo, path


class Reverse:
    """Deterministic stand-in reranker that reverses the order and counts its calls."""

    name = "reverse"

    def __init__(self):
        self.calls = 0

    def __call__(self, batch):
        self.calls += 1
        return RerankResult.from_scores(-batch.scores, batch.mask.clone())


def test_stream_run_groups_and_rejects_split_queries(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("a Q0 x 1 2.0 t\na Q0 y 2 1.0 t\nb Q0 x 1 3.0 t\n")
    assert list(stream_run(path)) == [("a", [("x", 2.0), ("y", 1.0)]), ("b", [("x", 3.0)])]
    path.write_text("a Q0 x 1 2.0 t\nb Q0 x 1 3.0 t\na Q0 y 2 1.0 t\n")
    with pytest.raises(ValueError, match="r.trec:3: lines of query 'a' are not contiguous"):
        list(stream_run(path))


def test_rerank_and_resume(demo_run, tmp_path, embedding_cache_dir):
    demo, run_path = demo_run
    out = tmp_path / "out.trec"
    reranker = Reverse()
    rerank_run_file(
        run_path,
        demo,
        reranker,
        out,
        batch_size=8,
        cache_dir=embedding_cache_dir / "embeddings",
        accelerator="cpu",
    )
    assert reranker.calls == 4  # 30 queries in shards of 8
    source, result = read_run(run_path), read_run(out)
    assert set(result) == set(source)
    for qid, docs in source.items():
        assert list(result[qid]) == sorted(docs, key=lambda d: docs[d])  # reversed order
    # interrupt: lose shard 2 and the merged output; a rerun recomputes only shard 2
    shard_path(out, 2).unlink()
    out.unlink()
    before = shard_path(out, 1).stat().st_mtime_ns
    again = Reverse()
    rerank_run_file(
        run_path,
        demo,
        again,
        out,
        batch_size=8,
        cache_dir=embedding_cache_dir / "embeddings",
        accelerator="cpu",
    )
    assert again.calls == 1
    assert shard_path(out, 1).stat().st_mtime_ns == before
    assert read_run(out) == result


def test_unknown_ids_are_errors(demo_run, tmp_path, embedding_cache_dir):
    demo, run_path = demo_run
    small = BeirDataset("small", demo.corpus, dict(list(demo.queries.items())[:3]), demo.qrels)
    with pytest.raises(ValueError, match="query ids .* are not in the data set"):
        rerank_run_file(
            run_path,
            small,
            Reverse(),
            tmp_path / "o.trec",
            batch_size=8,
            cache_dir=embedding_cache_dir / "embeddings",
            accelerator="cpu",
        )


@pytest.mark.slow  # two Lightning processes: about 2 minutes on a loaded 2-core machine
def test_two_process_ddp_equals_single_process(demo_run, tmp_path, embedding_cache_dir):
    demo, run_path = demo_run
    outputs = {}
    env = dict(
        os.environ, GEORAG_CACHE=str(embedding_cache_dir), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1"
    )
    for devices, strategy in (("1", "auto"), ("2", "ddp")):
        out = tmp_path / f"d{devices}.trec"
        subprocess.run(
            [
                sys.executable,
                os.path.join(REPO, "scripts", "tools", "rerank.py"),
                "--run",
                str(run_path),
                "--dataset",
                str(DEMO_DIR),
                "--method",
                "diffusion",
                "--out",
                str(out),
                "--batch-size",
                "8",
                "--accelerator",
                "cpu",
                "--devices",
                devices,
                "--strategy",
                strategy,
            ],
            check=True,
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=600,
        )
        outputs[devices] = out.read_text()
    assert outputs["1"] == outputs["2"]
    assert len(read_run(tmp_path / "d2.trec")) == len(demo.queries)
    assert len(list((tmp_path / "d2.trec.shards").glob("shard-*.trec"))) == 4


def test_queries_are_encoded_on_the_rank_device():
    import torch

    from georag.eval.batch_predict import _RerankModule
    from georag.retrieval.encoder import TextEncoder

    encoder = TextEncoder(show_progress=False, device="cpu")
    moves = []
    original = encoder.to
    encoder.to = lambda device: moves.append(device) or original(device)
    module = _RerankModule(IdentityReranker(), None, encoder)
    module.on_predict_start()  # outside a trainer the module sits on the CPU
    assert moves == [module.device] and encoder.device.type == "cpu"
    assert next(encoder.model.parameters()).dtype == torch.float32  # fp16 only on CUDA
