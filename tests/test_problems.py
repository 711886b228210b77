"""Registered problems: API facts, the numbers splits, and Multi30k from the shared data."""
import pytest
import tensorflow as tf

from t2t_lite.data.datagen import generate
from t2t_lite.data.problem import eval_text, get_problem
from t2t_lite.data.records import read_examples
from t2t_lite.metrics.text_metrics import score_texts
from t2t_lite.problems.translate_numbers import (NumbersConfig, balanced_train_numbers,
                                                 magnitude_bands, number_pairs, split_numbers)
from t2t_lite.registry import PROBLEMS

TRANSLATION = ("translate_ende_numbers", "translate_ende_multi30k", "translate_ende_wmt14",
               "translate_enfr_wmt14")


def test_translation_problems_are_registered_with_bleu_and_beam_defaults():
    for name in TRANSLATION:
        problem = get_problem(name)
        assert problem.name == name
        # Number words are mostly one word: no 4-grams for BLEU, so exact match.
        expected = ("exact_match",) if name == "translate_ende_numbers" else ("bleu",)
        assert problem.eval_metrics == expected
        assert problem.decode_defaults == {"beam_size": 4, "alpha": 0.6, "extra_length": 50}
    assert get_problem("translate_ende_wmt14").vocab_size == 37000
    assert get_problem("translate_enfr_wmt14").vocab_spec.kind == "wordpiece"
    assert get_problem("translate_enfr_wmt14").vocab_size == 32000
    with pytest.raises(KeyError, match="registered problems: .*translate_ende_numbers"):
        PROBLEMS.get("translate_nope")


def test_number_splits_are_disjoint_and_seeded():
    splits = split_numbers(NumbersConfig())
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [20000, 1000, 1000]
    assert not set(splits["train"]) & set(splits["test"])
    assert not set(splits["dev"]) & (set(splits["test"]) | set(splits["train"]))
    assert split_numbers(NumbersConfig()) == splits
    for split, numbers in splits.items():  # stratified: short numbers in every split
        assert any(n < 100 for n in numbers) and any(100 <= n < 1000 for n in numbers), split
    with pytest.raises(ValueError, match="only 100 exist"):
        split_numbers(NumbersConfig(max_number=99))


def test_short_train_numbers_are_repeated_to_an_equal_share_per_band():
    config = NumbersConfig()
    distinct = split_numbers(config)["train"]
    balanced = balanced_train_numbers(distinct, config.max_number)
    assert set(balanced) == set(distinct)
    per_band = [sum(1 for n in balanced if n in band) for band in magnitude_bands(99_999)]
    # 90 numbers < 100 x 56, 818 three-digit x 6, the 4- and 5-digit ones once.
    assert per_band == [90 * 56, 818 * 6, 8180, 10912]
    assert all(balanced.count(n) == 1 for n in distinct if n >= 1000)
    train = number_pairs(config, "train")
    assert len(train) == len(balanced) == 29040
    assert ("twenty-one", "einundzwanzig") in {(p.source, p.target) for p in train}
    # Dev and test are not repeated; the toggle turns balancing off.
    assert len(number_pairs(config, "dev")) == 1000
    unbalanced = NumbersConfig(balance_train_bands=False)
    assert len(number_pairs(unbalanced, "train")) == 20000


def test_exact_match_metric_ignores_outer_whitespace_only():
    scores = score_texts(("exact_match",), ["einundzwanzig ", "zwei", "drei zehn"],
                         ["einundzwanzig", "zwei", "dreizehn"], ["a", "b", "c"])
    assert scores == {"exact_match": 100.0 * 2 / 3}
    assert score_texts(("exact_match",), [], [], []) == {"exact_match": 0.0}


def test_unknown_split_names_the_splits():
    with pytest.raises(ValueError, match="has no split 'valid'; its splits: train, dev, test"):
        next(get_problem("translate_ende_multi30k").text_pairs("valid", "/nowhere"))


