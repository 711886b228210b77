"""The paper's WMT14 problems: translate_ende_wmt14 (BPE 37,000) and translate_enfr_wmt14
(32,000 word-pieces).

Training corpora come from the official tgz/tar archives, read through their real member
names. Dev is newstest2013, the plain-text ``dev/newstest2013.{en,de,fr}`` of WMT19's
``dev.tgz`` (the copy TensorFlow Datasets' ``wmt14_translate`` reads, with a recorded
SHA-256); test is newstest2014, read from the SGML (``<seg id=..>``) files of the official
``test-full.tgz``, as sacreBLEU scores it. Members are extracted once into
``tmp_dir/<archive>.extracted/``.

Both can instead read TensorFlow Datasets (``t2t-lite-datagen --data_source=tfds``):
``wmt14_translate/de-en`` and ``wmt14_translate/fr-en``. ``translate_ende_wmt_t2t`` is
tensor2tensor's EN-DE data (News Commentary v13 instead of v9), read only from TFDS's
``wmt_t2t_translate/de-en``, with the same vocabulary and limits as
``translate_ende_wmt14``, to compare with T2T's results.
"""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Iterator, Tuple

from t2t_lite.data.problem import TranslationProblem, VocabSpec
from t2t_lite.data.raw import (RawFile, TextPair, extract_members, read_parallel_lines,
                               read_parallel_sgm)
from t2t_lite.data.tfds_source import TfdsSource
from t2t_lite.registry import register_problem

