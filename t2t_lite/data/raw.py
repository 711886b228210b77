"""Raw corpus files: locating or downloading them, and reading aligned text from them.

Every reader yields ``TextPair`` objects holding raw ``bytes`` lines and where they came
from (file and 1-based line), so datagen can count and report invalid UTF-8 and empty
lines instead of crashing. Archive members are extracted once into ``tmp_dir`` (write to a
temporary name, then rename) and read line by line from there.
"""
from __future__ import annotations

import dataclasses
import gzip
import os
import re
import tarfile
import urllib.request
import zlib
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from tqdm import tqdm

from t2t_lite.data.checksums import download_mismatch
from t2t_lite.errors import UserError

DOWNLOAD_TIMEOUT_S = 10.0


class RawDataError(UserError):
    """Raw files that are missing, corrupt or inconsistent; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class RawFile:
    """A file a problem needs in ``tmp_dir``: its name there, where it comes from and,
    when known, its size in bytes and SHA-256 (or MD5 where only that is published):
    a download that does not match is refused and removed (see ``checksums``)."""

    name: str
    url: str
    optional: bool = False  # optional files (extra test sets) are used when present
    size: Optional[int] = None
    sha256: str = ""
    md5: str = ""


@dataclasses.dataclass(frozen=True)
class TextPair:
    """One aligned (source, target) pair as raw bytes (or str), with its origin."""

    source: Union[bytes, str]
    target: Union[bytes, str]
    source_file: str
    target_file: str
    line: int  # 1-based line (or segment) number in both files


def _copy(src, dst, size: Optional[int], description: str) -> None:
    """Copies a byte stream in 1 MiB chunks with a progress bar."""
    with tqdm(total=size, desc=description, unit="B", unit_scale=True, mininterval=2.0,
              leave=False) as bar:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                return
            dst.write(chunk)
            bar.update(len(chunk))


# Locating and downloading -----------------------------------------------------------
def _download(url: str, path: Path, timeout: float,
              raw: Optional[RawFile] = None) -> Optional[str]:
    """Downloads ``url`` to ``path`` (temp name, checked against ``raw``'s size and
    checksum, then renamed); returns a network error or None. A download that does not
    match raises ``RawDataError`` and is deleted, so it is never reused."""
    tmp = path.with_name(path.name + ".download")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
            size = int(response.headers.get("Content-Length") or 0) or None
            _copy(response, out, size, f"download {path.name}")
    except (OSError, ValueError) as error:  # URLError, timeouts, HTTP errors are OSErrors
        tmp.unlink(missing_ok=True)
        return str(error)
    mismatch = download_mismatch(tmp, raw) if raw is not None else None
    if mismatch:
        tmp.unlink(missing_ok=True)
        raise RawDataError(f"the download of {url} is not the expected file: {mismatch}; it "
                           f"was deleted. Re-run to download it again, or put an intact copy "
                           f"at {path}")
    os.replace(tmp, path)
    return None


RAW_SUBDIR = "raw"  # the default --tmp_dir is DATA_DIR/raw (datagen and trainer alike)


def default_tmp_dir(problem, data_dir: Union[str, Path]) -> Path:
    """Where ``problem``'s raw files are looked for when no ``--tmp_dir`` is given:
    ``DATA_DIR/raw``, for ``t2t-lite-datagen`` and ``t2t-lite-trainer --generate_data``
    alike. A ``DATA_DIR`` that holds the problem's raw files itself while ``DATA_DIR/raw``
    holds none (where the trainer put them when its default was ``DATA_DIR``) is used
    in place, so files fetched earlier are found again, not downloaded twice."""
    data_dir = Path(data_dir)
    raw_dir = data_dir / RAW_SUBDIR
    names = [raw.name for raw in problem.raw_files()]
    if (not any((raw_dir / name).exists() for name in names)
            and any((data_dir / name).exists() for name in names)):
        return data_dir
    return raw_dir


def fetch_raw_files(files: Sequence[RawFile], tmp_dir: Union[str, Path], *,
                    download: bool = True,
                    timeout: float = DOWNLOAD_TIMEOUT_S) -> Dict[str, Path]:
    """Paths of ``files`` in ``tmp_dir``, downloading the missing ones when possible.

    Returns ``{name: path}`` for every file present afterwards (optional ones may be
    absent). Raises ``RawDataError`` listing every missing required file with its URL.
    """
    tmp_dir = Path(tmp_dir)
    created = _absent_directories(tmp_dir)
    if files:  # a problem that reads a folder itself (parsing) reports a wrong path
        tmp_dir.mkdir(parents=True, exist_ok=True)
    found: Dict[str, Path] = {}
    failures: List[Tuple[RawFile, str]] = []
    network_down = not download
    for raw in files:
        path = tmp_dir / raw.name
        if not path.exists() and not network_down:
            error = _download(raw.url, path, timeout, raw)
            if error is not None:
                failures.append((raw, error))
                # One failed fetch means the network is down or blocked; don't wait on each file.
                network_down = not raw.url.startswith("file:")
        elif not path.exists():
            failures.append((raw, "download disabled or network unavailable"))
        if path.exists():
            found[raw.name] = path
    missing = [(raw, why) for raw, why in failures if not raw.optional]
    if missing:
        _remove_while_empty(created)  # a mistyped --tmp_dir leaves no folders behind
        lines = "\n".join(f"  {raw.name}  <-  {raw.url}" for raw, _ in missing)
        raise RawDataError(
            f"missing raw files in {tmp_dir} (download failed: {missing[0][1]}).\n"
            f"Put these files there (same names), or re-run where the network is reachable:\n"
            f"{lines}")
    return found


def _absent_directories(path: Path) -> List[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first."""
    absent = []
    while not path.exists() and path != path.parent:
        absent.append(path)
        path = path.parent
    return absent


