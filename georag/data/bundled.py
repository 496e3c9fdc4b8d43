"""Data bundled with the package."""

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent / "demo"
"""A small BEIR-layout demo corpus written for georag (see its README.md)."""
