"""Configs that load: every configs/rerank YAML equals its dataclass' defaults, and a
changed value reaches the method through the one registry."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from georag.config import config_from_mapping, load_config, parse_value, read_yaml
from georag.rerank.registry import config_class, make_reranker

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "rerank"
# YAML file -> registry name
FILES = {
    "diffusion.yaml": "diffusion",
    "maniscope.yaml": "maniscope",
    "ricci_filtration.yaml": "ricci",
    "hyte_h.yaml": "hyte",
    "iso_rag.yaml": "iso",
    "ppr_global.yaml": "ppr_global",
    "gar.yaml": "gar",
    "phrase_ppr.yaml": "phrase_ppr",
    "hipporag2.yaml": "hipporag2",
    "iso_entity.yaml": "iso_entity",
}


def test_every_method_yaml_is_mapped():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(FILES)


@pytest.mark.parametrize("file, name", sorted(FILES.items()))
def test_yaml_loads_into_its_dataclass_and_equals_the_defaults(file, name):
    cls = config_class(name)
    assert load_config(cls, CONFIGS / file) == cls()
    # every field is written in the file, so the file documents the whole config
    assert set(read_yaml(CONFIGS / file)) == {f.name for f in dataclasses.fields(cls)}


def test_a_changed_yaml_value_changes_the_method(tmp_path):
    text = (CONFIGS / "maniscope.yaml").read_text().replace("k: 5", "k: 9")
    assert "k: 9" in text
    (tmp_path / "m.yaml").write_text(text)
    config = load_config(config_class("maniscope"), tmp_path / "m.yaml")
    assert config.k == 9
    assert make_reranker("maniscope", **dataclasses.asdict(config)).config.k == 9


def test_bad_configs_are_one_line_errors(tmp_path):
    cls = config_class("maniscope")
    with pytest.raises(ValueError, match="path: no such config file"):
        load_config(cls, tmp_path / "absent.yaml")
    (tmp_path / "tag.yaml").write_text("k: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_config(cls, tmp_path / "tag.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="must hold a mapping"):
        load_config(cls, tmp_path / "list.yaml")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['kk'\]"):
        config_from_mapping(cls, {"kk": 3}, where="x.yaml")
    with pytest.raises(ValueError, match="x.yaml: k must be int, got 'five'"):
        config_from_mapping(cls, {"k": "five"}, where="x.yaml")
    with pytest.raises(ValueError, match="x.yaml: alpha must be float, got True"):
        config_from_mapping(cls, {"alpha": True}, where="x.yaml")


def test_option_strings_parse_to_the_field_types():
    ricci = config_class("ricci")
    assert parse_value(ricci, "iterations", "10") == 10
    assert parse_value(ricci, "eta", "1") == 1.0 and isinstance(
        parse_value(ricci, "eta", "1"), float
    )
    iso = config_class("iso")
    assert parse_value(iso, "prune_threshold", "inf") == math.inf
    assert parse_value(iso, "head", "null") is None
    assert parse_value(iso, "head", "runs/head.pt") == "runs/head.pt"
    with pytest.raises(ValueError, match="unknown option 'nope'"):
        parse_value(iso, "nope", "1")


def test_a_nested_config_takes_a_mapping_or_dotted_keys():
    """A learned config holds its fixed config: a mapping or ``fixed.key`` sets its fields,
    starting from the field's own default (here ``max_iter=1000``)."""
    cls = config_class("learned_diffusion")
    default = cls()
    dotted = config_from_mapping(cls, {"fixed.damping": 0.5, "fusion": 0.1})
    assert dotted.fixed == dataclasses.replace(default.fixed, damping=0.5)
    assert dotted.fusion == 0.1 and dotted.fixed.max_iter == 1000
    mapped = config_from_mapping(cls, {"fixed": {"damping": 0.5, "max_iter": 1000}, "fusion": 0.1})
    assert mapped == dotted
    assert parse_value(cls, "fixed.top_k", "7") == 7
    with pytest.raises(ValueError, match=r"x: fixed: unknown key\(s\) \['nope'\]"):
        config_from_mapping(cls, {"fixed.nope": 1}, where="x")
    with pytest.raises(ValueError, match="'fusion' is not a nested config field"):
        config_from_mapping(cls, {"fusion.x": 1}, where="x")
    with pytest.raises(ValueError, match="damping must lie in"):
        config_from_mapping(cls, {"fixed": {"damping": 1.5}})
