"""Download a zip archive into a cache folder, atomically."""

from __future__ import annotations

import shutil
import urllib.request
import zipfile
from pathlib import Path

from tqdm.auto import tqdm

from georag._io import safe_extract, temp_folder

BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
# The data sets BEIR publishes at BEIR_URL (a name outside this list is not downloaded).
BEIR_DATASETS = (
    "arguana",
    "climate-fever",
    "cqadupstack",
    "dbpedia-entity",
    "fever",
    "fiqa",
    "hotpotqa",
    "msmarco",
    "nfcorpus",
    "nq",
    "quora",
    "scidocs",
    "scifact",
    "trec-covid",
    "webis-touche2020",
)


def download_and_extract(url: str, cache_dir: Path, name: str, *, timeout: float = 60.0) -> Path:
    """Download ``url`` (a zip holding a folder ``name/``) and extract it to ``cache_dir/name``.

    The archive is fetched and unpacked in a temporary folder next to the target and moved
    into place with one rename, so an interrupted download leaves nothing half-written (and
    a dead download's folder is removed by the next one). Extraction enforces the limits of
    :func:`georag._io.safe_extract` (no paths outside the folder, no links, no zip bombs).

    Raises
    ------
    ValueError
        If the download fails or the archive does not hold ``name/``.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / name
    tmp = temp_folder(cache_dir, name)
    try:
        archive = tmp / f"{name}.zip"
        try:
            with (
                urllib.request.urlopen(url, timeout=timeout) as response,
                archive.open("wb") as out,
            ):
                total = int(response.headers.get("Content-Length") or 0) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc=f"download {name}") as bar:
                    while chunk := response.read(1 << 20):
                        out.write(chunk)
                        bar.update(len(chunk))
        except OSError as err:
            raise ValueError(
                f"name_or_path: could not download {name!r} from {url}: {err}"
            ) from None
        if not zipfile.is_zipfile(archive):
            raise ValueError(f"name_or_path: {url} did not return a zip archive")
        try:
            extracted = safe_extract(archive, tmp / "extracted")
        except ValueError as err:
            reason = str(err).split(": ", 1)[-1]
            raise ValueError(
                f"name_or_path: the archive from {url} was refused: {reason}"
            ) from None
        folder = extracted / name
        if not folder.is_dir():
            raise ValueError(f"name_or_path: the archive from {url} holds no folder {name!r}/")
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
