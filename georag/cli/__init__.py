"""The ``georag`` command: demo, eval, sweep, index, search, plot, explain, serve, mcp.

Bad arguments print one line, ``georag: error: ...``, and exit with status 2. The commands
over a saved index are in :mod:`georag.cli.corpus`, the demo in :mod:`georag.cli.demo`,
``explain`` in :mod:`georag.cli.explain`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from georag.cli.corpus import cmd_index, cmd_search
from georag.cli.demo import cmd_demo, notes
from georag.cli.explain import add_explain_parser, cmd_explain
from georag.perf.bench import positive_int
from georag.resources import DEFAULT_MODEL

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"georag: error: {message} (see 'georag --help')\n")


def _methods(value: str) -> list[str]:
    methods = [m for m in value.replace(",", " ").split() if m]
    if not methods:
        raise argparse.ArgumentTypeError("give at least one method")
    return methods


def _assignment(value: str) -> tuple[str, str]:
    key, sep, text = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    return key.strip(), text.strip()


def _add_eval_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", help="data set name or BEIR folder (e.g. scifact)")
    parser.add_argument("--data-dir", help="where data set names resolve (default: $GEORAG_DATA)")
    parser.add_argument("--split", help="qrels split (default: test)")
    parser.add_argument("--first-stage", choices=["dense", "bm25", "hybrid"])
    parser.add_argument("--top-m", type=positive_int, help="candidates per query (default 100)")
    parser.add_argument(
        "--methods",
        type=_methods,
        help="methods to compare, comma separated, stages joined by '+' "
        "(e.g. none,diffusion,ricci+ce)",
    )
    parser.add_argument("--model", help="embedding model (default all-MiniLM-L6-v2)")
    parser.add_argument("--out", help="output folder for results.json / results.md")
    parser.add_argument(
        "--max-queries", type=positive_int, help="evaluate only the first N queries"
    )
    parser.add_argument(
        "--method-config",
        action="append",
        metavar="NAME=PATH",
        type=_assignment,
        help="a method's config YAML (e.g. ricci=configs/rerank/ricci_filtration.yaml); repeatable",
    )
    parser.add_argument(
        "--method-option",
        action="append",
        metavar="NAME.KEY=VALUE",
        type=_assignment,
        help="one config field of a method (e.g. maniscope.k=7, learned_diffusion.weights=w.pt), "
        "applied over --method-config; repeatable",
    )
    parser.add_argument(
        "--baseline",
        help="method the others are tested against (paired randomization test, "
        "Holm-corrected; default 'none', the first-stage order, when it is listed)",
    )
    _add_backend_arg(parser)
    parser.add_argument("--config", type=Path, help="YAML file with the same keys (CLI wins)")
    parser.add_argument(
        "--wandb",
        action="store_true",
        help="log config, metrics and table to W&B (offline unless WANDB_MODE=online)",
    )


def _add_backend_arg(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    from georag.retrieval.backends import BACKENDS

    parser.add_argument(
        "--encoder-backend",
        choices=BACKENDS,
        default=default,
        help="runtime of the text encoders: torch (default; the only one on CUDA), or on the "
        "CPU onnx, onnx-int8 (extra 'onnx'), openvino, openvino-int8 (extra 'openvino')",
    )


def _add_model_args(parser: argparse.ArgumentParser, method_required: bool = True) -> None:
    """The method, the index and the limits, shared by ``serve`` and ``mcp``."""
    parser.add_argument(
        "--method",
        required=method_required,
        help="method spec (e.g. maniscope, ricci+bi); with --index a retrieval method (e.g. dense)",
    )
    parser.add_argument(
        "--index", help="serve retrieval from this index folder ('georag index') instead"
    )
    parser.add_argument("--rerank", help="with --index: rerank what it retrieves (a method spec)")
    parser.add_argument(
        "--method-option",
        action="append",
        metavar="NAME.KEY=VALUE",
        type=_assignment,
        help="one config field of a stage (e.g. maniscope.k=7); repeatable",
    )
    parser.add_argument("--weights", help="trained weights of the spec's learned stage")
    for flag, kind, what in (
        ("--max-docs", positive_int, "documents per request (413 past it)"),
        ("--max-text-chars", positive_int, "characters per text (413 past it)"),
        ("--max-top-k", positive_int, "with --index: documents one retrieval may ask for"),
        ("--cache-size", positive_int, "embeddings kept in memory per worker"),
    ):
        parser.add_argument(flag, type=kind, help=what)
    parser.add_argument("--cache-dir", help="also keep the embedding cache on disk there")
    _add_backend_arg(parser)


def _add_serve_args(parser: argparse.ArgumentParser) -> None:
    _add_model_args(parser)
    parser.add_argument("--host", help="address to bind (default 127.0.0.1: loopback only)")
    parser.add_argument("--port", type=int, help="port (default 8080)")
    for flag, kind, what in (
        ("--max-batch", positive_int, "queries per batched call (1: no micro-batching)"),
        ("--max-wait-ms", float, "how long a batch waits for more queries"),
        ("--max-read-ms", float, "how long at most while more are still being read"),
        ("--watch-ms", float, "with --index: how often to look for another process's update"),
        ("--workers", positive_int, "server processes"),
        ("--max-body-bytes", positive_int, "request body size (413 past it)"),
        ("--max-queue", positive_int, "queries waiting for a batch (429 past it)"),
    ):
        parser.add_argument(flag, type=kind, help=what)
    parser.add_argument("--api-key-file", help="require 'Authorization: Bearer KEY' (the file's)")
    parser.add_argument(
        "--cache-queries",
        action="store_true",
        default=None,
        help="cache query embeddings too (default: encode each batch's queries afresh)",
    )
    parser.add_argument("--model-name", help="the 'model' named in responses (default: --method)")


def _add_mcp_args(parser: argparse.ArgumentParser) -> None:
    _add_model_args(parser, method_required=False)
    parser.add_argument(
        "--allow-writes",
        action="store_true",
        help="with --index: offer the add_documents and delete_documents tools",
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default), or streamable HTTP on 127.0.0.1 (POST /mcp)",
    )
    parser.add_argument("--port", type=int, default=8000, help="with --transport http (8000)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="georag", description="Geometric reranking for RAG.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument(
        "--threads",
        type=positive_int,
        help="torch CPU threads (default: $GEORAG_THREADS, $OMP_NUM_THREADS, else the cores "
        "free at start; see docs/performance.md)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser("demo", help="run every available method on the bundled demo corpus")
    demo.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    demo.add_argument("--methods", type=_methods, help="methods (default: all available)")
    _add_backend_arg(demo, "torch")

    evaluate = sub.add_parser("eval", help="compare methods on one shared candidate pool")
    _add_eval_args(evaluate)

    sweep = sub.add_parser("sweep", help="one method over a grid of config values, one pool")
    sweep.add_argument("--dataset", required=True, help="data set name or BEIR folder")
    sweep.add_argument("--data-dir", help="where data set names resolve")
    sweep.add_argument("--method", required=True, help="method spec (e.g. ricci, maniscope)")
    sweep.add_argument(
        "--grid",
        required=True,
        nargs="+",
        metavar="KEY=V1,V2",
        help="knob values (STAGE.KEY=... for a '+' pipeline), e.g. quantile=0.25,0.5,0.75",
    )
    sweep.add_argument("--top-m", type=positive_int, default=100, help="pool size (default 100)")
    sweep.add_argument("--max-queries", type=positive_int, help="only the first N queries")
    sweep.add_argument("--out", default="runs/sweep", help="output folder (default runs/sweep)")
    sweep.add_argument("--wandb", action="store_true", help="log the table and plot to W&B")

    index = sub.add_parser(
        "index",
        help="build a corpus index (or: index add / index delete to update one live)",
    )
    source = index.add_mutually_exclusive_group()
    source.add_argument("--corpus", type=Path, help='JSONL of {"id", "title"?, "text"} objects')
    source.add_argument("--dataset", help="data set name or BEIR folder")
    index.add_argument("--data-dir", help="where data set names resolve")
    index.add_argument("--out", type=Path, help="index folder")
    index.add_argument("--kind", choices=["flat", "ivf"], default="flat", help="faiss index")
    index.add_argument("--model", default=DEFAULT_MODEL, help="embedding model")
    index.add_argument(
        "--graph",
        nargs="+",
        default=[],
        metavar="GRAPH",
        help="graphs the index holds for the graph retrievers: passage (iso, ppr_global), "
        "phrase (phrase_ppr), entity:EXTRACTORS (hipporag2, iso_entity; e.g. entity:title, "
        "entity:title,spacy), hyte (the HyTE-H Lorentz index)",
    )
    update = index.add_subparsers(dest="action", parser_class=_Parser)
    add = update.add_parser("add", help="add the documents of a JSONL file to an index")
    add.add_argument("--index", required=True, type=Path, help="index folder")
    add.add_argument("documents", type=Path, help='JSONL of {"id", "title"?, "text"} objects')
    delete = update.add_parser("delete", help="delete documents from an index by id")
    delete.add_argument("--index", required=True, type=Path, help="index folder")
    delete.add_argument("ids", nargs="*", help="document ids")
    delete.add_argument("--ids-file", type=Path, help="a file of ids, one a line")
    index.add_argument(
        "--hyperbolic",
        action="store_true",
        help="build the persistent HyTE-H Lorentz index (BM25 + Lorentz hybrid) instead",
    )
    index.add_argument("--weights", help="trained HyTE-H projection for --hyperbolic")
    _add_backend_arg(index, "torch")

    plot = sub.add_parser("plot", help="draw figures (PNG)")
    figures = plot.add_subparsers(dest="figure", required=True, parser_class=_Parser)
    scatter = figures.add_parser("scatter", help="quality against latency from results.json")
    scatter.add_argument("--results", required=True, type=Path, help="a results.json")
    scatter.add_argument("--metric", default="ndcg@10")
    scatter.add_argument("--out", type=Path, help="PNG (default: beside results.json)")

    flow = figures.add_parser(
        "flow", help="Ricci flow of one query's graph (paper Fig. 3) + final-length histogram"
    )
    flow.add_argument("--dataset", required=True, help="data set name or BEIR folder")
    flow.add_argument("--data-dir", help="where data set names resolve")
    flow.add_argument("--query", type=int, default=0, help="index of the query to draw")
    flow.add_argument("--out", type=Path, default=Path("runs/plots"), help="output folder")

    add_explain_parser(sub)

    _add_serve_args(
        sub.add_parser("serve", help="serve a reranker or an index over HTTP (extra 'serve')")
    )
    _add_mcp_args(
        sub.add_parser("mcp", help="serve an index or a reranker as MCP tools (extra 'mcp')")
    )

    search = sub.add_parser("search", help="query an index built by 'georag index'")
    search.add_argument("--index", required=True, type=Path, help="index folder")
    search.add_argument("query", nargs="+", help="query text")
    search.add_argument("-k", type=positive_int, default=10, help="results to show")
    search.add_argument(
        "--first-stage",
        choices=["dense", "bm25", "hybrid"],
        default="hybrid",
        help="for a dense/BM25 index (a Lorentz index always runs its BM25 + Lorentz hybrid)",
    )
    search.add_argument("--alpha", type=float, help="Lorentz index: BM25 weight (default 0.5)")
    search.add_argument(
        "--method",
        help="a corpus index: rank with this corpus method (e.g. hipporag2, iso+bi) instead "
        "of the first stage",
    )
    _add_backend_arg(search)
    return parser


def _eval_config(args: argparse.Namespace):
    from georag.config import read_yaml
    from georag.eval.runner import EvalConfig

    values: dict = {}
    if args.config is not None:
        values = read_yaml(args.config, argument="--config")
    for key in (
        "dataset",
        "data_dir",
        "split",
        "first_stage",
        "top_m",
        "methods",
        "model",
        "out",
        "max_queries",
        "baseline",
        "encoder_backend",
    ):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    if "dataset" not in values:
        raise ValueError("--dataset is required (on the command line or in --config)")
    configs = dict(values.get("method_configs") or {})
    configs.update(dict(args.method_config or []))
    options = {name: dict(v) for name, v in (values.get("method_options") or {}).items()}
    values.update(method_configs=configs, method_options=_method_options(args, options))
    return EvalConfig.from_dict(values)


def _method_options(args: argparse.Namespace, options: dict | None = None) -> dict:
    """``--method-option NAME.KEY=VALUE`` pairs over ``options``, each parsed to its type."""
    from georag.rerank.registry import parse_option

    options = options or {}
    for key, text in args.method_option or []:
        name, dot, field = key.partition(".")
        if not dot or not field:
            raise ValueError(f"--method-option: expected NAME.KEY=VALUE, got {key}={text}")
        options.setdefault(name, {})[field] = parse_option(name, field, text)
    return options


def _cmd_eval(args: argparse.Namespace) -> None:
    from georag.eval.report import markdown_table
    from georag.eval.runner import run_eval

    config = _eval_config(args)
    rows = run_eval(config)
    if args.wandb:
        from dataclasses import asdict

        from georag.eval.tracking import log_to_wandb

        print(f"W&B run: {log_to_wandb(rows, asdict(config), Path(config.out))}")
    print(markdown_table(rows))
    print(notes(rows))
    print(f"wrote {Path(config.out) / 'results.json'} and results.md")


def _cmd_sweep(args: argparse.Namespace) -> None:
    from dataclasses import asdict

    from georag.eval.report import markdown_table
    from georag.eval.sweep import SweepConfig, columns, parse_grid, run_sweep

    config = SweepConfig(
        dataset=args.dataset,
        data_dir=args.data_dir,
        method=args.method,
        grid=parse_grid(args.method, args.grid),
        top_m=args.top_m,
        max_queries=args.max_queries,
        out=args.out,
    )
    rows = run_sweep(config)
    out = Path(config.out)
    if args.wandb:
        from georag.eval.tracking import log_sweep_to_wandb

        print(f"W&B run: {log_sweep_to_wandb(rows, asdict(config), out)}")
    print(markdown_table(rows, columns(config)))
    print(f"wrote {out / 'sweep.md'}, sweep.json, sweep.tex and {out / 'sweep.png'}")


def _plot_flow(args: argparse.Namespace) -> None:
    import torch

    from georag.data.beir import load_beir
    from georag.eval.plots_ricci import plot_flow, plot_query_edge_histogram
    from georag.rerank.geometric.ricci_filtration import RicciFiltration
    from georag.retrieval.candidates import FirstStage, FirstStageConfig

    dataset = load_beir(args.dataset, data_dir=args.data_dir)
    ids = list(dataset.queries)
    if not 0 <= args.query < len(ids):
        raise ValueError(f"--query must be in [0, {len(ids)}), got {args.query}")
    stage = FirstStage(dataset, FirstStageConfig(top_m=20))
    batch = stage.retrieve(ids, [dataset.queries[q] for q in ids])
    ricci = RicciFiltration()
    one = ricci.filtrate(batch.slice(args.query, args.query + 1), history=True)
    slots = one.slots[0].tolist()
    relevant = [batch.doc_ids[args.query][s] in dataset.qrels[ids[args.query]] for s in slots]
    history = one.flow.history_lengths[:, 0, 0, 1 : 1 + len(slots)]
    eta = ricci.config.eta
    args.out.mkdir(parents=True, exist_ok=True)
    flow_png = plot_flow(
        history.numpy(), args.out / "flow.png", eta=eta, relevant=torch.tensor(relevant).numpy()
    )
    from tqdm.auto import tqdm

    step = 16
    lengths = torch.cat(
        [
            ricci.filtrate(batch.slice(i, i + step)).query_lengths.flatten()
            for i in tqdm(
                range(0, batch.batch_size, step), desc="Ricci flow (all queries)", unit="batch"
            )
        ]
    )
    finite = lengths[torch.isfinite(lengths)]
    histogram_png = plot_query_edge_histogram(finite.numpy(), args.out / "query_edges.png", eta=eta)
    print(f"wrote {flow_png} and {histogram_png}")


def _cmd_plot(args: argparse.Namespace) -> None:
    from georag.eval.plots import plot_quality_latency

    if args.figure == "flow":
        _plot_flow(args)
        return
    from georag.eval.report import read_results

    rows = read_results(args.results)
    out = args.out or args.results.with_name(f"quality_latency_{args.metric}.png")
    print(f"wrote {plot_quality_latency(rows, out, metric=args.metric)}")


def _serve_config(args: argparse.Namespace):
    from georag.rerank.registry import config_class
    from georag.serve.config import ServeConfig

    options = _method_options(args)
    if args.weights is not None:
        stages = [n.strip() for n in args.method.split("+")]
        learned = [
            n for n in stages if "weights" in getattr(config_class(n), "__dataclass_fields__", {})
        ]
        if len(learned) != 1:
            raise ValueError(f"--weights: {args.method!r} has no single stage that takes weights")
        options.setdefault(learned[0], {})["weights"] = args.weights
    names = ("host", "port", "max_batch", "max_wait_ms", "max_read_ms", "workers", "max_docs")
    names += ("max_text_chars", "max_body_bytes", "max_queue", "api_key_file", "cache_dir")
    names += ("cache_size", "cache_queries", "index", "rerank", "max_top_k")
    names += ("encoder_backend", "watch_ms")
    given = {n: getattr(args, n, None) for n in (*names, "model_name")}
    given = {n: value for n, value in given.items() if value is not None}
    if args.threads is not None:
        given["threads"] = args.threads
    return ServeConfig(method=args.method, options=options, **given)


def _cmd_serve(args: argparse.Namespace) -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ValueError("serve needs the extra 'serve': pip install 'georag[serve]'") from None
    from georag.perf.threads import apply_thread_policy
    from georag.serve.app import run
    from georag.serve.auth import read_api_key
    from georag.serve.corpus import build_retriever
    from georag.serve.service import build_reranker

    config = _serve_config(args)
    if config.api_key_file:
        read_api_key(config.api_key_file)
    apply_thread_policy(config.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a server's log holds no loading bars
    # a missing model or a bad index fails here, in seconds, before anything binds
    model = build_retriever(config) if config.index else build_reranker(config)
    run(config, model if config.workers == 1 else None)


def _cmd_mcp(args: argparse.Namespace) -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ValueError("mcp needs the extra 'mcp': pip install 'georag[mcp]'") from None
    from georag.serve import mcp as server
    from georag.serve.corpus import build_retriever
    from georag.serve.service import build_reranker

    if args.method is None:
        if args.index is None:
            raise ValueError("--method: give a method spec, or --index DIR (default method dense)")
        args.method = "dense"
    if args.allow_writes and args.index is None:
        raise ValueError("--allow-writes: writes go to an index; give --index")
    config = _serve_config(args)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # stdout is the protocol's; stderr holds no loading bars
    model = build_retriever(config) if config.index else build_reranker(config)
    server.warm(model, config)
    tools = server.GeoragTools(config, model, allow_writes=args.allow_writes)
    where = "stdio" if args.transport == "stdio" else f"http://127.0.0.1:{args.port}/mcp"
    served = f"{config.method} retrieval from {config.index}" if config.index else config.method
    offered = ", ".join(tool.name for tool in tools.offered())
    print(f"georag mcp: {served} on {where} (tools {offered})", file=sys.stderr, flush=True)
    server.run(server.build_server(tools), args.transport, args.port)


_COMMANDS = {
    "demo": cmd_demo,
    "explain": cmd_explain,
    "eval": _cmd_eval,
    "sweep": _cmd_sweep,
    "index": cmd_index,
    "search": cmd_search,
    "serve": _cmd_serve,
    "mcp": _cmd_mcp,
    "plot": _cmd_plot,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``georag`` command."""
    args = _build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        from georag.perf.threads import apply_thread_policy

        logging.getLogger("georag").info(apply_thread_policy(args.threads).describe())
        _COMMANDS[args.command](args)
    except ValueError as err:
        print(f"georag: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # missing files, or model weights that cannot be found offline
        print(
            f"georag: error: {(str(err).splitlines() or [type(err).__name__])[0]}", file=sys.stderr
        )
        return 2
    return 0
