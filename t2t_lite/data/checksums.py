"""Checking a downloaded raw file against its recorded size and digest.

``download_mismatch(path, raw)`` returns ``None`` when the file at ``path`` has the
``RawFile``'s recorded size and SHA-256 (or MD5, where that is all that is published),
else a sentence saying what differs. Fields left empty are not checked; a ``RawFile``
with none of them is accepted as downloaded.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    from t2t_lite.data.raw import RawFile

_CHUNK = 1 << 20


def file_digest(path: Union[str, Path], algorithm: str) -> str:
    """Hex digest of a file, read in 1 MiB chunks (``algorithm``: "sha256", "md5")."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_mismatch(path: Union[str, Path], raw: "RawFile") -> Optional[str]:
    """What about ``path`` differs from ``raw``'s record, or ``None`` when all matches."""
    size = Path(path).stat().st_size
    if raw.size is not None and size != raw.size:
        return f"{size:,} bytes instead of {raw.size:,}"
    for algorithm, label in (("sha256", "SHA-256"), ("md5", "MD5")):
        expected = getattr(raw, algorithm)
        if expected:
            actual = file_digest(path, algorithm)
            if actual != expected.lower():
                return f"{label} {actual} instead of {expected.lower()}"
    return None