def _remove_while_empty(directories: Sequence[Path]) -> None:
    """Removes ``directories`` (deepest first) until one is not empty or not there."""
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return


# Plain and gzipped line files ---------------------------------------------------------
def open_lines(path: Union[str, Path]):
    """Opens a plain or ``.gz`` text file for reading raw byte lines."""
    path = Path(path)
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def read_text(path: Union[str, Path]) -> str:
    """The whole UTF-8 text of a plain or ``.gz`` file (a leading byte-order mark
    removed); ``RawDataError`` naming the file
    when it cannot be read or decoded."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as handle:  # -sig: a leading BOM goes
            return handle.read()
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise RawDataError(f"{path}: cannot read it ({error}); replace it with a readable "
                           f"UTF-8 copy") from None


UTF8_BOM = b"\xef\xbb\xbf"   # what Windows editors put at the start of a UTF-8 file


def _strip_newline(line: bytes) -> bytes:
    return line.rstrip(b"\r\n")


def strip_bom(line: bytes) -> bytes:
    """The first line of a file without a leading UTF-8 byte-order mark."""
    return line[len(UTF8_BOM):] if line.startswith(UTF8_BOM) else line


def _count_rest(handle) -> int:
    return sum(1 for _ in handle)


def read_parallel_lines(source_path: Union[str, Path],
                        target_path: Union[str, Path]) -> Iterator[TextPair]:
    """Aligned lines of two text files (plain or gz) as ``TextPair`` with raw bytes (a
    leading byte-order mark removed).

    Raises ``RawDataError`` naming both files and both line counts when they differ, and
    naming the file when it is a corrupt gzip.
    """
    source_path, target_path = Path(source_path), Path(target_path)
    line = 0
    current = source_path
    try:
        with open_lines(source_path) as src, open_lines(target_path) as tgt:
            while True:
                current = source_path
                s = src.readline()
                current = target_path
                t = tgt.readline()
                if not s or not t:
                    if s or t:
                        current = source_path
                        src_count = line + bool(s) + _count_rest(src)
                        current = target_path
                        tgt_count = line + bool(t) + _count_rest(tgt)
                        raise RawDataError(
                            f"source and target files differ in length: {source_path} has "
                            f"{src_count} lines, {target_path} has {tgt_count} lines; they must "
                            f"be aligned line by line (replace them with matching copies)")
                    return
                if line == 0:
                    s, t = strip_bom(s), strip_bom(t)
                line += 1
                yield TextPair(_strip_newline(s), _strip_newline(t),
                               source_path.name, target_path.name, line)
    except (OSError, EOFError, zlib.error) as error:
        if isinstance(error, FileNotFoundError):
            raise RawDataError(f"{error.filename}: file not found") from None
        raise RawDataError(f"{current}: cannot read it ({error}); the file is corrupt or "
                           f"truncated: delete it and fetch it again") from None


# Archives -------------------------------------------------------------------------------
def extract_members(archive: Union[str, Path], members: Sequence[str],
                    out_dir: Union[str, Path], url: str = "") -> Dict[str, Path]:
    """Extracts ``members`` of a tar(.gz) archive into ``out_dir``; reuses earlier extractions.

    Returns ``{member: path}``. A member is written under a temporary name and renamed, so
    an interrupted extraction is redone. Raises ``RawDataError`` naming the archive when it
    is missing, corrupt, or lacks a member.
    """
    archive, out_dir = Path(archive), Path(out_dir)
    targets = {member: out_dir / member for member in members}
    todo = {m for m, p in targets.items() if not p.exists()}
    if not todo:
        return targets
    fix = (f"delete it and re-run to download it again" + (f" from {url}" if url else "")
           + ", or replace it with an intact copy")
    if not archive.exists():
        raise RawDataError(f"archive {archive} is missing; put it there"
                           + (f" (download {url})" if url else ""))
    try:
        with tarfile.open(archive, "r:*") as tar:
            for info in tar:
                if info.name in todo:
                    path = targets[info.name]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_name(path.name + ".partial")
                    with tar.extractfile(info) as src, open(tmp, "wb") as dst:
                        _copy(src, dst, info.size, f"extract {info.name}")
                    os.replace(tmp, path)
                    todo.discard(info.name)
                    if not todo:
                        break
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise RawDataError(f"archive {archive} is corrupt or truncated ({error}); {fix}") from None
    if todo:
        raise RawDataError(f"archive {archive} lacks the member(s) {', '.join(sorted(todo))}; "
                           f"it is not the expected file: {fix}")
    return targets


# SGML test sets ---------------------------------------------------------------------------
_DOC = re.compile(rb"<doc\s[^>]*docid=\"([^\"]*)\"", re.IGNORECASE)
_SEG = re.compile(rb"<seg\s+id=\"?([^\">]*)\"?[^>]*>(.*?)</seg\s*>", re.IGNORECASE)
_SEG_OPEN = re.compile(rb"<seg\b", re.IGNORECASE)
_WHITESPACE = re.compile(rb"\s+")


def read_sgm(path: Union[str, Path]) -> List[Tuple[str, str, bytes, int]]:
    """``(docid, segid, text bytes, file line)`` for every ``<seg id=..>`` of a WMT SGML
    file (plain or ``.gz``), in file order: the one SGML reader, for datagen and BLEU.

    The text is what sacreBLEU reads from the file: entities are kept as WMT wrote them
    (``&quot;``, ``&amp;``; sacreBLEU's 13a tokenizer and mteval-v13a.pl unescape
    ``&quot; &amp; &lt; &gt;`` themselves), surrounding whitespace is stripped and inner
    runs of whitespace become one space. Raises ``RawDataError`` naming the file and line
    of a ``<seg`` that is not one ``<seg id=..>...</seg>`` on its line, or naming the file
    when it holds no segment.
    """
    segments = []
    docid = ""
    with open_lines(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = strip_bom(line) if number == 1 else line
            doc = _DOC.search(line)
            if doc:
                docid = doc.group(1).decode("utf-8", "replace")
            found = list(_SEG.finditer(line))
            if len(found) != len(_SEG_OPEN.findall(line)):
                raise RawDataError(f"{path}:{number}: a <seg> element without id=.. or without "
                                   f"a closing </seg> on its line; fix or replace the file")
            for seg in found:
                text = _WHITESPACE.sub(b" ", seg.group(2).strip())
                segments.append((docid, seg.group(1).decode("utf-8", "replace"), text, number))
    if not segments:
        raise RawDataError(f"{path}: no <seg id=..> segments found; is it a WMT .sgm file?")
    return segments


def read_sgm_text(path: Union[str, Path]) -> List[str]:
    """The text of every segment of a WMT SGML file (``read_sgm``), in file order, as
    ``str``: e.g. the references or system output to score with ``corpus_bleu``."""
    return [text.decode("utf-8", "replace") for _, _, text, _ in read_sgm(path)]


def read_parallel_sgm(source_path: Union[str, Path],
                      target_path: Union[str, Path]) -> Iterator[TextPair]:
    """Aligned segments of a source and a reference SGML file, matched by (docid, segid)."""
    source_path, target_path = Path(source_path), Path(target_path)
    source, target = read_sgm(source_path), read_sgm(target_path)
    if len(source) != len(target):
        raise RawDataError(f"source and target files differ in length: {source_path} has "
                           f"{len(source)} segments, {target_path} has {len(target)} segments")
    for index, (s, t) in enumerate(zip(source, target), start=1):
        if s[:2] != t[:2]:
            raise RawDataError(f"segment {index} is doc {s[0]!r} seg {s[1]} in {source_path} "
                               f"(line {s[3]}) but doc {t[0]!r} seg {t[1]} in {target_path} "
                               f"(line {t[3]}); the files are not aligned")
        yield TextPair(s[2], t[2], source_path.name, target_path.name, index)

