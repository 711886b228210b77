"""Constrained decoding with a model trained briefly on the Penn Treebank WSJ sample: the
trainer's greedy evaluation, the decoder's beam search and the Translator emit only
well-formed trees over exactly the input words, so no output needs repair."""
import pytest

from trained_parser import PROBLEM

from t2t_lite.commands import decoder
from t2t_lite.decoding.translator import Translator
from t2t_lite.parsing.linearize import LinearizationError, delinearize
from t2t_lite.parsing.trees import Tree
from t2t_lite.parsing.linearize import escape_word
from t2t_lite.runs.loading import load_trained_model

SENTENCES = 8


def is_tree_over(linearised, sentence):
    try:
        delinearize(linearised.split(), sentence.split())
    except LinearizationError:
        return False
    return True


@pytest.mark.slow
def test_briefly_trained_parser_needs_no_repair(trained_ptb_parser, tmp_path, capsys):
    data, run = trained_ptb_parser.data, trained_ptb_parser.run
    # The trainer's evaluation decodes greedily, constrained: nothing to repair.
    assert trained_ptb_parser.final_eval["parse_repaired_sentences"] == 0

    test_source = data / f"{PROBLEM}-test.source.txt"
    sources = test_source.read_text().splitlines()[:SENTENCES]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    assert decoder.main([f"--output_dir={run}", f"--decode_from_file={tmp_path / 'in.txt'}",
                         f"--decode_to_file={tmp_path / 'out.txt'}",
                         "--decode_hparams=beam_size=4,extra_length=100"]) == 0
    assert f"repaired 0 of {SENTENCES} outputs" in capsys.readouterr().err
    trees = (tmp_path / "out.txt").read_text().splitlines()
    assert len(trees) == SENTENCES
    for tree, sentence in zip(trees, sources):
        assert Tree.from_string(tree).words() == [escape_word(w) for w in sentence.split()]

    # Constrained greedy agrees with unconstrained greedy wherever that one is a valid tree.
    _, problem, model, vocabulary = load_trained_model(run)
    options = dict(beam_size=1, extra_length=100)
    constrained = Translator(model, vocabulary, constraint=problem.decode_constraint(vocabulary),
                             **options).translate(sources)
    free = Translator(model, vocabulary, **options).translate(sources)
    for mine, theirs, sentence in zip(constrained, free, sources):
        assert is_tree_over(mine, sentence)
        if is_tree_over(theirs, sentence):
            assert mine == theirs
