import http.server
import io
import json
import threading
import zipfile
from pathlib import Path

import pytest

from georag.data.beir import DataFormatError, load_beir, resolve_dataset

CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "cats purr"},
    {"_id": "d2", "title": "", "text": "dogs bark"},
    {"_id": "d3", "text": "fish swim"},
]
QUERIES = [
    {"_id": "q1", "text": "what purrs"},
    {"_id": "q2", "text": "who barks"},
    {"_id": "q3", "text": "unjudged"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\td3\t0\n"


def write_beir(folder: Path, corpus=CORPUS, queries=QUERIES, qrels=QRELS) -> Path:
    (folder / "qrels").mkdir(parents=True)
    lines = lambda records: "".join(  # noqa: E731
        (r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records
    )
    (folder / "corpus.jsonl").write_text(lines(corpus))
    (folder / "queries.jsonl").write_text(lines(queries))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


def test_load_good_folder(tmp_path):
    data = load_beir(write_beir(tmp_path / "toy"))
    assert data.name == "toy"
    assert set(data.corpus) == {"d1", "d2", "d3"}
    assert data.corpus["d1"].full_text == "Cats cats purr"
    assert data.corpus["d2"].full_text == "dogs bark"
    assert data.queries == {"q1": "what purrs", "q2": "who barks"}  # q3 has no judgement
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}


@pytest.mark.parametrize(
    "corpus, message",
    [
        (CORPUS[:1] + ['{"_id": "d2", "text": '] + CORPUS[2:], r"corpus.jsonl:2: malformed JSON"),
        (CORPUS[:2] + [{"_id": "d3"}], r"corpus.jsonl:3: missing field 'text'"),
        (CORPUS + [{"_id": "d1", "text": "again"}], r"corpus.jsonl:4: duplicate document id 'd1'"),
        (CORPUS[:2] + [["not", "an", "object"]], r"corpus.jsonl:3: expected a JSON object"),
    ],
)
def test_bad_corpus_names_file_and_line(tmp_path, corpus, message):
    folder = write_beir(tmp_path / "bad", corpus=corpus)
    with pytest.raises(DataFormatError, match=message):
        load_beir(folder)


def test_duplicate_query_id(tmp_path):
    folder = write_beir(tmp_path / "bad", queries=QUERIES + [{"_id": "q1", "text": "x"}])
    with pytest.raises(DataFormatError, match=r"queries.jsonl:4: duplicate query id 'q1'"):
        load_beir(folder)


@pytest.mark.parametrize(
    "qrels, message",
    [
        (QRELS + "q9\td1\t1\n", r"unknown query ids \['q9'\]"),
        (QRELS + "q1\td9\t1\n", r"unknown document ids \['d9'\]"),
        (QRELS + "q1\td1\n", r"test.tsv:5: expected 3 tab-separated fields"),
        (QRELS + "q1\td2\thigh\n", r"test.tsv:5: score 'high' is not a number"),
    ],
)
def test_bad_qrels(tmp_path, qrels, message):
    with pytest.raises(DataFormatError, match=message):
        load_beir(write_beir(tmp_path / "bad", qrels=qrels))


def test_missing_split_lists_available(tmp_path):
    with pytest.raises(ValueError, match=r"split: no qrels/dev.tsv .*\['test'\]"):
        load_beir(write_beir(tmp_path / "toy"), split="dev")


def test_name_resolves_under_data_dir_and_env(tmp_path, monkeypatch):
    write_beir(tmp_path / "root" / "toy")
    assert resolve_dataset("toy", tmp_path / "root", download=False) == tmp_path / "root" / "toy"
    monkeypatch.setenv("GEORAG_DATA", str(tmp_path / "root"))
    assert load_beir("toy", download=False).name == "toy"


def test_unknown_name_without_download(tmp_path, monkeypatch):
    monkeypatch.delenv("GEORAG_DATA", raising=False)
    with pytest.raises(ValueError, match="name_or_path: data set 'nope' not found"):
        resolve_dataset("nope", tmp_path, download=False, cache_dir=tmp_path / "cache")


def _zip_of(folder: Path, name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in folder.rglob("*"):
            if path.is_file():
                archive.write(path, f"{name}/{path.relative_to(folder)}")
    return buffer.getvalue()


@pytest.fixture
def zip_server(tmp_path):
    """An HTTP server on 127.0.0.1 serving /toy.zip (a BEIR folder) and /broken.zip."""
    payloads = {
        "/toy.zip": _zip_of(write_beir(tmp_path / "src"), "toy"),
        "/broken.zip": b"not a zip",
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = payloads.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{{name}}.zip"
    server.shutdown()


def test_download_into_cache(tmp_path, zip_server, monkeypatch):
    monkeypatch.setattr("georag.data.beir.BEIR_URL", zip_server)
    monkeypatch.setattr("georag.data.beir.BEIR_DATASETS", ("toy",))
    monkeypatch.delenv("GEORAG_DATA", raising=False)
    cache = tmp_path / "cache"
    data = load_beir("toy", cache_dir=cache)
    assert (cache / "toy" / "corpus.jsonl").is_file()
    assert data.qrels["q2"] == {"d2": 2, "d3": 0}
    assert [p.name for p in cache.iterdir()] == ["toy"]  # no temporary leftovers
    # second call finds the cache without the network
    monkeypatch.setattr("georag.data.beir.BEIR_URL", "http://127.0.0.1:1/{name}.zip")
    assert load_beir("toy", cache_dir=cache).name == "toy"


@pytest.mark.parametrize(
    "name, message", [("broken", "did not return a zip"), ("missing", "could not download")]
)
def test_download_failures_leave_nothing(tmp_path, zip_server, monkeypatch, name, message):
    monkeypatch.setattr("georag.data.beir.BEIR_URL", zip_server)
    monkeypatch.setattr("georag.data.beir.BEIR_DATASETS", (name,))
    monkeypatch.delenv("GEORAG_DATA", raising=False)
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match=message):
        load_beir(name, cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_real_scifact(data_dir):
    data = load_beir("scifact", data_dir=data_dir)
    assert len(data.corpus) == 5183
    assert len(data.queries) == 300
    assert sum(len(v) for v in data.qrels.values()) == 339


def test_load_dataset_dispatches(tmp_path, data_dir, monkeypatch):
    from georag.data.datasets import load_dataset

    monkeypatch.delenv("GEORAG_DATA", raising=False)
    assert load_dataset(write_beir(tmp_path / "toy")).name == "toy"
    hotpot = load_dataset("hotpotqa_dev500", data_dir=data_dir)
    assert len(hotpot.queries) == 500
    assert all(len(judged) == 2 for judged in hotpot.qrels.values())
    with pytest.raises(ValueError, match="'musique_qa100' not found"):
        load_dataset("musique_qa100", data_dir=tmp_path)