# Sizes and SHA-256s: tensorflow_datasets 4.9.10, url_checksums/wmt14_translate.txt,
# wmt13_translate.txt and wmt15_translate.txt (the archives' recorded facts; TFDS fetches
# the same files over http). test-full.tgz: MD5 from sacrebleu 2.x's dataset list
# ("wmt14/full"), the only record published for it. The dev set comes from WMT19's
# dev.tgz, not wmt14/dev.tgz, because only the former has a published record (TFDS's
# wmt14_translate reads newstest2013 from it too; sacrebleu's "wmt19/dev" gives its MD5).
# statmt.org serves https (sacrebleu downloads from https://statmt.org/ and
# https://data.statmt.org/).
STATMT = "https://statmt.org/"
EUROPARL = RawFile("training-parallel-europarl-v7.tgz",
                   STATMT + "wmt13/training-parallel-europarl-v7.tgz", size=657632379,
                   sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7")
COMMONCRAWL = RawFile("training-parallel-commoncrawl.tgz",
                      STATMT + "wmt13/training-parallel-commoncrawl.tgz", size=918311367,
                      sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5")
NEWS_COMMENTARY_V9 = RawFile(
    "training-parallel-nc-v9.tgz", STATMT + "wmt14/training-parallel-nc-v9.tgz", size=80418416,
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485")
UN = RawFile("training-parallel-un.tgz", STATMT + "wmt13/training-parallel-un.tgz",
             size=2365634246,
             sha256="29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47")
GIGA_FREN = RawFile("training-giga-fren.tar", STATMT + "wmt10/training-giga-fren.tar",
                    size=2595102720,
                    sha256="3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a")
DEV = RawFile("dev.tgz", "https://data.statmt.org/wmt19/translation-task/dev.tgz",
              size=38654961,
              sha256="7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7")
TEST = RawFile("test-full.tgz", STATMT + "wmt14/test-full.tgz",
               md5="a8cd784e006feb32ac6f3d9ec7eb389a")


@dataclasses.dataclass(frozen=True)
class ArchivePair:
    """Aligned source and target members of one archive (plain, ``.gz``, or ``.sgm``)."""

    archive: RawFile
    source_member: str
    target_member: str

    def read(self, tmp_dir: Path) -> Iterator[TextPair]:
        out_dir = Path(tmp_dir) / (self.archive.name + ".extracted")
        paths = extract_members(Path(tmp_dir) / self.archive.name,
                                [self.source_member, self.target_member], out_dir,
                                url=self.archive.url)
        source, target = paths[self.source_member], paths[self.target_member]
        if self.source_member.endswith(".sgm"):
            return read_parallel_sgm(source, target)
        return read_parallel_lines(source, target)


def _europarl(pair: str, src: str, tgt: str) -> ArchivePair:
    return ArchivePair(EUROPARL, f"training/europarl-v7.{pair}.{src}",
                       f"training/europarl-v7.{pair}.{tgt}")


def _commoncrawl(pair: str, src: str, tgt: str) -> ArchivePair:
    return ArchivePair(COMMONCRAWL, f"commoncrawl.{pair}.{src}", f"commoncrawl.{pair}.{tgt}")


def _news_commentary(pair: str, src: str, tgt: str) -> ArchivePair:
    return ArchivePair(NEWS_COMMENTARY_V9, f"training/news-commentary-v9.{pair}.{src}",
                       f"training/news-commentary-v9.{pair}.{tgt}")


class Wmt14Problem(TranslationProblem):
    """Shared reading code: train = concatenated corpora, dev = plain newstest2013, test =
    SGML newstest2014."""

    train_corpora: Tuple[ArchivePair, ...] = ()
    dev_set: ArchivePair
    test_set: ArchivePair
    max_length = 1024
    train_shards = 100

    def raw_files(self) -> Tuple[RawFile, ...]:
        archives = [c.archive for c in self.train_corpora] + [self.dev_set.archive,
                                                              self.test_set.archive]
        return tuple(dict.fromkeys(archives))

    def text_pairs(self, split: str, tmp_dir: Path) -> Iterator[TextPair]:
        self.check_split(split)
        if split == "train":
            return itertools.chain.from_iterable(c.read(tmp_dir) for c in self.train_corpora)
        return (self.dev_set if split == "dev" else self.test_set).read(tmp_dir)


@register_problem("translate_ende_wmt14")
class TranslateEndeWmt14(Wmt14Problem):
    """WMT14 EN->DE (~4.5M pairs): Europarl v7, Common Crawl, News Commentary v9; BPE 37,000."""

    vocab_spec = VocabSpec(kind="sentencepiece", size=37000)
    tfds = TfdsSource("wmt14_translate/de-en", "en", "de")
    data_sources = ("raw", "tfds")
    train_corpora = (_europarl("de-en", "en", "de"), _commoncrawl("de-en", "en", "de"),
                     _news_commentary("de-en", "en", "de"))
    dev_set = ArchivePair(DEV, "dev/newstest2013.en", "dev/newstest2013.de")
    test_set = ArchivePair(TEST, "test-full/newstest2014-deen-src.en.sgm",
                           "test-full/newstest2014-deen-ref.de.sgm")


@register_problem("translate_enfr_wmt14")
class TranslateEnfrWmt14(Wmt14Problem):
    """WMT14 EN->FR (~36M pairs): the EN-DE sources plus UN and 10^9 French-English; 32,000
    word-pieces."""

    vocab_spec = VocabSpec(kind="wordpiece", size=32000)
    tfds = TfdsSource("wmt14_translate/fr-en", "en", "fr")
    data_sources = ("raw", "tfds")
    train_corpora = (_europarl("fr-en", "en", "fr"), _commoncrawl("fr-en", "en", "fr"),
                     _news_commentary("fr-en", "en", "fr"),
                     ArchivePair(UN, "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr"),
                     ArchivePair(GIGA_FREN, "giga-fren.release2.fixed.en.gz",
                                 "giga-fren.release2.fixed.fr.gz"))
    dev_set = ArchivePair(DEV, "dev/newstest2013.en", "dev/newstest2013.fr")
    test_set = ArchivePair(TEST, "test-full/newstest2014-fren-src.en.sgm",
                           "test-full/newstest2014-fren-ref.fr.sgm")


@register_problem("translate_ende_wmt_t2t")
class TranslateEndeWmtT2t(TranslateEndeWmt14):
    """tensor2tensor's WMT EN->DE data (Europarl v7, Common Crawl, News Commentary v13;
    newstest2013/2014) from TFDS ``wmt_t2t_translate/de-en`` only; BPE 37,000."""

    tfds = TfdsSource("wmt_t2t_translate/de-en", "en", "de")
    data_sources = ("tfds",)

    def raw_files(self) -> Tuple[RawFile, ...]:
        return ()
