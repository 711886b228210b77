"""Parsing problems: datagen from the WSJ sample, the vocabulary's exact round trip of
linearised trees, the WSJ layouts, the semi-supervised extra trees, clear errors, decode
post-processing and reading gold references."""
import shutil
from pathlib import Path

import pytest

from t2t_lite.data import datagen
from t2t_lite.data.problem import eval_text, get_problem
from t2t_lite.data.raw import RawDataError
from t2t_lite.metrics.text_metrics import score_texts
from t2t_lite.errors import UserError
from t2t_lite.parsing import (Tree, linearize, parse_trees, read_mrg, read_mrg_files,
                              source_text)
from t2t_lite.parsing.treebank import read_tree_file
from t2t_lite.problems.parsing import find_wsj_files, format_numbers
from t2t_lite.registry import hparams

SAMPLE = "parsing_english_ptb_sample"
SAMPLE_WORDS = "parsing_english_ptb_sample_words"


_GENERATED = {}


@pytest.fixture
def sample_data(ptb_sample_dir, tmp_path_factory):
    """(data_dir, summary, sample dir): datagen of the sample problem, run once per session."""
    if "data" not in _GENERATED:
        data_dir = tmp_path_factory.mktemp("ptb_sample_data")
        summary = get_problem(SAMPLE).generate_data(data_dir, ptb_sample_dir, download=False)
        _GENERATED["data"] = (data_dir, summary, ptb_sample_dir)
    return _GENERATED["data"]


def sample_files(sample_dir, low, high):
    return [sample_dir / f"wsj_{n:04d}.mrg" for n in range(low, high + 1)]


def test_registered_facts():
    for name, size in (("parsing_english_ptb16k", 16000), ("parsing_english_ptb32k", 32000),
                       (SAMPLE, 4000), (SAMPLE_WORDS, 4000)):
        problem = get_problem(name)
        assert problem.eval_metrics == ("parse_f1",)
        assert problem.decode_defaults == {"beam_size": 21, "alpha": 0.3, "extra_length": 300}
        assert problem.vocab_size == size
        assert problem.vocab_spec.kind == "sentencepiece"


def test_sample_datagen_split_counts(sample_data):
    data_dir, summary, sample_dir = sample_data
    counts = {split: s.examples for split, s in summary.splits.items()}
    expected = {split: len(read_mrg_files(sample_files(sample_dir, low, high)))
                for split, (low, high) in (("train", (1, 159)), ("dev", (160, 169)),
                                           ("test", (170, 179)))}
    assert counts == expected == {"train": 3396, "dev": 105, "test": 168}
    assert sum(counts.values()) == 3669  # every tree of the 179 files, none lost
    assert all(not s.dropped for s in summary.splits.values())
    assert summary.skipped_splits == {}
    print("\n" + summary.format())


def test_sample_eval_text_is_gold_in_order(sample_data):
    data_dir, _, sample_dir = sample_data
    gold = read_mrg_files(sample_files(sample_dir, 170, 179))
    sources, targets = eval_text(get_problem(SAMPLE), data_dir, "test")
    assert list(sources) == [source_text(t) for t in gold]
    assert list(targets) == [linearize(t) for t in gold]


def test_vocabulary_round_trips_every_sample_target_exactly(sample_data):
    data_dir, _, sample_dir = sample_data
    vocab = get_problem(SAMPLE).load_vocab(data_dir)
    trees = read_mrg_files(sorted(sample_dir.glob("wsj_*.mrg")))
    targets = [linearize(tree) for tree in trees]
    ids = vocab.encode_batch(targets)
    decoded = [text.decode("utf-8") for text in vocab.detokenize(_ragged(ids)).numpy()]
    assert decoded == targets
    # Every bracket token and XX is one whole id (labels unseen in train included).
    assert [len(row) for row in ids] == [len(t.split()) for t in targets]
    sources = [source_text(tree) for tree in trees[:200]]
    decoded = vocab.detokenize(_ragged(vocab.encode_batch(sources))).numpy()
    assert [text.decode("utf-8") for text in decoded] == sources


