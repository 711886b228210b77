"""translate_text_files: your own parallel text files, translated without writing a class.

Put six files, aligned line by line, in one directory and pass it as ``--tmp_dir``:

    train.src  train.tgt  dev.src  dev.tgt  test.src  test.tgt     (each may be .gz)

``t2t-lite-datagen --problem=translate_text_files --tmp_dir=DIR --data_dir=DATA`` then
cleans them (empty, invalid UTF-8 and over-long pairs dropped and reported), learns a
shared BPE vocabulary of up to 8,000 pieces and writes the shards, as for every other
translation problem; training, decoding (BLEU) and export need only the problem's name.
Nothing is downloaded. Another vocabulary size or length limit is a three-line subclass
registered from ``--t2t_usr_dir`` (docs/extending.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Tuple

from t2t_lite.data.problem import TranslationProblem, VocabSpec
from t2t_lite.data.raw import RawDataError, TextPair, read_parallel_lines
from t2t_lite.registry import register_problem

SIDES = ("src", "tgt")


@register_problem("translate_text_files")
class TranslateTextFiles(TranslationProblem):
    """``SPLIT.src`` -> ``SPLIT.tgt`` (plain or ``.gz``) from ``tmp_dir``; shared BPE of 8,000."""

    vocab_spec = VocabSpec(kind="sentencepiece", size=8000)
    max_length = 256
    train_shards = 4

    def split_files(self, split: str, tmp_dir: Path) -> Tuple[Path, Path]:
        """(source, target) of ``split`` in ``tmp_dir``: ``SPLIT.src``/``.tgt``, or their
        ``.gz``; ``RawDataError`` naming the expected files when one is missing."""
        self.check_split(split)
        paths = []
        for side in SIDES:
            plain = Path(tmp_dir) / f"{split}.{side}"
            gzipped = plain.with_name(plain.name + ".gz")
            if not plain.is_file() and not gzipped.is_file():
                raise RawDataError(
                    f"{plain} not found: problem {self.name} reads {split}.src and "
                    f"{split}.tgt (plain or .gz, aligned line by line) for each of "
                    f"{', '.join(self.splits)} from --tmp_dir={tmp_dir}")
            paths.append(plain if plain.is_file() else gzipped)
        return paths[0], paths[1]

    def split_source(self, split: str, tmp_dir: Path) -> str:
        source, target = self.split_files(split, tmp_dir)
        return f"{source} and {target}"

    def text_pairs(self, split: str, tmp_dir: Path) -> Iterator[TextPair]:
        if split == "train":  # read first (vocabulary): a missing dev/test file fails now
            for other in self.splits:
                self.split_files(other, tmp_dir)
        source, target = self.split_files(split, tmp_dir)
        return read_parallel_lines(source, target)
