"""Trees as labeled spans and CKY over span scores (t2t_lite.parsing.chart)."""
import numpy as np
import pytest

from t2t_lite.parsing.chart import best_bracketing, labeled_spans, tree_from_spans
from t2t_lite.parsing.treebank import read_tree_file
from t2t_lite.parsing.trees import Tree, parse_trees


def tree(text: str) -> Tree:
    (result,) = parse_trees(text)
    return result


def with_tags(node: Tree, tag: str = "XX") -> Tree:
    if node.is_preterminal:
        return Tree(tag, word=node.word)
    return Tree(node.label, tuple(with_tags(child, tag) for child in node.children))


def one_hot_scores(spans, labels, n):
    """Scores that give each gold span +1 for its label and every other span -1 for any
    label but 0: the gold tree is the only best one."""
    index = {label: i for i, label in enumerate(labels)}
    scores = np.full((n + 1, n + 1, len(labels)), -1.0)
    scores[:, :, 0] = 0.0
    for (i, j), label in spans.items():
        scores[i, j, index[label]] = 1.0
    return scores


def round_trip(gold: Tree) -> Tree:
    spans = labeled_spans(gold)
    labels = [None] + sorted(set(spans.values()))
    words = gold.words()
    bracketing = best_bracketing(one_hot_scores(spans, labels, len(words)))
    return tree_from_spans(words, bracketing, labels)


def test_labeled_spans_join_unary_chains_outermost_first_and_leave_out_tags():
    gold = tree("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))")
    assert labeled_spans(gold) == {(0, 4): "S", (0, 2): "NP", (2, 3): "VP"}
    chain = tree("(S (VP (VB Go) (ADVP (RB now))))")
    assert labeled_spans(chain) == {(0, 2): "S+VP", (1, 2): "ADVP"}


@pytest.mark.parametrize("text", [
    "(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))",
    "(S (VP (VB Go) (ADVP (RB now))))",
    "(NP (NNP Pierre) (NNP Vinken) (, ,) (ADJP (NP (CD 61) (NNS years)) (JJ old)) (, ,))",
    "(FRAG (NP (NN Yes)))",
])
def test_a_tree_comes_back_from_its_own_spans(text):
    gold = tree(text)
    assert round_trip(gold) == with_tags(gold)


def test_every_tree_of_the_wsj_sample_comes_back_from_its_own_spans(ptb_sample_dir):
    trees = [t for n in range(1, 180)
             for t, _ in read_tree_file(ptb_sample_dir / f"wsj_{n:04d}.mrg") if t is not None]
    assert len(trees) == 3669
    assert all(round_trip(gold) == with_tags(gold) for gold in trees)


def binary_trees(i, j):
    """Every binary bracketing of (i, j), as a tuple of its spans."""
    if j - i == 1:
        yield ((i, j),)
        return
    for k in range(i + 1, j):
        for left in binary_trees(i, k):
            for right in binary_trees(k, j):
                yield ((i, j),) + left + right


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
def test_cky_finds_the_best_of_every_binary_tree(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        scores = rng.normal(size=(n + 1, n + 1, 4))

        def span_best(span):
            row = scores[span]
            return row[1:].max() if span == (0, n) else row.max()

        best = max(sum(span_best(s) for s in spans) for spans in binary_trees(0, n))
        bracketing = best_bracketing(scores)
        assert len(bracketing) == 2 * n - 1
        assert sum(scores[span][label] for span, (label, _) in bracketing.items()) \
            == pytest.approx(best)


def test_a_hand_computed_chart():
    # Three words; label 1 is NP. (1, 3) scores 2 as NP, (0, 2) only 1: the tree is
    # (X a (NP b c)) with the root's best label; every other span is left unlabeled.
    scores = np.zeros((4, 4, 3))
    scores[1, 3, 1] = 2.0
    scores[0, 2, 1] = 1.0
    scores[0, 3, 2] = -5.0       # the root must take a label even when each costs
    scores[0, 3, 1] = -7.0
    bracketing = best_bracketing(scores)
    assert bracketing == {(0, 3): (2, 1), (0, 1): (0, 0), (1, 3): (1, 2),
                          (1, 2): (0, 0), (2, 3): (0, 0)}
    words = ["a", "b", "c"]
    assert tree_from_spans(words, bracketing, [None, "NP", "S"]) == tree(
        "(S (XX a) (NP (XX b) (XX c)))")


def test_one_word_sentence_gets_a_root():
    scores = np.zeros((2, 2, 3))
    scores[0, 1, 0] = 10.0
    scores[0, 1, 2] = 1.0
    bracketing = best_bracketing(scores)
    assert bracketing == {(0, 1): (2, 0)}
    assert tree_from_spans(["Yes"], bracketing, [None, "NP", "FRAG+NP"]) == tree(
        "(FRAG (NP (XX Yes)))")


@pytest.mark.parametrize("shape, message", [
    ((3, 4, 2), "scores must be"),
    ((1, 1, 2), "n >= 1"),
    ((3, 3, 1), "at least one other"),
])
def test_malformed_scores_are_refused(shape, message):
    with pytest.raises(ValueError, match=message):
        best_bracketing(np.zeros(shape))

