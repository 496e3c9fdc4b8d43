"""CPU inference backends for georag's transformer encoders: ONNX Runtime and OpenVINO.

On a CPU the transformer is georag's main cost. A backend other than ``torch`` exports the
model once with the established tools and runs it in another runtime:

- ``onnx``: :func:`torch.onnx.export` (the TorchScript-based exporter: the dynamo exporter
  of torch 2.13 writes a graph that ONNX Runtime rejects, a duplicated output name, for
  sentence-transformers' Normalize module) run by ONNX Runtime;
- ``onnx-int8``: that graph through ONNX Runtime's ``quantize_dynamic`` (int8 weights per
  output channel, activations quantized per tensor at run time);
- ``openvino``: :func:`openvino.convert_model` of the ONNX graph, kept in fp32;
- ``openvino-int8``: that model through NNCF's post-training quantization
  (``nncf.quantize`` with ``ModelType.TRANSFORMER``: int8 weights and activations,
  calibrated on :func:`calibration_texts`, SmoothQuant at :data:`SMOOTH_QUANT_ALPHA`), but
  for :data:`INT8_FP32_OPS`, kept in fp32.

Attention is exported in its eager form (MatMul, Softmax): torch's
``scaled_dot_product_attention`` exports with NaN guards (IsNaN, Where) that cost OpenVINO
about a fifth of its time.

sentence-transformers' own ``onnx`` and ``openvino`` backends are not used: they need
optimum-onnx 0.1.0 (transformers < 4.58) and optimum-intel 2.2.0 (transformers < 5.6),
and georag runs transformers 5.x.

The exported model is written once per (model weights, backend) under
``<cache>/encoders/<name>-<fingerprint>/<backend>/`` as a folder artifact with a SHA-256
manifest (:func:`georag._io.atomic_folder`), checked on every load and reused. The
fingerprint is the SHA-256 of the model's state dict, so a changed model gets a new export;
a damaged export is an error naming the file, never exported over.

Each session runs on the caller's thread policy (:mod:`georag.perf.threads`): as many
intra-op threads as ``torch.get_num_threads()``, one inter-op thread, and no spinning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from georag._io import ArtifactError, atomic_folder, check_folder
from georag.resources import default_cache_dir

__all__ = [
    "BACKENDS",
    "CALIBRATION_FILE",
    "DEFAULT_BACKEND",
    "ENCODER_STAGES",
    "FORMAT",
    "INT8_FP32_OPS",
    "RECIPE",
    "SMOOTH_QUANT_ALPHA",
    "Calibration",
    "Session",
    "calibration_texts",
    "check_backend",
    "compiled",
    "export",
    "fingerprint",
    "padded_size",
    "quantize_openvino",
    "require_runtime",
    "with_backend",
]

BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-int8")
DEFAULT_BACKEND = "torch"
#: the rerank stages that run a text encoder of their own (``encoder_backend`` in their config)
ENCODER_STAGES = ("bi", "ce")
FORMAT = "georag-encoder-export"
#: the export recipe's version, a level of the cache folder: a changed recipe exports anew
RECIPE = "v3"
#: ``openvino-int8``'s operations kept in fp32 (regular expressions of OpenVINO operation
#: names): the first layer's feed-forward output projection, the largest single source of
#: the int8 error in all-MiniLM-L6-v2 (docs/encoders.md); a model without it is all int8
INT8_FP32_OPS = (r".*layer\.0/output/dense/MatMul$",)
#: ``openvino-int8``'s SmoothQuant migration strength on MatMuls (NNCF's default: 0.95)
SMOOTH_QUANT_ALPHA = 0.8
#: English queries and passages (encyclopedic, biomedical, engineering) that calibrate int8
CALIBRATION_FILE = Path(__file__).resolve().parents[1] / "data" / "calibration.json"
_RUNTIMES = {"onnx": ("onnxruntime", "onnx"), "openvino": ("openvino", "openvino")}
_FILES = {"onnx": "model.onnx", "openvino": "model.xml"}
#: the inputs that calibrate int8 activations: ``[{name: int64 tensor (1, L)}]``
Calibration = Callable[[], list[dict[str, torch.Tensor]]]


def check_backend(backend: str, device: torch.device | None = None) -> str:
    """Return ``backend`` when it is one of :data:`BACKENDS` and can run on ``device``.

    Raises
    ------
    ValueError
        One line naming ``encoder_backend``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"encoder_backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend != "torch" and device is not None and device.type != "cpu":
        raise ValueError(
            f"encoder_backend: {backend!r} runs on the CPU; on {device.type} use 'torch' "
            "(or device='cpu')"
        )
    return backend


