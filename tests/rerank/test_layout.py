"""The rerank package's layout: one folder per kind, earlier flat paths still import."""

from __future__ import annotations

import importlib

import pytest

from georag.rerank import MOVED
from georag.rerank.registry import _lookup

FLAT = sorted(old for old, new in MOVED.items() if new.startswith("georag.rerank."))


def test_every_moved_method_module_is_mapped():
    assert [old.rsplit(".", 1)[1] for old in FLAT] == [
        "adapter", "bi_encoder", "cross_encoder", "diffusion", "doc_prior", "geo_features",
        "hyte", "learned_map", "ltr", "maniscope", "residual_heads", "ricci_filtration",
        "rocchio",
    ]  # fmt: skip


@pytest.mark.parametrize("old", FLAT)
def test_a_flat_path_gives_the_same_module(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_names_import_from_their_flat_paths():
    from georag.rerank.geometric.maniscope import Maniscope as New
    from georag.rerank.geometric.ricci_filtration import RicciFiltration as NewRicci
    from georag.rerank.maniscope import Maniscope
    from georag.rerank.ricci_filtration import RicciFiltration

    assert Maniscope is New and RicciFiltration is NewRicci


@pytest.mark.parametrize(
    "name, kind",
    [
        ("diffusion", "geometric"),
        ("learned_diffusion", "geometric"),
        ("maniscope", "geometric"),
        ("learned_maniscope", "geometric"),
        ("ricci", "geometric"),
        ("learned_ricci", "geometric"),
        ("hyte_rescore", "geometric"),
        ("learned_adapter", "baselines"),
        ("learned_map", "baselines"),
        ("prior", "baselines"),
        ("rocchio", "baselines"),
        ("graph_smoothing", "heads"),
        ("feature_head", "heads"),
        ("ce", "text"),
        ("bi", "text"),
    ],
)
def test_each_method_lives_in_the_folder_of_its_kind(name, kind):
    assert _lookup(name).__module__.startswith(f"georag.rerank.{kind}.")
