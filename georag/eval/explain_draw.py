"""Pictures of an :class:`~georag.eval.explain.Explanation`: what is drawn (a
:class:`Drawing`), as a PNG (matplotlib) or an HTML page (inline SVG, no script).

Columns from left to right: each node at its least depth along the paths of the top
passages (the seeds the paths start from, and the seeds on no path, first), so a passage
reached through a phrase sits two columns after the seed it came from. Path edges carry the
share of the node's mass they brought; the edges ``iso_entity``'s pruning removed are drawn
dashed, their ends added where missing (passages, then phrases, in the last two columns).
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path

from georag._io import atomic_write
from georag.eval.explain import Explanation, Node
from georag.eval.plots import pyplot, save_figure

__all__ = ["Drawing", "DrawnEdge", "DrawnNode", "drawing", "draw_png", "write_html"]

MAX_PRUNED = 12  # removed edges drawn
ROLE_COLOURS = {"seed": "#f4b942", "hit": "#6aa6e8", "gold": "#5cb85c", "path": "#d9d9d9"}


@dataclass(frozen=True)
class DrawnNode:
    """A drawn node: its key (``"row:N"``), label, kind (passage, phrase), role (seed,
    hit, gold: a gold hit, path: only on a path, pruned: only an end of a removed edge),
    rank among the top passages (None: not one) and position (column, row)."""

    key: str
    label: str
    kind: str
    role: str
    rank: int | None
    x: float
    y: float


@dataclass(frozen=True)
class DrawnEdge:
    """A drawn edge between two node keys: ``"path"`` (labelled with its mass share) or
    ``"pruned"`` (removed by the pruning)."""

    source: str
    target: str
    kind: str
    label: str = ""


@dataclass(frozen=True)
class Drawing:
    """Everything a picture of an explanation shows."""

    title: str
    nodes: tuple[DrawnNode, ...]
    edges: tuple[DrawnEdge, ...]

    def node(self, key: str) -> DrawnNode:
        """The node of ``key``."""
        return next(n for n in self.nodes if n.key == key)


def _key(node: Node) -> str:
    return f"row:{node.row}"


def _label(node: Node, rank: int | None = None) -> str:
    text = node.label if len(node.label) <= 28 else node.label[:27] + "..."
    text = f"{node.doc_id} {text}" if node.kind == "passage" else f'"{text}"'
    return f"#{rank} {text}" if rank is not None else text


def drawing(explanation: Explanation) -> Drawing:
    """The nodes and edges a picture of ``explanation`` draws (module docstring)."""
    depth: dict[str, int] = {}
    nodes: dict[str, Node] = {}
    edges: dict[tuple[str, str], DrawnEdge] = {}
    seeds = {_key(s.node) for s in explanation.seeds if s.weight > 0}
    hits = {_key(h.node): h for h in explanation.hits}
    for hit in explanation.hits:
        for i, node in enumerate(hit.path):
            key = _key(node)
            nodes[key] = node
            depth[key] = min(depth.get(key, i), i)
        for (a, b), flow in zip(zip(hit.path, hit.path[1:]), hit.flows):
            edges[(_key(a), _key(b))] = DrawnEdge(_key(a), _key(b), "path", f"{flow:.0%}")
    for seed in explanation.seeds:  # a seed off every path stands in the first column
        nodes.setdefault(_key(seed.node), seed.node)
        depth.setdefault(_key(seed.node), 0)
    pruned_only = set()
    last = max(depth.values(), default=0) + 1
    for a, b in explanation.removed[:MAX_PRUNED]:
        for node in (a, b):
            if _key(node) not in nodes:
                # passage ends in one column, phrase ends in the next: no edge crosses a box
                nodes[_key(node)] = node
                depth[_key(node)] = last + (node.kind == "phrase")
                pruned_only.add(_key(node))
        edges[(_key(a), _key(b))] = DrawnEdge(_key(a), _key(b), "pruned")
    columns: dict[int, list[str]] = {}
    for key in nodes:
        columns.setdefault(depth[key], []).append(key)
    drawn = []
    for x, keys in sorted(columns.items()):
        for y, key in enumerate(keys):
            hit = hits.get(key)
            if key in pruned_only:
                role = "pruned"
            elif hit is not None:
                role = "gold" if hit.relevant else "hit"
            else:
                role = "seed" if key in seeds else "path"
            rank = hit.rank if hit is not None else None
            label = _label(nodes[key], rank)
            drawn.append(DrawnNode(key, label, nodes[key].kind, role, rank, float(x), float(-y)))
    title = f'{explanation.method}: "{explanation.query}"'
    return Drawing(title, tuple(drawn), tuple(edges.values()))


def draw_png(picture: Drawing, path: str | os.PathLike) -> Path:
    """Draw ``picture`` into a PNG at ``path`` (its folder created when missing)."""
    plt = pyplot()
    width = max(n.x for n in picture.nodes) + 1 if picture.nodes else 1
    height = max(-n.y for n in picture.nodes) + 1 if picture.nodes else 1
    fig, ax = plt.subplots(figsize=(3.4 * width + 1.5, 0.75 * height + 1.6))
    at = {n.key: (n.x, n.y) for n in picture.nodes}
    for edge in picture.edges:
        (x0, y0), (x1, y1) = at[edge.source], at[edge.target]
        if edge.kind == "pruned":
            ax.plot([x0, x1], [y0, y1], ls="--", color="#d9534f", lw=1.2, zorder=1)
            continue
        ax.plot([x0, x1], [y0, y1], color="#555555", lw=1.2, zorder=1)
        mx, my, dx, dy = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) * 0.04, (y1 - y0) * 0.04
        ax.annotate(  # the head at the middle: the ends are under the boxes
            "",
            xy=(mx + dx, my + dy),
            xytext=(mx - dx, my - dy),
            arrowprops={"arrowstyle": "-|>", "color": "#555555", "lw": 1.2},
            zorder=1,
        )
        ax.text(mx, my + 0.08, edge.label, fontsize=8, color="#333333", ha="center")
    for node in picture.nodes:
        style = "round" if node.kind == "phrase" else "square"
        ax.text(
            node.x,
            node.y,
            node.label,
            ha="center",
            va="center",
            fontsize=8,
            zorder=2,
            bbox={"boxstyle": style, "fc": ROLE_COLOURS.get(node.role, "#ffffff"), "ec": "#444"},
        )
    ax.set_xlim(-0.7, width - 0.3)
    ax.set_ylim(-height + 0.4, 0.6)
    ax.axis("off")
    ax.set_title(picture.title, fontsize=10)
    fig.text(
        0.01,
        0.01,
        "yellow: seed, blue: top passage, green: gold top passage, grey: on a path; "
        "rounded: phrase; arrows: largest inflow of PPR mass; dashed red: pruned edge",
        fontsize=7,
    )
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def write_html(picture: Drawing, text: str, path: str | os.PathLike) -> Path:
    """Write ``picture`` as an inline SVG, with the explanation's ``text`` below it, into an
    HTML file at ``path`` (atomically)."""
    dx, dy, pad = 260, 46, 30
    width = int((max((n.x for n in picture.nodes), default=0) + 1) * dx + pad)
    height = int((max((-n.y for n in picture.nodes), default=0) + 1) * dy + pad)

    def at(node: DrawnNode) -> tuple[float, float]:
        return pad + node.x * dx + 100, pad + -node.y * dy

    where = {n.key: at(n) for n in picture.nodes}
    parts = []
    for edge in picture.edges:
        (x0, y0), (x1, y1) = where[edge.source], where[edge.target]
        dash = ' stroke-dasharray="6 4" stroke="#d9534f"' if edge.kind == "pruned" else ""
        marker = "" if edge.kind == "pruned" else ' marker-end="url(#arrow)"'
        parts.append(
            f'<line x1="{x0:.0f}" y1="{y0:.0f}" x2="{x1:.0f}" y2="{y1:.0f}" stroke="#555"'
            f"{dash}{marker}/>"
        )
        if edge.label:
            parts.append(
                f'<text x="{(x0 + x1) / 2:.0f}" y="{(y0 + y1) / 2 - 4:.0f}" '
                f'font-size="11">{html.escape(edge.label)}</text>'
            )
    for node in picture.nodes:
        x, y = where[node.key]
        radius = 12 if node.kind == "phrase" else 2
        colour = ROLE_COLOURS.get(node.role, "#ffffff")
        parts.append(
            f'<g class="node {node.kind} {node.role}"><rect x="{x - 100:.0f}" y="{y - 14:.0f}" '
            f'width="200" height="28" rx="{radius}" fill="{colour}" stroke="#444"/>'
            f'<text x="{x:.0f}" y="{y + 4:.0f}" font-size="11" text-anchor="middle">'
            f"{html.escape(node.label)}</text></g>"
        )
    page = (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>"
        f"{html.escape(picture.title)}</title></head>\n<body>\n"
        f"<h3>{html.escape(picture.title)}</h3>\n"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>\n'
        + "\n".join(parts)
        + f"\n</svg>\n<pre>{html.escape(text)}</pre>\n</body></html>\n"
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, page)