@pytest.fixture(scope="module")
def multi30k_generated(tmp_path_factory):
    from conftest import shared_data_dir
    raw = shared_data_dir("multi30k")
    data_dir = tmp_path_factory.mktemp("multi30k_data")
    return generate("translate_ende_multi30k", data_dir, raw, download=False), data_dir


def test_multi30k_datagen_from_the_shared_files(multi30k_generated):
    summary, data_dir = multi30k_generated
    dropped = {split: sum(d.count for d in s.dropped.values())
               for split, s in summary.splits.items()}
    assert summary.splits["train"].examples + dropped["train"] == 29000
    assert summary.splits["dev"].examples == 1014
    assert summary.splits["test"].examples == 1000
    assert abs(summary.vocab_size - 8000) <= 0.05 * 8000
    assert set(summary.skipped_splits) == {"test_2017_flickr", "test_2017_mscoco",
                                           "test_2018_flickr"}
    problem = get_problem("translate_ende_multi30k")
    assert len(read_examples(problem.shard_files(data_dir, "test"))) == 1000


def test_multi30k_test_set_detokenizes_to_the_raw_text(multi30k_generated):
    _, data_dir = multi30k_generated
    problem = get_problem("translate_ende_multi30k")
    vocab = problem.load_vocab(data_dir)
    sources, references = eval_text(problem, data_dir, "test")
    assert len(sources) == len(references) == 1000
    for texts in (sources, references):
        ids = vocab.tokenize(tf.constant(texts))
        back = [t.decode("utf-8") for t in vocab.detokenize(ids).numpy()]
        differing = [(a, b) for a, b in zip(texts, back) if a != b]
        # Identity normalisation + byte fallback make every line exact; the only loss
        # SentencePiece allows is leading whitespace, which no test line has.
        assert all(a.lstrip() == b for a, b in differing)
        assert len(differing) <= 0.01 * len(texts)


def test_a_problem_knows_the_name_it_was_registered_under():
    """The name is recorded at registration; a subclass does not inherit its parent's."""
    from t2t_lite.registry import Registry

    parent = get_problem("translate_ende_numbers")
    registry = Registry("problem")
    child = registry.register("my_numbers")(type("MyNumbers", (type(parent),), {}))
    assert parent.name == "translate_ende_numbers" and child().name == "my_numbers"
    unregistered = type("Unregistered", (type(parent),), {})
    with pytest.raises(LookupError, match="Unregistered is not registered"):
        unregistered().name


def test_lowercased_multi30k_lowercases_both_sides_and_leaves_bad_bytes_to_datagen(tmp_path):
    from corpus_helpers import write_gz
    from t2t_lite.data.datagen import DROP_UTF8, clean_pairs

    for stem in ("train", "val", "test_2016_flickr"):
        write_gz(tmp_path / f"{stem}.en.gz", ["Two Young MEN outside.", "A dog\xa0runs."])
        write_gz(tmp_path / f"{stem}.de.gz", ["Zwei junge Männer ÄUSSERN.", b"Ein Hund \xff"])
    cased = list(get_problem("translate_ende_multi30k").text_pairs("dev", tmp_path))
    problem = get_problem("translate_ende_multi30k_lc")
    assert problem.name == "translate_ende_multi30k_lc" and problem.vocab_size == 8000
    pairs = list(problem.text_pairs("dev", tmp_path))
    assert [(p.source, p.target) for p in pairs[:1]] == [
        ("two young men outside.", "zwei junge männer äussern.")]
    assert pairs[1].source == "a dog\xa0runs." and pairs[1].target == b"Ein Hund \xff"
    assert [(p.source_file, p.target_file, p.line) for p in pairs] == [
        (p.source_file, p.target_file, p.line) for p in cased]
    dropped = {}
    assert [texts[:2] for texts in clean_pairs(iter(pairs), dropped)] == [
        ("two young men outside.", "zwei junge männer äussern.")]
    assert dropped[DROP_UTF8].count == 1 and dropped[DROP_UTF8].first.endswith("line 2")
