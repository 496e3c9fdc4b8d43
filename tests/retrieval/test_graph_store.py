"""Graph folders and embedding files at scale: bad input is one line naming the file."""

from __future__ import annotations

import numpy as np
import pytest

from georag.retrieval.graph_store import (
    check_memory,
    load_embeddings,
    load_graph,
    save_graph,
)


def small(tmp_path):
    edges = np.array([[0, 1, 2], [1, 2, 3]])
    return save_graph(tmp_path / "g", edges, np.array([0.1, 0.2, 0.3]), 5)


def test_round_trip_is_memory_mapped(tmp_path):
    graph = load_graph(small(tmp_path))
    assert isinstance(graph.edges, np.memmap) and isinstance(graph.lengths, np.memmap)
    assert graph.num_nodes == 5 and graph.edges.tolist() == [[0, 1, 2], [1, 2, 3]]


def test_nan_lengths_are_refused_naming_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"lengths.npy: 1 lengths are NaN, infinite or negative"):
        save_graph(tmp_path / "g", np.array([[0], [1]]), np.array([np.nan]), 2)
    folder = small(tmp_path)
    lengths = np.load(folder / "lengths.npy")
    lengths[1] = np.nan  # written behind georag's back: the checksum catches it first
    np.save(folder / "lengths.npy", lengths)
    with pytest.raises(ValueError, match=r"lengths.npy: checksum mismatch"):
        load_graph(folder)


def test_a_truncated_file_is_refused_naming_it(tmp_path):
    folder = small(tmp_path)
    blob = (folder / "edges.npy").read_bytes()
    (folder / "edges.npy").write_bytes(blob[:-8])
    with pytest.raises(ValueError, match=r"edges.npy: \d+ bytes, the manifest says \d+"):
        load_graph(folder)
    np.save(tmp_path / "e.npy", np.zeros((10, 4), np.float32))
    (tmp_path / "e.npy").write_bytes((tmp_path / "e.npy").read_bytes()[:-16])
    with pytest.raises(ValueError, match=r"e.npy: not a readable .npy array \(truncated\?\)"):
        load_embeddings(tmp_path / "e.npy", [str(k) for k in range(10)])


def test_embeddings_must_match_their_ids(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((10, 4), np.float32))
    assert load_embeddings(tmp_path / "e.npy", list("abcdefghij")).shape == (10, 4)
    with pytest.raises(ValueError, match=r"e.npy: 10 embedding rows for 9 document ids"):
        load_embeddings(tmp_path / "e.npy", list("abcdefghi"))


def test_node_ids_out_of_range_and_missing_manifest(tmp_path):
    with pytest.raises(ValueError, match=r"edges.npy: node ids outside \[0, 2\)"):
        save_graph(tmp_path / "g", np.array([[0], [5]]), np.array([1.0]), 2)
    with pytest.raises(ValueError, match="missing"):
        load_graph(tmp_path)


def test_memory_check_states_the_estimate():
    check_memory(10, "a kernel", limit=100)
    with pytest.raises(ValueError, match=r"a kernel needs about 2.0 GiB, more than the 1.0 GiB"):
        check_memory(2 * 2**30, "a kernel", limit=2**30)
