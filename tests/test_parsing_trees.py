"""Reading Penn Treebank .mrg files and normalising their trees."""
import pytest

from t2t_lite.parsing import Tree, TreeParseError, normalize, parse_trees, read_mrg, strip_label

RAW = """
( (S
    (NP-SBJ-1 (NNP Mr.) (NNP Smith) )
    (VP (VBD was)
      (VP (VBN named)
        (S
          (NP-SBJ (-NONE- *-1) )
          (NP-PRD (NN chairman) ))
        (PP-TMP=2 (IN in) (NP (CD 1990) ))
        (PRN (-LRB- -LRB-) (ADVP|PRT (RB again) ) (-RRB- -RRB-) )))
    (SBAR (-NONE- 0) (S (-NONE- *T*-2) ))
    (. .) ))
( (NP (DT The) (NN end) ) )
"""

NORMALIZED = ("(S (NP (NNP Mr.) (NNP Smith)) (VP (VBD was) (VP (VBN named) "
              "(S (NP (NN chairman))) (PP (IN in) (NP (CD 1990))) "
              "(PRN (-LRB- -LRB-) (ADVP (RB again)) (-RRB- -RRB-)))) (. .))")


def test_parse_keeps_outer_bracket_traces_and_tags():
    trees = parse_trees(RAW, "raw.mrg")
    assert len(trees) == 2
    first = trees[0]
    assert first.label == "" and len(first.children) == 1
    assert first.children[0].children[0].label == "NP-SBJ-1"
    assert "*T*-2" in first.words() and "-NONE-" in first.pos_tags()


def test_normalize_hand_written_tree():
    first, second = (normalize(tree) for tree in parse_trees(RAW, "raw.mrg"))
    assert first.to_string() == NORMALIZED
    assert first.words() == ["Mr.", "Smith", "was", "named", "chairman", "in", "1990",
                             "-LRB-", "again", "-RRB-", "."]
    assert first.pos_tags() == ["NNP", "NNP", "VBD", "VBN", "NN", "IN", "CD",
                                "-LRB-", "RB", "-RRB-", "."]
    assert second == Tree("NP", (Tree("DT", word="The"), Tree("NN", word="end")))
    assert second.to_string(with_root=True) == "( (NP (DT The) (NN end)) )"


def test_normalized_string_reads_back():
    tree = normalize(parse_trees(RAW)[0])
    assert Tree.from_string(tree.to_string()) == tree


def test_strip_label():
    assert strip_label("NP-SBJ-1") == "NP"
    assert strip_label("PP-LOC=2") == "PP"
    assert strip_label("NP=3") == "NP"
    assert strip_label("ADVP|PRT") == "ADVP"
    assert strip_label("S-TPC-1") == "S"
    for special in ("-LRB-", "-RRB-", "-NONE-", "PRP$", ",", "``"):
        assert strip_label(special) == special


def test_normalize_keeps_root_when_it_has_several_children():
    tree = normalize(parse_trees("( (NP (NN a)) (. .) )")[0])
    assert tree.label == "ROOT" and tree.words() == ["a", "."]
    assert normalize(parse_trees("( (S (NP-SBJ (-NONE- *)) ))")[0]) is None


def test_reads_every_sample_file(ptb_sample_dir):
    files = sorted(ptb_sample_dir.glob("wsj_*.mrg"))
    assert len(files) == 179
    trees = [tree for path in files for tree in read_mrg(path)]
    assert len(trees) == 3669
    for tree in trees:
        assert tree.label not in ("", "ROOT")
        assert "-NONE-" not in tree.pos_tags()
        assert not any(ch in label for label in _labels(tree) for ch in "=|")
    first = read_mrg(ptb_sample_dir / "wsj_0001.mrg")[0]
    assert first.words()[:4] == ["Pierre", "Vinken", ",", "61"]
    assert first.label == "S" and first.children[0].label == "NP"
    # The raw reading keeps the unlabeled outer bracket of every tree.
    raw = read_mrg(ptb_sample_dir / "wsj_0001.mrg", normalized=False)
    assert [t.label for t in raw] == ["", ""]


def _labels(tree):
    yield tree.label
    for child in tree.children:
        yield from _labels(child)


@pytest.mark.parametrize("text, line, message", [
    ("( (S (NP (NN a))\n  (VP (VB b)) )", 1, "never closed"),
    ("( (S (NN a)) )\n)", 2, "closes no open bracket"),
    ("( (S (NN a b)) )", 1, "mixes the word"),
    ("( (S (NP (NN a)) word) )", 1, "mixes the word"),
    ("\n\nstray ( (S (NN a)) )", 3, "outside any bracket"),
    ("( (S (NP ) (NN a)) )", 1, "empty bracket"),
])
def test_parse_errors_name_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.mrg"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TreeParseError, match=message) as info:
        read_mrg(path)
    assert str(info.value).startswith(f"{path}:{line}:")
    assert info.value.line == line


def test_tree_of_traces_only_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "traces.mrg"
    path.write_text("( (S (NN a)) )\n\n( (S (-NONE- *)) )\n", encoding="utf-8")
    with pytest.raises(TreeParseError, match=r"traces.mrg:3: tree 2 has no words"):
        read_mrg(path)