@pytest.fixture
def sample_words_data(ptb_sample_dir, tmp_path_factory):
    """data_dir of ``parsing_english_ptb_sample_words``, made once per session."""
    if "words" not in _GENERATED:
        data_dir = tmp_path_factory.mktemp("ptb_sample_words_data")
        get_problem(SAMPLE_WORDS).generate_data(data_dir, ptb_sample_dir, download=False)
        _GENERATED["words"] = data_dir
    return _GENERATED["words"]


def test_words_in_target_sample_is_copyable_and_constrained_search_accepts_it(
        sample_words_data, ptb_sample_dir):
    """On every sample tree: the target spells the words (datagen's test split in order);
    its non-bracket pieces are exactly the source's pieces, so search can copy them; the
    word-mode constraint allows every gold token; post-processing gives the gold tree."""
    import numpy as np
    import tensorflow as tf
    from t2t_lite.data.vocab import EOS_ID
    problem = get_problem(SAMPLE_WORDS)
    assert problem.words_in_target and not get_problem(SAMPLE).words_in_target
    gold = read_mrg_files(sample_files(ptb_sample_dir, 170, 179))
    assert list(eval_text(problem, sample_words_data, "test")[1]) == [
        linearize(t, words=True) for t in gold]
    vocab = problem.load_vocab(sample_words_data)
    machine = problem.decode_constraint(vocab)
    brackets = set(machine.tables["open_label"].nonzero()[0]) | set(
        machine.tables["close_label"].nonzero()[0])
    trees = read_mrg_files(sorted(ptb_sample_dir.glob("wsj_*.mrg")))
    sources = vocab.encode_batch([source_text(t) for t in trees])
    targets = vocab.encode_batch([linearize(t, words=True) for t in trees])
    for source, target in zip(sources, targets):
        assert [i for i in target if i not in brackets] == source
    targets = [ids + [EOS_ID] for ids in targets]

    @tf.function(reduce_retracing=True, autograph=False)   # the eager ops were most of this test's time
    def gold_token_allowed_then_advance(state, remaining, tokens):
        allowed = tf.gather(machine.allowed(state, remaining), tokens, batch_dims=1)
        return allowed, machine.update(state, tokens)

    # Trees in groups of similar target length, so short ones do not run the longest's steps.
    by_length = sorted(range(len(trees)), key=lambda row: len(targets[row]))
    for group in np.array_split(np.array(by_length), 4):
        group_sources = [sources[row] for row in group]
        group_targets = [targets[row] for row in group]
        inputs = np.zeros([len(group), max(map(len, group_sources)) + 1], np.int32)
        for row, ids in enumerate(group_sources):
            inputs[row, :len(ids) + 1] = ids + [EOS_ID]
        lengths = np.array([len(ids) for ids in group_targets], np.int32)  # the tightest budget
        state = machine.initial_state(tf.constant(inputs), tf.constant(lengths))
        assert state["active"].numpy().all()
        for step in range(lengths.max()):
            live = step < lengths
            tokens = np.array([ids[step] if step < len(ids) else 0 for ids in group_targets],
                              np.int32)
            allowed, state = gold_token_allowed_then_advance(
                state, tf.constant(lengths - step), tf.constant(tokens))
            assert allowed.numpy()[live].all(), step
    for tree in trees[:300]:
        output = problem.postprocess_decode(source_text(tree), linearize(tree, words=True))
        assert output == problem.postprocess_decode(source_text(tree), linearize(tree))
    assert problem.postprocess_report([source_text(t) for t in trees[:50]],
                                      [linearize(t, words=True) for t in trees[:50]]
                                      ) == "repaired 0 of 50 outputs"