def with_backend(spec: str, options: dict | None, backend: str) -> dict:
    """``options`` (``{stage: {field: value}}``) with ``encoder_backend`` set to ``backend``
    for the text-encoder stages (:data:`ENCODER_STAGES`) of the method ``spec``, unless
    given there already."""
    options = {name: dict(values) for name, values in (options or {}).items()}
    if backend != DEFAULT_BACKEND:
        for stage in (s.strip() for s in spec.split("+")):
            if stage in ENCODER_STAGES:
                options.setdefault(stage, {}).setdefault("encoder_backend", backend)
    return options


def _runtime(backend: str) -> str:
    return backend.split("-")[0]


def require_runtime(backend: str) -> None:
    """Import the runtime of ``backend`` (and its exporter), or fail naming the extra.

    Raises
    ------
    ImportError
        One line: ``pip install 'georag[onnx]'`` or ``'georag[openvino]'``.
    """
    if backend == "torch":
        return
    runtime = _runtime(backend)
    module, extra = _RUNTIMES[runtime]
    needed = [module] + {"onnx-int8": ["onnx"], "openvino-int8": ["nncf"]}.get(backend, [])
    for name in needed:
        try:
            __import__(name)
        except ImportError:
            raise ImportError(
                f"encoder_backend {backend!r} needs {name}: pip install 'georag[{extra}]'"
            ) from None


def calibration_texts() -> tuple[list[str], list[str]]:
    """The queries and the passages that calibrate the activation ranges of
    ``openvino-int8`` (:data:`CALIBRATION_FILE`, written for georag: questions, encyclopedic
    entries, scientific and engineering abstracts)."""
    texts = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    return list(texts["queries"]), list(texts["passages"])


def fingerprint(module: torch.nn.Module) -> str:
    """SHA-256 of ``module``'s class and state dict (names, dtypes, shapes, values)."""
    digest = hashlib.sha256(type(module).__qualname__.encode())
    for name, tensor in module.state_dict().items():
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(torch.uint8).numpy() if tensor.numel() else b"")
    return digest.hexdigest()


def _folder(root: Path, backend: str) -> Path:
    return root / backend


@contextmanager
def _eager_attention(module: torch.nn.Module) -> Iterator[None]:
    """Run the transformers models inside ``module`` with eager attention, then restore."""
    from transformers import PreTrainedModel

    models = [m for m in module.modules() if isinstance(m, PreTrainedModel)]
    before = [m.config._attn_implementation for m in models]
    for model in models:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        for model, implementation in zip(models, before):
            model.set_attn_implementation(implementation)


def _export_onnx(module: torch.nn.Module, example: dict[str, torch.Tensor], out: Path) -> None:
    names = list(example)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    with torch.inference_mode(False), torch.no_grad(), _eager_attention(module):
        torch.onnx.export(
            module.eval(),
            tuple(example[n] for n in names),
            str(out),
            input_names=names,
            output_names=["output"],
            dynamic_axes={**axes, "output": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )


def _build(source: Path, backend: str, target: Path, calibration: Calibration) -> None:
    """Write ``backend``'s model file into ``target`` from the fp32 ONNX folder ``source``."""
    onnx_file = source / _FILES["onnx"]
    if backend == "onnx-int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(
            onnx_file, target / _FILES["onnx"], per_channel=True, weight_type=QuantType.QInt8
        )
        return
    import openvino as ov

    model = ov.convert_model(str(onnx_file))
    if backend == "openvino-int8":
        model = quantize_openvino(model, calibration)
    ov.save_model(model, str(target / _FILES["openvino"]), compress_to_fp16=False)


