"""EVALB (COLLINS.prm) bracketing scores on hand-worked cases and gold-vs-gold."""
from functools import lru_cache

import pytest

from t2t_lite.parsing import (EvalbError, Tree, evaluate, evaluate_sentence, linearize,
                              read_mrg_files, repair)
from t2t_lite.parsing.evalb import evalb_label, sentence_brackets

T = Tree.from_string


@lru_cache(maxsize=1)
def sample_trees(directory):
    return read_mrg_files(sorted(directory.glob("wsj_*.mrg")))


def counts(gold: str, test: str):
    c = evaluate_sentence(T(gold), T(test))
    return c.matched_brackets, c.gold_brackets, c.test_brackets


GOLD = "(S (NP (DT the) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))"


def test_brackets_skip_preterminals_and_punctuation():
    tree = T(GOLD)
    deleted = [tag == "." for tag in tree.pos_tags()]
    # S spans the five words left once "." is deleted
    assert sorted(sentence_brackets(tree, deleted)) == \
        [("NP", 0, 2), ("NP", 3, 5), ("S", 0, 5), ("VP", 2, 5)]


def test_crossing_brackets():
    # gold: S(0,5) NP(0,2) VP(2,5) NP(3,5); test: S(0,5) NP(0,3) NP(3,5).
    # NP(0,3) crosses VP(2,5); matched S and NP(3,5): P = 2/3, R = 2/4.
    test = "(S (NP (XX the) (XX dog) (XX saw)) (NP (XX a) (XX cat)) (XX .))"
    result = evaluate([T(GOLD)], [T(test)])
    assert (result.matched_brackets, result.gold_brackets, result.test_brackets) == (2, 4, 3)
    assert result.precision == pytest.approx(200 / 3)
    assert result.recall == pytest.approx(50.0)
    assert result.f1 == pytest.approx(2 * (200 / 3) * 50 / (200 / 3 + 50))  # 57.14
    assert result.crossing_brackets == 1 and result.exact_match == 0.0


def test_unary_chains_count_as_multisets():
    gold = "(S (NP (NP (NNS dogs))) (VP (VBP bark)))"  # S, NP, NP(same span), VP
    assert counts(gold, "(S (NP (XX dogs)) (VP (XX bark)))") == (3, 4, 3)
    assert counts(gold, "(S (NP (NP (NP (XX dogs)))) (VP (XX bark)))") == (4, 4, 5)
    assert counts(gold, gold) == (4, 4, 4)
    # a unary of another label over the same span is a separate bracket
    assert counts(gold, "(S (NP (ADJP (XX dogs))) (VP (XX bark)))") == (3, 4, 4)
    result = evaluate([T(gold)], [T("(S (NP (XX dogs)) (VP (XX bark)))")])
    assert (result.precision, result.recall) == (100.0, 75.0)
    assert result.f1 == pytest.approx(600 / 7)  # 2*100*75/175


def test_advp_and_prt_are_equal_but_other_labels_are_not():
    gold = "(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))))"
    assert counts(gold, "(S (NP (XX He)) (VP (XX gave) (ADVP (XX up))))") == (4, 4, 4)
    assert counts(gold.replace("PRT", "ADVP"), gold) == (4, 4, 4)
    assert counts(gold, "(S (NP (XX He)) (VP (XX gave) (NP (XX up))))") == (3, 4, 4)
    assert evalb_label("PRT") == evalb_label("ADVP") == "ADVP"


def test_function_tags_and_indices_are_cut_from_labels():
    assert evalb_label("NP-SBJ-1") == "NP" and evalb_label("PP=2") == "PP"
    gold = "(S (NP-SBJ-1 (PRP He)) (VP (VBD left)))"
    assert counts(gold, "(S (NP (XX He)) (VP (XX left)))") == (3, 3, 3)


