"""Linearisation of trees, its strict inverse, and the repair of arbitrary model output."""
import random
from functools import lru_cache

import pytest

from t2t_lite.parsing import (LinearizationError, RepairReport, Tree, delinearize, linearize,
                              linearize_tokens, read_mrg_files, repair, source_text)
from t2t_lite.parsing.linearize import placeholders_from_words, repair_to_bracketed

GOLD = Tree.from_string("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))")
WORDS = ["The", "dog", "barks", "."]
TARGET = "(S (NP XX XX )NP (VP XX )VP XX )S"


def xx(text: str) -> Tree:
    """A tree written with its words, every POS tag replaced by the dummy XX."""
    tree = Tree.from_string(text)
    return delinearize(linearize(tree), tree.words())


@lru_cache(maxsize=1)
def sample_trees(directory):
    return read_mrg_files(sorted(directory.glob("wsj_*.mrg")))


def test_linearize_hand_example():
    assert source_text(GOLD) == "The dog barks ."
    assert linearize(GOLD) == TARGET
    assert linearize_tokens(GOLD) == TARGET.split()


def test_delinearize_puts_words_back_with_dummy_or_given_tags():
    assert delinearize(TARGET, WORDS).to_string() == \
        "(S (NP (XX The) (XX dog)) (VP (XX barks)) (XX .))"
    assert delinearize(TARGET.split(), WORDS, GOLD.pos_tags()) == GOLD


def test_linearize_inverse_is_identity_on_sample(ptb_sample_dir):
    trees = sample_trees(ptb_sample_dir)
    assert len(trees) == 3669
    for tree in trees:
        target = linearize(tree)
        assert target.split().count("XX") == len(tree.words())
        assert delinearize(target, source_text(tree).split(), tree.pos_tags()) == tree
        rebuilt, report = repair(target, tree.words())
        assert linearize(rebuilt) == target and report.total_repairs == 0


@pytest.mark.parametrize("target, message", [
    ("(S (NP XX XX )NP (VP XX )VP XX", "left open"),
    ("(S (NP XX XX )VP (VP XX )VP XX )S", "closes \\(NP"),
    ("(S (NP XX XX )NP (VP XX )VP )S", "3 placeholders for 4 words"),
    ("(S (NP XX XX XX )NP (VP XX )VP XX )S", "more placeholders"),
    ("(S (NP XX XX )NP (VP XX )VP XX )S )S", "follows the end"),
    ("(S (NP XX dog )NP (VP XX )VP XX )S", "'dog' is not a bracket"),
])
def test_delinearize_rejects_malformed(target, message):
    with pytest.raises(LinearizationError, match=message):
        delinearize(target, WORDS)


def test_repair_well_formed_is_unchanged():
    tree, report = repair(TARGET, WORDS)
    assert tree == delinearize(TARGET, WORDS)
    assert report == RepairReport(sentences=1, repaired_sentences=0)