def _ragged(ids):
    import tensorflow as tf
    return tf.ragged.constant(ids, dtype=tf.int32)


def test_parsing_tiny_hparams_hold_the_sample(sample_data):
    _, summary, _ = sample_data
    tiny = hparams("transformer_parsing_tiny")
    assert tiny.max_length == 256 and tiny.batch_size >= tiny.max_length
    assert tiny.num_hidden_layers == 2 and tiny.hidden_size == 128
    # The docstring's "half transformer_tiny's learning rate" (measured better on the sample).
    assert tiny.learning_rate_constant == hparams("transformer_tiny").learning_rate_constant / 2
    # The test split's longest target (tokens + EOS) fits datagen's limit.
    assert summary.splits["test"].max_target_length + 1 <= get_problem(SAMPLE).max_length
    wsj = hparams("transformer_parsing_wsj")
    assert (wsj.num_hidden_layers, wsj.hidden_size) == (4, 1024)


def _mini_wsj(root: Path, sample_dir: Path, sections=range(2, 24)) -> Path:
    """A miniature WSJ tree: one sample file per section, renamed wsj_NN00.mrg."""
    for number, section in enumerate(sections, start=1):
        folder = root / f"{section:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(sample_dir / f"wsj_{number:04d}.mrg", folder / f"wsj_{section:02d}00.mrg")
    return root


def test_wsj_standard_layout(tmp_path, ptb_sample_dir):
    root = _mini_wsj(tmp_path / "wsj_root", ptb_sample_dir)
    (root / "00").mkdir()
    shutil.copy(ptb_sample_dir / "wsj_0030.mrg", root / "00" / "wsj_0001.mrg")  # ignored
    problem = get_problem("parsing_english_ptb16k")
    train = problem.split_files("train", root)
    assert [p.name for p in train] == [f"wsj_{s:02d}00.mrg" for s in range(2, 22)]
    assert [p.name for p in problem.split_files("dev", root)] == ["wsj_2200.mrg"]
    pairs = list(problem.text_pairs("test", root))
    gold = read_mrg(ptb_sample_dir / "wsj_0022.mrg")  # section 23 is the 22nd file copied
    assert [(p.source, p.target) for p in pairs] == [(source_text(t), linearize(t)) for t in gold]
    # TMP_DIR/wsj is found too, and a flat folder reads the same files.
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / "wsj").symlink_to(root)
    assert [p.name for p in problem.split_files("dev", holder)] == ["wsj_2200.mrg"]
    flat = tmp_path / "flat"
    flat.mkdir()
    for path in root.glob("*/wsj_*.mrg"):
        shutil.copy(path, flat / path.name)
    assert ([p.name for p in problem.split_files("train", flat)]
            == [p.name for p in train])


def test_wsj_missing_directory_and_sections_are_clear(tmp_path, ptb_sample_dir):
    problem = get_problem("parsing_english_ptb16k")
    with pytest.raises(RawDataError, match=r"no such directory.*WSJ_ROOT/NN/wsj_NNxx\.mrg"):
        problem.text_pairs("train", tmp_path / "no_such_dir")
    root = _mini_wsj(tmp_path / "partial", ptb_sample_dir, sections=[2, 3, 4, 22])
    with pytest.raises(RawDataError) as error:
        problem.text_pairs("dev", root)
    message = str(error.value)
    assert "lacks WSJ section(s) 05-21, 23" in message
    assert "02-21 (train), 22 (dev) and 23 (test)" in message and "--tmp_dir" in message
    # The datagen command reports it as one line and exit status 2, writing no vocabulary.
    from t2t_lite.commands import datagen as datagen_command
    out = tmp_path / "out"
    status = datagen_command.main(["--problem=parsing_english_ptb16k", f"--data_dir={out}",
                                   f"--tmp_dir={root}", "--no_download"])
    assert status == 2
    assert not list(out.glob("vocab.*"))


