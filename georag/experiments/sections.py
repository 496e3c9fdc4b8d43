"""A results file made of sections, one per data set and selection, merged run by run.

A section starts with ``### <key> (<n> report queries)``; its key is the heading without
the count (``dataset: methods [options]``). Merging a run's sections into the file replaces
the sections of the same key and keeps every other one, ordered by data set
(:data:`ORDER`, then the others; stable within a data set).
"""

from __future__ import annotations

__all__ = ["ORDER", "section_key", "dataset_order", "merge_sections", "document"]

ORDER = ("scifact", "cranfield", "cisi", "hotpotqa_dev500", "musique_qa100")


def section_key(section: str) -> str:
    """The heading of a section without its query count: ``dataset: methods``."""
    heading = section.split("\n", 1)[0].removeprefix("### ")
    return heading.rsplit(" (", 1)[0]


def dataset_order(key: str) -> int:
    """Where the sections of the data set of ``key`` go (unknown data sets last)."""
    name = key.split(":")[0].strip()
    return ORDER.index(name) if name in ORDER else len(ORDER)


def merge_sections(old: str, new: dict[str, str]) -> list[str]:
    """The sections of the file text ``old`` with those of ``new`` replaced or added.

    Parameters
    ----------
    old : str
        The file's text (its header, before the first ``### ``, is dropped); may be empty.
    new : dict
        ``{key: section text}``.

    Returns
    -------
    list of str
        Every section, ordered by data set (stable), trailing whitespace stripped.
    """
    kept = ["### " + part for part in old.split("\n### ")[1:]] if old else []
    sections = {section_key(part): part.rstrip() for part in kept}
    sections.update(new)
    return [sections[k] for k in sorted(sections, key=dataset_order)]


def document(header: str, old: str, new: dict[str, str]) -> str:
    """The whole file: ``header``, then :func:`merge_sections` of ``old`` and ``new``."""
    return header + "\n\n".join(merge_sections(old, new)) + "\n"
