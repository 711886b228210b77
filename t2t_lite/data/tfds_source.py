"""TensorFlow Datasets as a problem's source of text pairs.

A problem that can read TFDS names its builder (``Problem.tfds``, e.g.
``TfdsSource("wmt14_translate/de-en", "en", "de")``); ``t2t-lite-datagen
--data_source=tfds [--tfds_data_dir=DIR]`` then reads its splits from there instead of
raw archives, and datagen applies the same cleaning, vocabulary and length limits.
TFDS's Translation features are dicts ``{language: tf.string}``; each example becomes
a ``TextPair`` of raw bytes whose ``line`` is its 1-based index in the TFDS split, so a
dropped example is reported as e.g. ``wmt14_translate/de-en[train] (en) line 17``.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, Mapping, Optional

from t2t_lite.data.raw import RawDataError, TextPair

DATA_SOURCES = ("raw", "tfds")   # datagen's --data_source: raw files, or TFDS builders
DATA_SOURCE_HELP = ("raw: the problem's raw files in --tmp_dir; tfds: its TensorFlow "
                    "Datasets builder (WMT14 problems)")
TFDS_DATA_DIR_HELP = ("TFDS data directory with --data_source=tfds (default: TFDS's, "
                      "~/tensorflow_datasets)")

# t2t-lite split -> TFDS split
DEFAULT_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


@dataclasses.dataclass(frozen=True)
class TfdsSource:
    """One TFDS builder (``name`` = "builder/config") read as (source, target) pairs."""

    name: str
    source_language: str
    target_language: str
    splits: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_SPLITS))
    data_dir: Optional[str] = None  # TFDS's data_dir (default: ~/tensorflow_datasets)

    def with_data_dir(self, data_dir: Optional[str]) -> "TfdsSource":
        return dataclasses.replace(self, data_dir=data_dir)

    def describe(self) -> str:
        return f"TFDS {self.name}" + (f" in {self.data_dir}" if self.data_dir else "")

    def builder(self):
        import tensorflow_datasets as tfds
        return tfds.builder(self.name, data_dir=self.data_dir)

    def prepare(self, download: bool) -> None:
        """Downloads and prepares the dataset (TFDS skips what is already prepared);
        without ``download``, a dataset that is not prepared is an error saying what to do."""
        builder = self.builder()
        if download:
            try:
                builder.download_and_prepare()
            except OSError as error:  # no network, disk full, permissions
                raise RawDataError(f"{self.describe()}: preparing it failed ({error}); "
                                   f"re-run where the network is reachable, or pass "
                                   f"--tfds_data_dir=DIR holding a prepared copy") from None
        elif not builder.is_prepared():
            raise RawDataError(f"{self.describe()} is not prepared and --no_download was "
                               f"given; prepare it first (tfds build {self.name}) or pass "
                               f"--tfds_data_dir=DIR holding a prepared copy")

    def split_name(self, split: str) -> str:
        return f"{self.name}[{self.splits[split]}]"

    def text_pairs(self, split: str) -> Iterator[TextPair]:
        """The examples of ``split`` (a t2t-lite split name), in TFDS's file order."""
        dataset = self.builder().as_dataset(split=self.splits[split], shuffle_files=False)
        where = self.split_name(split)
        source_file = f"{where} ({self.source_language})"
        target_file = f"{where} ({self.target_language})"
        for index, example in enumerate(dataset.as_numpy_iterator(), start=1):
            yield TextPair(example[self.source_language], example[self.target_language],
                           source_file, target_file, index)