def test_sample_missing_files_are_named(tmp_path, ptb_sample_dir):
    partial = tmp_path / "sample"
    partial.mkdir()
    for n in range(1, 170):
        shutil.copy(ptb_sample_dir / f"wsj_{n:04d}.mrg", partial)
    with pytest.raises(RawDataError, match=r"lacks wsj_0170-0179\.mrg.*wsj_0001\.mrg"):
        get_problem(SAMPLE).text_pairs("train", partial)


def test_duplicate_wsj_file_is_an_error(tmp_path, ptb_sample_dir):
    (tmp_path / "02").mkdir()
    shutil.copy(ptb_sample_dir / "wsj_0001.mrg", tmp_path / "02" / "wsj_0201.mrg")
    shutil.copy(ptb_sample_dir / "wsj_0001.mrg", tmp_path / "wsj_0201.mrg")
    with pytest.raises(RawDataError, match="both WSJ file 0201"):
        find_wsj_files(tmp_path)


def test_ptb32k_adds_extra_trees_to_train_only(tmp_path, ptb_sample_dir):
    tmp_dir = tmp_path / "raw"
    _mini_wsj(tmp_dir / "wsj", ptb_sample_dir)
    extra = tmp_dir / "extra"
    (extra / "nested").mkdir(parents=True)
    shutil.copy(ptb_sample_dir / "wsj_0100.mrg", extra / "a.mrg")
    lines = [tree.to_string(with_root=True) for tree in read_mrg(ptb_sample_dir / "wsj_0101.mrg")]
    lines.insert(1, "")  # blank lines are skipped
    (extra / "nested" / "b.trees").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (extra / "README").write_text("not trees", encoding="utf-8")  # ignored: no tree suffix
    plain = get_problem("parsing_english_ptb16k")
    semi = get_problem("parsing_english_ptb32k")
    wsj_train = list(plain.text_pairs("train", tmp_dir))
    semi_train = list(semi.text_pairs("train", tmp_dir))
    extra_trees = read_mrg_files([ptb_sample_dir / "wsj_0100.mrg", ptb_sample_dir / "wsj_0101.mrg"])
    assert [(p.source, p.target) for p in semi_train] == (
        [(p.source, p.target) for p in wsj_train]
        + [(source_text(t), linearize(t)) for t in extra_trees])
    assert semi_train[-1].line == len(lines)  # line numbers of the one-tree-per-line file
    assert ([p.target for p in semi.text_pairs("test", tmp_dir)]
            == [p.target for p in plain.text_pairs("test", tmp_dir)])


def test_ptb32k_missing_extra_and_bad_line(tmp_path, ptb_sample_dir):
    tmp_dir = tmp_path / "raw"
    _mini_wsj(tmp_dir / "wsj", ptb_sample_dir)
    semi = get_problem("parsing_english_ptb32k")
    with pytest.raises(RawDataError, match=r"extra does not exist.*one bracketed tree per line"):
        semi.text_pairs("train", tmp_dir)
    (tmp_dir / "extra").mkdir()
    (tmp_dir / "extra" / "x.txt").write_text("(S (NP (DT a)) (VP (VB b)))\n(S (NP (DT a)\n")
    with pytest.raises(RawDataError, match=r"x\.txt:2: .*never closed"):
        list(semi.text_pairs("train", tmp_dir))


def test_tree_without_words_is_counted_not_lost(tmp_path):
    path = tmp_path / "t.mrg"
    path.write_text("( (S (NP (DT a)) (VP (VB b))) )\n( (S (-NONE- *T*-1)) )\n"
                    "( (S (NP (DT c)) (VP (VB d))) )\n", encoding="utf-8")
    assert [line for _, line in read_tree_file(path)] == [1, 2, 3]
    dropped = {}
    from t2t_lite.problems.parsing import tree_pairs
    kept = list(datagen.clean_pairs(tree_pairs([path]), dropped))
    assert [source for source, _, _ in kept] == ["a b", "c d"]
    assert dropped[datagen.DROP_EMPTY].count == 1
    assert dropped[datagen.DROP_EMPTY].first == f"{path} line 2"