@pytest.mark.parametrize("target, expected, counts", [
    # unclosed brackets are closed at the end
    ("(S (NP XX XX )NP (VP XX XX",
     "(S (NP The dog) (VP barks .))", {"unclosed_brackets": 2}),
    # closers after the root closed are stray
    ("(S (NP XX XX )NP (VP XX )VP XX )S )S )VP",
     "(S (NP The dog) (VP barks) .)", {"stray_closers": 2}),
    # a closer for a bracket other than the innermost is dropped
    ("(S (NP XX XX )VP (VP XX )VP XX )S",
     "(S (NP The dog (VP barks) .))", {"mismatched_closers": 2, "unclosed_brackets": 2}),
    # too few placeholders: missing words join the last constituent
    ("(S (NP XX )NP (VP XX )VP )S",
     "(S (NP The) (VP dog) barks .)", {"missing_placeholders": 2}),
    # too few placeholders inside an open bracket: they join it
    ("(S (NP XX )NP (VP XX",
     "(S (NP The) (VP dog barks .))", {"missing_placeholders": 2, "unclosed_brackets": 2}),
    # too many placeholders are dropped
    ("(S (NP XX XX XX )NP (VP XX XX )VP XX )S",
     "(S (NP The dog barks) (VP .))", {"extra_placeholders": 2}),
    # a placeholder after the root closed joins the root
    ("(S (NP XX XX )NP (VP XX )VP )S XX",
     "(S (NP The dog) (VP barks) .)", {"outside_placeholders": 1}),
    # constituents over no word are removed
    ("(S (NP )NP (NP XX XX )NP (ADJP (VP XX )VP (PP )PP )ADJP (X )X XX )S",
     "(S (NP The dog) (ADJP (VP barks)) .)", {"empty_constituents": 3}),
    # bare closers close the innermost bracket; unknown tokens are dropped
    ("<s> (S (NP XX XX ) (VP XX ) XX ) </s>",
     "(S (NP The dog) (VP barks) .)", {"unknown_tokens": 2}),
    # no tree at all: the words are wrapped in a root
    ("", "(S The dog barks .)", {"missing_placeholders": 4, "wrapped_roots": 1}),
    # two top-level constituents are wrapped in a root
    ("(NP XX XX )NP (VP XX XX )VP",
     "(S (NP The dog) (VP barks .))", {"wrapped_roots": 1}),
])
def test_repair_malformed(target, expected, counts):
    tree, report = repair(target, WORDS)
    assert tree == xx(_tag(expected))
    assert tree.words() == WORDS
    expected_counts = {kind: counts.get(kind, 0) for kind in RepairReport.REPAIR_KINDS}
    assert {kind: getattr(report, kind) for kind in RepairReport.REPAIR_KINDS} == expected_counts
    assert report.repaired_sentences == 1 and report.total_repairs == sum(counts.values())


def _tag(text: str) -> str:
    """Writes each bare word of ``text`` as a preterminal ``(XX word)``."""
    out = []
    for token in text.replace("(", " ( ").replace(")", " ) ").split():
        if out and out[-1] == "(":
            out.append(token)          # a label
        elif token in "()":
            out.append(token)
        else:
            out.extend(["(", "XX", token, ")"])
    return " ".join(out)


def test_repair_random_outputs_give_well_formed_trees_over_the_words():
    rng = random.Random(7)
    vocab = ["(S", "(NP", "(VP", ")S", ")NP", ")VP", ")", "XX", "XX", "XX", "junk"]
    words = [f"w{i}" for i in range(6)]
    reports = []
    for _ in range(500):
        target = [rng.choice(vocab) for _ in range(rng.randrange(0, 25))]
        tree, report = repair(target, words)
        reports.append(report)
        assert tree.words() == words and not tree.is_preterminal
        # the repaired tree is well formed: its linearisation reads back strictly
        assert delinearize(linearize(tree), words) == tree
    total = RepairReport.aggregate(reports)
    assert total.sentences == 500
    assert 0 < total.repaired_sentences <= 500
    assert total.total_repairs == sum(r.total_repairs for r in reports)


def test_report_aggregate_and_summary():
    _, clean = repair(TARGET, WORDS)
    _, broken = repair("(S (NP XX XX )NP (VP XX XX", WORDS)
    total = RepairReport.aggregate([clean, broken, broken])
    assert (total.sentences, total.repaired_sentences, total.unclosed_brackets) == (3, 2, 4)
    assert total.summary() == "repaired 2 of 3 outputs (unclosed_brackets=4)"
    assert RepairReport.aggregate([]).sentences == 0


def test_words_in_target_linearisation_and_back():
    tree = xx("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))")
    assert linearize(tree, words=True) == "(S (NP The dog )NP (VP barks )VP . )S"
    words = tree.words()
    assert placeholders_from_words(linearize(tree, words=True), words) == linearize(tree).split()
    # A wrong word stays as it is (repair drops and counts it); a word that looks like a
    # bracket is read as the word when it is the next one.
    assert placeholders_from_words("(S The cat )S", ["The", "dog"]) == ["(S", "XX", "cat", ")S"]
    assert placeholders_from_words("(S (NP )S", ["(NP"]) == ["(S", "XX", ")S"]
    output, report = repair_to_bracketed("The ( dog", "(S The (NP ( dog )NP )S", True)
    assert output == "(S (XX The) (NP (XX -LRB-) (XX dog)))" and report.total_repairs == 0
    output, report = repair_to_bracketed("The dog", "(S The cat )S", True)
    assert output == "(S (XX The) (XX dog))" and report.unknown_tokens == 1
