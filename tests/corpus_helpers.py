"""Gzipped line files for tests: read the first lines of a corpus file, write lines back,
and a miniature Multi30k raw directory made of the real corpus's first lines."""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Iterable, List, Mapping, Union

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")


def write_gz(path: Path, lines: Iterable[Union[bytes, str]]) -> None:
    """Writes ``lines`` (bytes or str), one a line, gzipped."""
    with gzip.open(path, "wb") as handle:
        for line in lines:
            handle.write((line if isinstance(line, bytes) else line.encode()) + b"\n")


def read_gz(path: Path, count: int) -> List[bytes]:
    """The first ``count`` lines of a gzipped file, without their newlines."""
    with gzip.open(path, "rb") as handle:
        return [next(handle).rstrip(b"\n") for _ in range(count)]


def mini_multi30k(multi30k_dir: Path, raw: Path, counts: Mapping[str, int]) -> Path:
    """``raw`` holding the first ``counts[split]`` lines of each Multi30k split, EN and DE."""
    raw.mkdir()
    for stem in MULTI30K_SPLITS:
        for lang in ("en", "de"):
            write_gz(raw / f"{stem}.{lang}.gz",
                     read_gz(multi30k_dir / f"{stem}.{lang}.gz", counts[stem]))
    return raw
