"""translate_ende_numbers: English number words -> German number words (embedded, offline).

"four thousand, five hundred and sixty-seven" -> "viertausendfünfhundertsiebenundsechzig",
written by ``num2words``. Train, dev and test are drawn without overlap, so a model is
scored on numbers it never saw, and stratified by magnitude (0-99, hundreds, thousands,
...). The few short numbers are repeated in the train split so that every magnitude
band carries about the same number of training examples (``balanced_train_numbers``):
without that, the 90 train numbers below 100 were 0.45% of 20,000 examples, and after
1,000 steps "twenty-one" came out as "einundzwanzigtausendzehn". Scored by exact
match (the outputs are mostly one word, so BLEU's 4-grams do not exist). Datagen takes
seconds; a tiny model learns it in minutes on a CPU.
"""
from __future__ import annotations

import dataclasses
import functools
import random
from pathlib import Path
from typing import Dict, Iterator, Tuple

from num2words import num2words

from t2t_lite.data.problem import TranslationProblem, VocabSpec
from t2t_lite.data.raw import TextPair
from t2t_lite.registry import register_problem


@dataclasses.dataclass(frozen=True)
class NumbersConfig:
    max_number: int = 99_999
    split_sizes: Tuple[Tuple[str, int], ...] = (("train", 20_000), ("dev", 1000), ("test", 1000))
    seed: int = 1234
    balance_train_bands: bool = True   # repeat short train numbers (balanced_train_numbers)


def magnitude_bands(max_number: int) -> Tuple[range, ...]:
    """[0, 100), [100, 1000), [1000, 10000), ... up to ``max_number`` inclusive."""
    bands, low, high = [], 0, 100
    while low <= max_number:
        bands.append(range(low, min(high, max_number + 1)))
        low, high = high, high * 10
    return tuple(bands)


def split_numbers(config: NumbersConfig) -> Dict[str, Tuple[int, ...]]:
    """Disjoint sets of numbers per split, seeded and stratified by magnitude.

    Each split takes an equal share of its size from every magnitude band (scaled down
    where a band is too small, the rest carried to the larger bands), so every split
    holds one- and two-digit numbers as well as five-digit ones.
    """
    total = sum(size for _, size in config.split_sizes)
    if total > config.max_number + 1:
        raise ValueError(f"NumbersConfig asks for {total} numbers but only "
                         f"{config.max_number + 1} exist up to max_number={config.max_number}")
    rng = random.Random(config.seed)
    need = dict(config.split_sizes)
    chosen: Dict[str, list] = {split: [] for split in need}
    bands = magnitude_bands(config.max_number)
    for index, band in enumerate(bands):
        numbers = list(band)
        rng.shuffle(numbers)
        bands_left = len(bands) - index
        want = {split: -(-count // bands_left) for split, count in need.items()}  # ceil
        if sum(want.values()) > len(numbers):
            scale = len(numbers) / sum(want.values())
            want = {split: int(count * scale) for split, count in want.items()}
        start = 0
        for split, count in want.items():
            chosen[split].extend(numbers[start:start + count])
            need[split] -= count
            start += count
    return {split: tuple(numbers) for split, numbers in chosen.items()}


def balanced_train_numbers(numbers: Tuple[int, ...], max_number: int) -> Tuple[int, ...]:
    """``numbers`` with each magnitude band's numbers repeated ``r`` times, ``r`` the
    rounded ratio of an equal share (``len(numbers) / bands``) to the band's count (at
    least 1), so that short numbers weigh about as much in training as long ones.

    For the default config: 90 train numbers below 100 appear 56 times each, 818
    three-digit ones 6 times; the rest once.
    """
    bands = magnitude_bands(max_number)
    share = len(numbers) / len(bands)
    counts = [sum(1 for n in numbers if n in band) for band in bands]
    repeats = [max(1, round(share / count)) if count else 1 for count in counts]
    out = []
    for number in numbers:
        band = next(i for i, b in enumerate(bands) if number in b)
        out.extend([number] * repeats[band])
    return tuple(out)


@register_problem("translate_ende_numbers")
class TranslateEndeNumbers(TranslationProblem):
    """English -> German number words; shared BPE of 256 pieces; exact-match scoring."""

    config = NumbersConfig()
    eval_metrics = ("exact_match",)
    vocab_spec = VocabSpec(kind="sentencepiece", size=256, byte_fallback=False)
    max_length = 64
    train_shards = 2

    def text_pairs(self, split: str, tmp_dir: Path) -> Iterator[TextPair]:
        self.check_split(split)
        return iter(number_pairs(self.config, split))


@functools.lru_cache(maxsize=8)
def number_pairs(config: NumbersConfig, split: str) -> Tuple[TextPair, ...]:
    """The (English, German) words of every number of ``split`` (cached: datagen reads the
    train split twice, for the vocabulary and for the records)."""
    numbers = split_numbers(config)[split]
    if split == "train" and config.balance_train_bands:
        numbers = balanced_train_numbers(numbers, config.max_number)
    return tuple(TextPair(num2words(number, lang="en"), num2words(number, lang="de"),
                          f"num2words(en) {split}", f"num2words(de) {split}", index)
                 for index, number in enumerate(numbers, start=1))
