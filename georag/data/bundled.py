"""Data bundled with the package."""

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent / "demo"
"""A small BEIR-layout demo corpus written for georag (see its README.md)."""

DEMO_MULTIHOP_DIR = Path(__file__).resolve().parent / "demo_multihop"
"""A small BEIR-layout multi-hop corpus written for georag: passages titled by entities and
questions that each need two of them (see its README.md)."""