def quantize_openvino(
    model,
    calibration: Calibration,
    ignored: tuple[str, ...] = INT8_FP32_OPS,
    smooth_quant: float | None = SMOOTH_QUANT_ALPHA,
):
    """``openvino-int8``'s recipe on the fp32 OpenVINO ``model``: NNCF post-training
    quantization (``ModelType.TRANSFORMER``: int8 weights and activations), calibrated on
    every input ``calibration()`` returns.

    The operations whose names match a regular expression of ``ignored`` stay in fp32 (a
    pattern that matches none is no error); ``smooth_quant`` is SmoothQuant's alpha on
    MatMuls (None: NNCF's default). The defaults are the backend's."""
    import nncf
    from nncf.quantization.advanced_parameters import (
        AdvancedQuantizationParameters,
        AdvancedSmoothQuantParameters,
    )

    samples = [{k: v.numpy() for k, v in f.items()} for f in calibration()]
    advanced = None
    if smooth_quant is not None:
        alphas = AdvancedSmoothQuantParameters(matmul=smooth_quant)
        advanced = AdvancedQuantizationParameters(smooth_quant_alphas=alphas)
    return nncf.quantize(
        model,
        nncf.Dataset(samples),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(samples),
        ignored_scope=nncf.IgnoredScope(patterns=list(ignored), validate=False),
        advanced_parameters=advanced,
    )


def _checked(folder: Path, backend: str, digest: str) -> Path:
    try:
        manifest = check_folder(folder, format=FORMAT)
    except ArtifactError as error:
        raise ArtifactError(f"{error}; remove {folder} to export it again") from None
    if manifest.get("backend") != backend or manifest.get("fingerprint") != digest:
        raise ArtifactError(
            f"{folder}: an export of another model or backend; remove it to export again"
        )
    return folder / _FILES[_runtime(backend)]


def export(
    name: str,
    backend: str,
    build: Callable[[], tuple[torch.nn.Module, dict[str, torch.Tensor]]],
    digest: str,
    calibration: Calibration,
    *,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """The model file of ``backend``, exported on first use and checked on every load.

    Parameters
    ----------
    name : str
        The model's name or folder (its last part labels the cache folder).
    backend : str
        Any of :data:`BACKENDS` but ``torch``.
    build : callable
        Returns the module to export (a forward of named int64 tensors (B, L) to one
        float tensor (B, ...)) and an example of its inputs; called only to export.
    digest : str
        The model's :func:`fingerprint`.
    calibration : callable
        Returns the int8 calibration inputs, ``[{name: int64 tensor (1, L)}]`` (the model's
        features of :func:`calibration_texts`); called only to build ``openvino-int8``.
    cache_dir : path, optional
        Cache root (default ``$GEORAG_CACHE`` or ``~/.cache/georag``).

    Returns
    -------
    Path
        ``model.onnx`` or ``model.xml``.

    Raises
    ------
    georag._io.ArtifactError
        An existing export fails its manifest check (one line naming the file).
    """
    require_runtime(backend)
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(name).rstrip("/")).name) or "model"
    root = Path(cache_dir or default_cache_dir()) / "encoders" / f"{label}-{digest[:16]}" / RECIPE
    chain = ["onnx"] if backend == "onnx" else ["onnx", backend]
    for step in chain:
        folder = _folder(root, step)
        if folder.exists():
            _checked(folder, step, digest)
            continue
        with atomic_folder(
            folder, format=FORMAT, backend=step, fingerprint=digest, model=name
        ) as tmp:
            if step == "onnx":
                module, example = build()
                _export_onnx(module, example, tmp / _FILES["onnx"])
            else:
                _build(_folder(root, "onnx"), step, tmp, calibration)
    return _checked(_folder(root, backend), backend, digest)


class _Positional(torch.nn.Module):
    """``output(module, features)`` over positional inputs named ``names``, for export."""

    def __init__(self, module: torch.nn.Module, names: list[str], output: Callable) -> None:
        super().__init__()
        self.module, self.names, self.output = module, names, output

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.output(self.module, dict(zip(self.names, inputs)))


def compiled(
    name: str,
    backend: str,
    module: torch.nn.Module,
    example: Callable[[], dict[str, torch.Tensor]],
    output: Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor],
    calibration: Calibration,
    *,
    cache_dir: str | os.PathLike | None = None,
) -> Session:
    """A :class:`Session` of ``module`` under ``backend`` (exported on first use, see
    :func:`export`); ``module``'s weights are freed afterwards (moved to the meta device).

    Parameters
    ----------
    name, backend, calibration, cache_dir
        As in :func:`export`.
    module : torch.nn.Module
        The fp32 model on the CPU.
    example : callable
        Example inputs ``{name: int64 tensor (B, L)}``, called only to export.
    output : callable
        ``output(module, features)``: the tensor (B, ...) that the session returns.
    """

    def build() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
        features = example()
        return _Positional(module, list(features), output), features

    digest = fingerprint(module)
    session = Session(export(name, backend, build, digest, calibration, cache_dir=cache_dir))
    module.to("meta")
    return session


