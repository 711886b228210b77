"""translate_ende_multi30k: Multi30k task 1 (Flickr30k descriptions), English -> German.

Raw gzipped files from the official repository (or a local directory of the same files):
train 29,000, val 1,014 ("dev"), test_2016_flickr 1,000 ("test"), and the extra test sets
test_2017_flickr, test_2017_mscoco and test_2018_flickr when present. Shared BPE of 8,000.

translate_ende_multi30k_lc: the same files with both sides lowercased, the text the
published Multi30k baselines train on and score.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator, Mapping, Tuple, Union

from t2t_lite.data.problem import TranslationProblem, VocabSpec
from t2t_lite.data.raw import RawFile, TextPair, read_parallel_lines
from t2t_lite.registry import register_problem

URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
# split -> file stem in the repository
SPLIT_FILES = {
    "train": "train",
    "dev": "val",
    "test": "test_2016_flickr",
    "test_2017_flickr": "test_2017_flickr",
    "test_2017_mscoco": "test_2017_mscoco",
    "test_2018_flickr": "test_2018_flickr",
}
REQUIRED_SPLITS = ("train", "dev", "test")


@register_problem("translate_ende_multi30k")
class TranslateEndeMulti30k(TranslationProblem):
    """Multi30k EN->DE; shared BPE of 8,000 tokens."""

    splits = tuple(SPLIT_FILES)
    vocab_spec = VocabSpec(kind="sentencepiece", size=8000)
    max_length = 256
    train_shards = 4

    def raw_files(self) -> Tuple[RawFile, ...]:
        return tuple(RawFile(f"{stem}.{lang}.gz", f"{URL}{stem}.{lang}.gz",
                             optional=split not in REQUIRED_SPLITS)
                     for split, stem in SPLIT_FILES.items() for lang in ("en", "de"))

    def available_splits(self, found: Mapping[str, Path]) -> Tuple[str, ...]:
        return tuple(split for split, stem in SPLIT_FILES.items()
                     if f"{stem}.en.gz" in found and f"{stem}.de.gz" in found)

    def split_source(self, split: str, tmp_dir: Path) -> str:
        stem = SPLIT_FILES[split]
        return f"{Path(tmp_dir) / f'{stem}.en.gz'} and {Path(tmp_dir) / f'{stem}.de.gz'}"

    def text_pairs(self, split: str, tmp_dir: Path) -> Iterator[TextPair]:
        self.check_split(split)
        stem = SPLIT_FILES[split]
        return read_parallel_lines(Path(tmp_dir) / f"{stem}.en.gz", Path(tmp_dir) / f"{stem}.de.gz")


def lowercase(text: Union[bytes, str]) -> Union[bytes, str]:
    """``text`` lowercased as ``str.lower`` does (as sacreBLEU's ``-lc``), UTF-8 bytes
    decoded first; bytes that are not UTF-8 come back unchanged, for datagen to drop and
    report with their file and line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return text
    return text.lower()


@register_problem("translate_ende_multi30k_lc")
class TranslateEndeMulti30kLowercased(TranslateEndeMulti30k):
    """Multi30k EN->DE with both sides lowercased; its own shared BPE of 8,000 tokens.

    Its models write no capitals: score them lowercased (the decoder's ``case:lc`` line,
    against either this problem's references or the cased ones).
    """

    def text_pairs(self, split: str, tmp_dir: Path) -> Iterator[TextPair]:
        for pair in super().text_pairs(split, tmp_dir):
            yield dataclasses.replace(pair, source=lowercase(pair.source),
                                      target=lowercase(pair.target))
