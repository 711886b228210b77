"""Line-exact text I/O for the decoder: one output line per input line, always.

``split_lines(data)`` cuts raw bytes into lines exactly as a text editor counts them: on
``\\n``, one trailing ``\\r`` (CRLF files) removed, no phantom line after a final newline,
a last line without a newline kept, and a leading UTF-8 byte-order mark (EF BB BF, as
Windows editors save) removed. ``decode_lines`` turns each into text; a line that is
not valid UTF-8 keeps its place: its undecodable bytes become U+FFFD and it is reported
with its 1-based line number. ``one_line(text)`` makes an output safe to write as one
line (a newline or carriage return inside a hypothesis becomes a space).
``chunks(costs, budget)`` cuts the lines into consecutive ranges of about ``budget``
cost each, so a decoder can translate and write its output a chunk at a time, in input
order. ``reader_gone(stream)`` tells whether the reader of a pipe has gone
(``| head -1``), so a decoder can stop at once instead of translating for nobody.
"""
from __future__ import annotations

import dataclasses
import select
from typing import List, Sequence, Tuple

UTF8_BOM = b"\xef\xbb\xbf"


@dataclasses.dataclass(frozen=True)
class BadLine:
    """Line ``line`` (1-based) held bytes that are not UTF-8, from byte ``column`` (0-based)."""

    line: int
    column: int
    reason: str

    def __str__(self) -> str:
        return (f"line {self.line}: not valid UTF-8 at byte {self.column} ({self.reason}); "
                f"undecodable bytes replaced by U+FFFD")


def split_lines(data: bytes) -> List[bytes]:
    """Raw bytes -> lines without their terminators (``\\n`` or ``\\r\\n``) and without
    a leading byte-order mark."""
    data = data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def decode_lines(lines: List[bytes]) -> Tuple[List[str], List[BadLine]]:
    """UTF-8 text of every line (bad bytes replaced) and the lines that needed it."""
    texts, bad = [], []
    for number, line in enumerate(lines, start=1):
        try:
            texts.append(line.decode("utf-8"))
        except UnicodeDecodeError as error:
            bad.append(BadLine(number, error.start, error.reason))
            texts.append(line.decode("utf-8", errors="replace"))
    return texts, bad


def is_blank(text: str) -> bool:
    """Empty or whitespace-only: the decoder writes an empty line without translating."""
    return not text.strip()


def one_line(text: str, separator: str = " ") -> str:
    """``text`` with line breaks (and, for tab-separated output, tabs) turned into spaces."""
    text = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return text.replace("\t", " ") if separator == "\t" else text


def chunks(costs: Sequence[int], budget: int) -> List[range]:
    """Consecutive ranges of line indices that cover ``range(len(costs))`` in order, each
    holding lines whose ``costs`` sum to at most ``budget``, or one line that costs more.
    Lines of cost 0 (blank lines, nothing to translate) stay in the range before them
    (the first range for leading ones); no range is empty."""
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    ranges: List[range] = []
    start, total = 0, 0
    for index, cost in enumerate(costs):
        if cost > 0 and total > 0 and total + cost > budget:
            ranges.append(range(start, index))
            start, total = index, 0
        total += cost
    if start < len(costs):
        ranges.append(range(start, len(costs)))
    return ranges


def reader_gone(stream) -> bool:
    """True when ``stream`` is a pipe whose reading end has been closed (a write would
    fail with ``BrokenPipeError``); False for files, terminals and open pipes."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no descriptor (a test's capture)
        return False