@pytest.mark.parametrize("hypothesis", [
    "", "garbage tokens", "(S (NP XX XX )NP (VP XX )VP XX )S",
    ")S )NP XX XX XX XX XX XX XX", "(S (NP (NP (NP", "(S XX )S XX XX (VP XX",
    "(NP XX )VP )S (S XX XX XX XX XX XX XX XX XX XX )S", "XX (S )S", ")",
])
def test_postprocess_decode_is_always_a_tree_over_the_input_words(hypothesis):
    problem = get_problem(SAMPLE)
    source = "The ( odd ) dog barks ."
    words = ["The", "-LRB-", "odd", "-RRB-", "dog", "barks", "."]
    output = problem.postprocess_decode(source, hypothesis)
    assert "\n" not in output
    (tree,) = parse_trees(output)
    assert tree.words() == words
    assert not tree.label.startswith("-") and tree.children


def test_postprocess_decode_keeps_a_well_formed_hypothesis():
    problem = get_problem(SAMPLE)
    output = problem.postprocess_decode("The dog barks .", "(S (NP XX XX )NP (VP XX )VP XX )S")
    assert output == "(S (NP (XX The) (XX dog)) (VP (XX barks)) (XX .))"
    assert problem.postprocess_decode("   ", "(S XX )S") == ""


def test_read_references_gold_vs_gold_is_100(sample_data, tmp_path):
    data_dir, _, sample_dir = sample_data
    problem = get_problem(SAMPLE)
    gold_file = tmp_path / "test_gold.mrg"
    gold_file.write_text("".join(p.read_text(encoding="utf-8")
                                 for p in sample_files(sample_dir, 170, 179)), encoding="utf-8")
    references = problem.read_references(gold_file)
    sources, targets = eval_text(problem, data_dir, "test")
    # gold trees as written (tags, function tags, traces) under a TOP root, in order
    raw = [t for path in sample_files(sample_dir, 170, 179)
           for t in parse_trees(path.read_text(encoding="utf-8"))]
    assert references == [f"(TOP {t.children[0].to_string()})" for t in raw]
    assert len(references) == 168 and "(-NONE- " in "".join(references)
    # the hypotheses are the linearised gold trees: EVALB gives 100
    scores = score_texts(problem.eval_metrics, targets, references, sources)
    assert scores["parse_f1"] == 100.0 and scores["parse_exact_match"] == 100.0
    assert scores["parse_repaired_sentences"] == 0
    # datagen wrote the same gold trees for the trainer's evaluation, aligned with sources
    assert list(problem.eval_references(data_dir, "test")) == references
    assert problem.gold_path(data_dir, "test").name == f"{SAMPLE}-test.gold.txt"
    assert problem.read_references(problem.gold_path(data_dir, "test")) == references
    dev = problem.eval_references(data_dir, "dev")
    dev_sources = eval_text(problem, data_dir, "dev")[0]
    assert len(dev) == len(dev_sources) == 105
    assert all(" ".join(w for w, tag in zip(Tree.from_string(tree).words(),
                                             Tree.from_string(tree).pos_tags())
                        if tag != "-NONE-") == source
               for tree, source in zip(dev, dev_sources))
    # A folder of gold files reads the same trees; a missing path is a clear error.
    folder = tmp_path / "gold"
    folder.mkdir()
    for path in sample_files(sample_dir, 170, 179):
        shutil.copy(path, folder)
    assert problem.read_references(folder) == references
    with pytest.raises(FileNotFoundError, match="does not exist"):
        problem.read_references(tmp_path / "nope.mrg")