class Session:
    """One exported model, compiled for the CPU on the caller's thread count.

    Parameters
    ----------
    path : Path
        ``model.onnx`` (ONNX Runtime) or ``model.xml`` (OpenVINO).
    threads : int, optional
        Intra-op threads; ``torch.get_num_threads()`` (georag's thread policy) by default.
    """

    def __init__(self, path: Path, *, threads: int | None = None) -> None:
        self.path = path
        self.threads = int(threads or torch.get_num_threads())
        self.runtime = "openvino" if path.suffix == ".xml" else "onnx"
        if self.runtime == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._session = ort.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
            self.input_names = [i.name for i in self._session.get_inputs()]
        else:
            import openvino as ov

            config = {
                "INFERENCE_NUM_THREADS": self.threads,
                "NUM_STREAMS": 1,
                "INFERENCE_PRECISION_HINT": "f32",
                "PERFORMANCE_HINT": "LATENCY",
            }
            self._compiled = ov.Core().compile_model(str(path), "CPU", config)
            self.input_names = [i.get_any_name() for i in self._compiled.inputs]

    def __call__(self, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
        """Run on the named int64 inputs (B, L); returns the float32 output (B, ...).

        Right-padded rows (``attention_mask``) run in groups of one padded length, the
        :func:`padded_size` of their token count, so that a row is computed at the same
        shape alone and within any batch: int8 activations are rounded after every layer,
        and a row padded otherwise may round otherwise.
        """
        arrays = {
            n: np.ascontiguousarray(feeds[n].numpy(), dtype=np.int64) for n in self.input_names
        }
        mask = arrays.get("attention_mask")
        if mask is None or (np.diff(mask, axis=1) > 0).any():  # no mask, or not right-padded
            return self._run(arrays)
        lengths = torch.from_numpy(mask.sum(1))
        sizes = padded_size(lengths)
        parts = []
        for size in sizes.unique().tolist():
            rows = (sizes == size).nonzero().squeeze(1)
            width = int(lengths[rows].max())
            parts.append((rows, self._run({n: a[rows.numpy(), :width] for n, a in arrays.items()})))
        out = parts[0][1].new_empty((len(lengths), *parts[0][1].shape[1:]))
        for rows, part in parts:
            out[rows] = part
        return out

    def _run(self, arrays: dict[str, np.ndarray]) -> torch.Tensor:
        """One forward pass. OpenVINO prepares each new input shape once (about 15 ms for
        MiniLM on one thread), so its inputs are padded to :func:`padded_size` sizes, batch
        and length, with masked positions and rows (``attention_mask`` 0) that change no
        output row."""
        if self.runtime == "onnx":
            out = self._session.run(None, arrays)[0]
        else:  # one infer request per call: the compiled model's own is not thread-safe
            rows = next(iter(arrays.values())).shape[0]
            request = self._compiled.create_infer_request()
            request.infer(_padded(arrays) if "attention_mask" in arrays else arrays)
            out = request.get_output_tensor(0).data[:rows].copy()
        return torch.from_numpy(np.asarray(out, dtype=np.float32))


def padded_size(n: int | torch.Tensor, step: int = 8) -> int | torch.Tensor:
    """The batch or length that OpenVINO runs for ``n`` (an int, or a tensor of them,
    element-wise): ``n`` rounded up to a power of two below ``step``, else to a multiple
    of ``step``."""
    if not isinstance(n, torch.Tensor):
        return int(padded_size(torch.tensor(n), step))
    power = (2 ** torch.ceil(torch.log2(n.clamp(min=1).double()))).long()
    return torch.where(n < step, power, (n + step - 1) // step * step)


def _padded(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs (B, L) zero-padded to (:func:`padded_size` (B), :func:`padded_size` (L)): padded
    positions and rows are masked out."""
    rows, length = next(iter(arrays.values())).shape
    pad = ((0, padded_size(rows) - rows), (0, padded_size(length) - length))
    return {name: np.pad(a, pad) for name, a in arrays.items()}