def test_punctuation_is_ignored_using_gold_tags():
    gold = "(S (`` ``) (NP (NNP John)) (, ,) (VP (VBD left)) ('' '') (. .))"
    # The test tree puts the punctuation inside other brackets: after deleting the
    # words the gold tags mark as punctuation, every span agrees.
    test = ("(S (NP (XX ``) (XX John) (XX ,)) (VP (XX left) (XX '') (XX .)))")
    result = evaluate([T(gold)], [T(test)])
    assert (result.f1, result.exact_match) == (100.0, 100.0)
    assert counts(gold, test) == (3, 3, 3)
    # a constituent over punctuation only has an empty span and is not scored
    gold_prn = "(S (NP (NNP John)) (PRN (: --)) (VP (VBD left)) (. .))"
    assert counts(gold_prn, "(S (NP (XX John)) (XX --) (VP (XX left)) (XX .))") == (3, 3, 3)
    # but a word that is not punctuation counts: moving it changes spans
    assert counts(gold, "(S (XX ``) (NP (XX John) (XX ,) (XX left)) (XX '') (XX .))") == \
        (1, 3, 2)


def test_root_is_excluded():
    inner = "(S (NP (NN Rain)) (VP (VBD fell)))"
    for root in ("TOP", "ROOT", ""):
        wrapped = f"({root} {inner})" if root else f"( {inner})"
        assert counts(wrapped, inner) == (3, 3, 3)
        assert counts(inner, wrapped) == (3, 3, 3)


def test_exact_match_and_len40():
    short_gold = "(S (NP (NN Rain)) (VP (VBD fell)) (. .))"
    # 40 words plus a full stop: 41 words, punctuation included, so beyond the cutoff
    long_words = " ".join(f"(NN w{i})" for i in range(40))
    long_gold = f"(S (NP {long_words}) (. .))"
    long_test = f"(S (NP {long_words.replace('NN', 'XX')}) (XX .))".replace(
        "(XX w39)", "(VP (XX w39))")  # one extra bracket
    result = evaluate([T(short_gold), T(long_gold)], [T(short_gold), T(long_test)])
    assert (result.sentences, result.sentences_len40) == (2, 1)
    assert (result.matched_brackets, result.gold_brackets, result.test_brackets) == (5, 5, 6)
    assert result.precision == pytest.approx(500 / 6) and result.recall == 100.0
    assert result.exact_match == 50.0
    assert (result.f1_len40, result.precision_len40, result.exact_match_len40) == \
        (100.0, 100.0, 100.0)
    # 39 words plus a full stop is within the cutoff
    at_cutoff = T(f"(S (NP {' '.join(f'(NN w{i})' for i in range(39))}) (. .))")
    assert evaluate([at_cutoff], [at_cutoff]).sentences_len40 == 1


def test_sentence_of_punctuation_only_is_skipped():
    result = evaluate([T("(X (. .))"), T("(S (NN Hi))")], [T("(X (XX .))"), T("(S (XX Hi))")])
    assert (result.sentences, result.skipped_sentences, result.f1) == (1, 1, 100.0)


def test_word_count_or_word_mismatch_names_the_sentence():
    gold = [T("(S (NN a))"), T("(S (NN a) (NN b))")]
    with pytest.raises(EvalbError, match="sentence 2: gold has 2 words, test has 1"):
        evaluate(gold, [T("(S (XX a))"), T("(S (XX a))")])
    with pytest.raises(EvalbError, match="sentence 2: word 2 differs"):
        evaluate(gold, [T("(S (XX a))"), T("(S (XX a) (XX c))")])
    assert evaluate(gold, [T("(S (XX a))"), T("(S (XX a) (XX c))")],
                    check_words=False).f1 == 100.0
    with pytest.raises(EvalbError, match="2 gold trees but 1 test trees"):
        evaluate(gold, gold[:1])


def test_gold_against_gold_on_sample_is_100(ptb_sample_dir):
    trees = sample_trees(ptb_sample_dir)
    result = evaluate(trees, trees)
    assert (result.precision, result.recall, result.f1, result.exact_match) == \
        (100.0, 100.0, 100.0, 100.0)
    assert result.f1_len40 == 100.0
    assert result.sentences == 3669 and 0 < result.sentences_len40 < 3669
    assert result.gold_brackets == result.test_brackets == result.matched_brackets > 0


def test_repaired_linearised_gold_scores_100_with_dummy_tags(ptb_sample_dir):
    trees = sample_trees(ptb_sample_dir)[:500]
    test = [repair(linearize(tree), tree.words())[0] for tree in trees]
    assert all(set(t.pos_tags()) == {"XX"} for t in test)
    assert evaluate(trees, test).f1 == 100.0