def test_linearised_references_are_refused(sample_data):
    data_dir, _, _ = sample_data
    problem = get_problem(SAMPLE)
    target_file = datagen.text_paths(data_dir, SAMPLE, "test")[1]
    with pytest.raises(UserError, match=r"test\.target\.txt:1: a linearised tree .*gold\.txt"):
        problem.read_references(target_file)
    with pytest.raises(UserError, match="reference 1 is a linearised tree"):
        score_texts(("parse_f1",), ["(S XX )S"], ["(S XX )S"], ["Hi"])


def test_parse_f1_deletes_punctuation_by_the_gold_tags_as_evalb_does():
    # Only the final "." moves inside the VP: EVALB deletes it, so nothing changes.
    reference = "(TOP (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)))"
    moved = "(S (NP XX XX )NP (VP XX XX )VP )S"
    scores = score_texts(("parse_f1",), [moved], [reference], ["The dog barks ."])
    assert scores["parse_f1"] == 100.0 and scores["parse_exact_match"] == 100.0
    # an unlabeled or ROOT root is one more gold bracket for EVALB (only TOP is deleted)
    for root in ("", "ROOT"):
        wrapped = reference.replace("(TOP ", f"({root} " if root else "( ")
        assert problem_refs_f1(moved, wrapped) == pytest.approx(2 * 3 / 7 * 100)


def problem_refs_f1(hypothesis, reference):
    return score_texts(("parse_f1",), [hypothesis], [reference], ["The dog barks ."])["parse_f1"]


def test_sample_wrong_path_says_no_such_directory(tmp_path, capsys):
    from t2t_lite.commands import datagen as datagen_command
    missing = tmp_path / "no" / "ptb_wsj_sample"
    status = datagen_command.main([f"--problem={SAMPLE}", f"--data_dir={tmp_path / 'out'}",
                                   f"--tmp_dir={missing}", "--no_download"])
    assert status == 2
    error = capsys.readouterr().err
    assert f"{missing}: no such directory" in error and "lacks" not in error
    assert not missing.exists()  # datagen no longer creates the folder it reads


def test_format_numbers():
    assert format_numbers([7, 2, 3, 4, 23], 2) == "02-04, 07, 23"
    assert format_numbers([170], 4) == "0170"


def test_parsing_vocab_samples_once_but_keeps_every_bracket_symbol(tmp_path):
    from t2t_lite.data.vocab import reservoir_sample, train_sentencepiece
    from t2t_lite.parsing.vocab import PTB_LABELS, SPACE, train_parsing_vocab
    texts = ["(S (NP XX XX )NP (VP XX )VP )S", "the dog barks", "a cat sleeps now"] * 40
    texts.append("(S (ZZRARE XX )ZZRARE )S")   # a label only the last text holds
    vocab = train_parsing_vocab(iter(texts), tmp_path / "p.spm.model", 400, max_sentences=20)
    pieces = vocab.pieces()
    for symbol in ("(ZZRARE", ")ZZRARE", "(WHPP", ")NP", "XX"):
        assert SPACE + symbol in pieces                      # whole pieces, rare label too
    assert "(ZZRARE" not in "".join(reservoir_sample(iter(texts), 20))  # not in the sample
    assert vocab.decode(vocab.encode("(S (ZZRARE XX )ZZRARE )S")) == "(S (ZZRARE XX )ZZRARE )S"
    # = train_sentencepiece on the one reservoir sample, with those symbols
    symbols = sorted({"XX", "(S", ")S", "(NP", ")NP", "(VP", ")VP", "(ZZRARE", ")ZZRARE"}
                     | {side + label for label in PTB_LABELS for side in "()"})
    plain = train_sentencepiece(list(reservoir_sample(iter(texts), 20)),
                                tmp_path / "q.spm.model", 400, max_sentences=0,
                                user_defined_symbols=[SPACE + s for s in symbols])
    assert plain.pieces() == pieces
    with pytest.raises(RawDataError, match="no training text"):
        train_parsing_vocab(iter([]), tmp_path / "e.spm.model", 200)
