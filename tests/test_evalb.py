"""EVALB (COLLINS.prm) bracketing scores: hand-worked cases, gold-vs-gold, and EVALB's
own reports on the reference pairs of ../shared/data/evalb_reference."""
import gzip
import re
import subprocess
from functools import lru_cache

import pytest
from trained_parser import EVAL_SENTENCES, PROBLEM, TRAIN_STEPS

from t2t_lite.parsing import (EvalbError, EvalbResult, Tree, evaluate, evaluate_sentence,
                              linearize, read_gold_trees, read_mrg_files, repair,
                              write_evalb_files)
from t2t_lite.parsing.evalb import (evalb_label, evalb_view, score_sentence, score_sentences,
                                    with_gold_tags)

T = Tree.from_string


@lru_cache(maxsize=1)
def sample_trees(directory):
    return read_mrg_files(sorted(directory.glob("wsj_*.mrg")))


def counts(gold: str, test: str):
    c = evaluate_sentence(T(gold), T(test))
    return c.matched_brackets, c.gold_brackets, c.test_brackets


GOLD = "(S (NP (DT the) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))"


def test_brackets_skip_preterminals_and_punctuation():
    view = evalb_view(T("(TOP " + GOLD + ")"))
    # S spans the five words left once "." is deleted; TOP is not scored
    assert sorted(view.brackets) == [("NP", 0, 2), ("NP", 3, 5), ("S", 0, 5), ("VP", 2, 5)]
    assert view.words == ("the", "dog", "saw", "a", "cat") and view.length == 6


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


def test_only_a_top_root_is_deleted():
    # EVALB (COLLINS.prm) deletes brackets labeled TOP only: an unlabeled root or ROOT
    # is one more bracket (over the whole sentence).
    inner = "(S (NP (NN Rain)) (VP (VBD fell)))"
    assert counts(f"(TOP {inner})", inner) == (3, 3, 3)
    assert counts(inner, f"(TOP {inner})") == (3, 3, 3)
    for wrapped in (f"(ROOT {inner})", f"( {inner})"):
        assert counts(wrapped, inner) == (3, 4, 3)
        assert counts(inner, wrapped) == (3, 3, 4)
        assert counts(wrapped, wrapped) == (4, 4, 4)
    # an internal TOP bracket is deleted too; an internal ROOT is scored
    assert counts(inner, "(S (TOP (XX Rain)) (VP (XX fell)))") == (2, 3, 2)
    assert counts(inner, "(S (ROOT (XX Rain)) (VP (XX fell)))") == (2, 3, 3)


def test_labels_are_cut_at_dash_and_equals_but_not_at_bar():
    assert evalb_label("ADVP|PRT") == "ADVP|PRT"
    assert evalb_label("-LRB-") == ""
    gold = "(S (NP (PRP He)) (VP (VBD gave) (ADVP|PRT (RP up))))"
    assert counts(gold, "(S (NP (XX He)) (VP (XX gave) (ADVP (XX up))))") == (3, 4, 4)
    assert counts(gold, gold) == (4, 4, 4)


def test_own_tags_decide_deletion_and_words_compare_after_it():
    gold = T("(S (NP (NNP John)) (VP (VBD left)) (. .))")
    # one extra or different punctuation word is scored, not rejected
    extra = T("(S (NP (NNP John)) (VP (VBD left)) (. .) (. .))")
    other = T("(S (NP (NNP John)) (VP (VBD left)) (. !))")
    for test in (extra, other):
        result = evaluate([gold], [test], tags="own")
        assert (result.f1, result.error_sentences) == (100.0, 0)
    # dummy tags delete nothing: EVALB rejects the sentence (one word more) ...
    dummy = T("(S (NP (XX John)) (VP (XX left)) (XX .))")
    score = score_sentence(gold, dummy, 7, tags="own")
    assert (score.status, score.message) == (1, "Length unmatch (2|3)")
    with pytest.raises(EvalbError, match="sentence 7: gold has 2 words, test has 3"):
        evaluate_sentence(gold, dummy, 7, tags="own")
    counted = evaluate([gold, gold], [dummy, gold], tags="own", errors="count")
    assert (counted.sentences, counted.error_sentences, counted.f1) == (1, 1, 100.0)
    # ... unless the gold tags are put back on the test words (the default)
    assert evaluate([gold], [dummy]).f1 == 100.0
    assert with_gold_tags(dummy, gold) == T("(S (NP (NNP John)) (VP (VBD left)) (. .))")
    # a test line with no word left, or an empty one (None), is skipped
    only_punct = T("(S (. John) (. left) (. .))")
    assert score_sentence(gold, only_punct, tags="own").status == 2
    assert score_sentence(gold, None).status == 2


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
    with pytest.raises(EvalbError, match="sentence 2: word 2 differs .*Words unmatch"):
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


# EVALB's own reports on the pairs of ../shared/data/evalb_reference ---------------------
EVALB_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+([012])\s+[\d.]+\s+[\d.]+\s+(\d+)\s+(\d+)"
                        r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\s*$")
SUMMARY_FIELDS = {"Number of Error sentence": "error_sentences",
                  "Number of Skip  sentence": "skipped_sentences",
                  "Number of Valid sentence": "sentences",
                  "Bracketing Recall": "recall", "Bracketing Precision": "precision",
                  "Bracketing FMeasure": "f1", "Complete match": "exact_match"}


def read_lines(path):
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def evalb_report(path):
    """EVALB's per-sentence rows (id, len, status, matched, gold, test, crossing, words,
    correct tags) and its two summaries ({field: value} for All and len<=40)."""
    rows, summaries = [], []
    for line in read_lines(path):
        match = EVALB_LINE.match(line)
        if match:
            rows.append(tuple(int(x) for x in match.groups()))
        elif line.startswith("-- "):
            summaries.append({})
        elif summaries and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            if key in SUMMARY_FIELDS:
                summaries[-1][SUMMARY_FIELDS[key]] = float(value)
    return rows, summaries


def project_rows(scores):
    return [(s.number, s.length, s.status, s.counts.matched_brackets, s.counts.gold_brackets,
             s.counts.test_brackets, s.counts.crossing_brackets, s.counts.words,
             s.counts.correct_tags) for s in scores]


def assert_summaries_agree(result, summaries):
    every, len40 = summaries
    for field, value in every.items():
        assert round(getattr(result, field), 2) == value, field
    for field, value in len40.items():
        name = field + "_len40" if hasattr(result, field + "_len40") else None
        if name:
            assert round(getattr(result, name), 2) == value, name


@pytest.fixture
def evalb_reference_dir():
    from conftest import shared_data_dir
    return shared_data_dir("evalb_reference")


def reference_pairs(directory, stem):
    suffix = ".txt.gz" if stem == "fuzz" else ".txt"
    gold = [T(line) for line in read_lines(directory / f"{stem}.gold{suffix}")]
    test = [T(line) for line in read_lines(directory / f"{stem}.test{suffix}")]
    return gold, test


def test_hand_made_cases_match_evalb_exactly(evalb_reference_dir):
    gold, test = reference_pairs(evalb_reference_dir, "cases")
    assert len(gold) == len(test) == 42
    rows, summaries = evalb_report(evalb_reference_dir / "cases.evalb")
    scores = score_sentences(gold, test, tags="own")
    assert project_rows(scores) == rows
    # EVALB's error lines ("19 : Length unmatch (10|9)"), word for word
    expected = read_lines(evalb_reference_dir / "cases.evalb.stderr")
    assert [f"{s.number} : {s.message}" for s in scores if s.status == 1] == expected
    result = evaluate(gold, test, tags="own", errors="count")
    assert (result.error_sentences, result.skipped_sentences, result.sentences) == (6, 2, 34)
    assert_summaries_agree(result, summaries)
    with pytest.raises(EvalbError, match="sentence 19: gold has 10 words, test has 9"):
        evaluate(gold, test, tags="own")


@pytest.mark.slow
def test_edited_sample_trees_match_evalb_exactly(evalb_reference_dir):
    gold, test = reference_pairs(evalb_reference_dir, "fuzz")
    assert len(gold) == len(test) == 3669
    rows, summaries = evalb_report(evalb_reference_dir / "fuzz.evalb.gz")
    scores = score_sentences(gold, test, tags="own")
    assert project_rows(scores) == rows
    result = EvalbResult.from_scores(scores)
    assert_summaries_agree(result, summaries)
    assert (round(result.f1, 2), round(result.f1_len40, 2)) == (94.05, 93.56)
    # the test trees carry real tags: putting the gold ones back changes nothing here
    # except where an edit moved punctuation words, and never the sentence count
    assert evaluate(gold, test, errors="count").sentences == 3669


# EVALB itself (compiled from ../shared/tools/EVALB) on a trained model's outputs ----------
def compile_evalb(directory):
    """EVALB compiled from the shared source into ``directory``: (binary, COLLINS.prm)."""
    import shutil
    from conftest import REQUIRE_SHARED_DATA, SHARED_DATA
    source = SHARED_DATA.parent / "tools" / "EVALB"
    if shutil.which("gcc") is None:
        pytest.skip("gcc is absent: cannot compile EVALB")
    if not (source / "evalb.c").is_file():
        message = f"EVALB's source {source}/evalb.c is absent"
        if REQUIRE_SHARED_DATA:
            pytest.fail(message)
        pytest.skip(message)
    binary = directory / "evalb"
    subprocess.run(["gcc", "-O2", "-w", "-o", str(binary), str(source / "evalb.c")], check=True)
    return binary, source / "COLLINS.prm"


def printed_scores(text):
    """``{name: value}`` from the decoder's ``parse_... = value`` lines."""
    return {name: float(value) for name, value in re.findall(r"(parse_\w+) = ([\d.]+)", text)}


@pytest.mark.slow
def test_evalb_itself_agrees_with_decoder_and_trainer_on_a_trained_model(
        tmp_path, trained_ptb_parser, capsys):
    from t2t_lite.commands import decoder
    from t2t_lite.commands import evalb as evalb_command
    from t2t_lite.parsing.evalb_files import read_gold_trees, read_test_trees
    binary, params = compile_evalb(tmp_path)
    problem, data, run = PROBLEM, trained_ptb_parser.data, trained_ptb_parser.run
    trained = trained_ptb_parser.final_eval
    # the first dev sentences, as the trainer's evaluation decodes them
    gold, sources, parsed = (tmp_path / name for name in ("dev.gold.txt", "dev.txt", "dev.parsed"))
    for name, path in ((f"{problem}-dev.gold.txt", gold), (f"{problem}-dev.source.txt", sources)):
        lines = (data / name).read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(lines[:EVAL_SENTENCES]), encoding="utf-8")
    assert decoder.main([f"--output_dir={run}", f"--decode_from_file={sources}",
                         f"--decode_to_file={parsed}",
                         f"--decode_reference={gold}", "--decode_hparams=beam_size=1"]) == 0
    decoded = printed_scores(capsys.readouterr().out)
    evalb_gold, evalb_test = tmp_path / "dev.evalb.gold", tmp_path / "dev.evalb.test"
    assert evalb_command.main([f"--reference={gold}", f"--parsed={parsed}",
                               f"--write_gold={evalb_gold}", f"--write_test={evalb_test}"]) == 0
    ours = capsys.readouterr().out
    report = tmp_path / "dev.evalb"
    with open(report, "w") as out:
        subprocess.run([str(binary), "-p", str(params), "-e", "1000", str(evalb_gold),
                        str(evalb_test)], stdout=out, check=True)
    rows, (every, len40) = evalb_report(report)
    # EVALB's line for every sentence, and its summary, from the project's scorer
    gold_trees = read_gold_trees(evalb_gold)
    test_trees = read_test_trees(evalb_test)
    assert project_rows(score_sentences(gold_trees, test_trees, tags="own")) == rows
    assert len(rows) == EVAL_SENTENCES and every["error_sentences"] == 0
    assert 0 < every["f1"] < 100
    # the decoder's parse_f1 (gold .gold.txt from datagen) is EVALB's
    assert round(decoded["parse_f1"], 2) == every["f1"]
    assert round(decoded["parse_recall"], 2) == every["recall"]
    assert round(decoded["parse_precision"], 2) == every["precision"]
    assert round(decoded["parse_exact_match"], 2) == every["exact_match"]
    assert f"Bracketing FMeasure       = {every['f1']:6.2f}" in ours
    assert f"Bracketing FMeasure       = {len40['f1']:6.2f}" in ours
    # the trainer's evaluation decoded the same dev sentences greedily
    assert trained["parse_f1"] == pytest.approx(decoded["parse_f1"], rel=1e-3)
    print(f"\nEVALB on {EVAL_SENTENCES} dev parses after {TRAIN_STEPS} steps: "
          f"F1 {every['f1']}, "
          f"decoder {decoded['parse_f1']:.4f}, trainer {trained['parse_f1']}")


def test_evalb_files_put_gold_tags_and_top_roots(tmp_path):
    from t2t_lite.parsing.evalb_files import evalb_gold_tree, read_test_trees
    gold = [T("( (S (NP-SBJ (-NONE- *) (NNP John)) (VP (VBD left)) (. .)) )"),
            T("(ROOT (S (NN Hi)))"), T("(S (NN Bye))")]
    test = [T("(S (NP (XX John)) (VP (XX left) (XX .)))"), None, T("(S (XX Bye))")]
    returned = write_evalb_files(gold, test, tmp_path / "g", tmp_path / "t")
    assert returned == (read_gold_trees(tmp_path / "g"), read_test_trees(tmp_path / "t"))
    assert (tmp_path / "g").read_text().splitlines() == [
        "(TOP (S (NP-SBJ (-NONE- *) (NNP John)) (VP (VBD left)) (. .)))",
        "(TOP (S (NN Hi)))", "(TOP (S (NN Bye)))"]
    assert (tmp_path / "t").read_text().splitlines() == [
        "(TOP (S (NP (NNP John)) (VP (VBD left) (. .))))", "", "(TOP (S (NN Bye)))"]
    assert read_gold_trees(tmp_path / "g") == [evalb_gold_tree(g) for g in gold]
    written = read_test_trees(tmp_path / "t")
    assert written[1] is None
    # scoring the written files as EVALB does = scoring the decoded trees with gold tags
    own = evaluate(read_gold_trees(tmp_path / "g"), written, tags="own")
    assert own == evaluate([evalb_gold_tree(g) for g in gold], test)
    assert (own.sentences, own.skipped_sentences, own.f1) == (2, 1, 100.0)


def test_evalb_command_scores_and_writes_files(tmp_path, capsys):
    from t2t_lite.commands import evalb as evalb_command
    from t2t_lite.parsing.evalb_files import read_test_trees
    gold = tmp_path / "gold.mrg"
    gold.write_text("( (S (NP-SBJ (NNP John))\n    (VP (VBD left)) (. .)) )\n"
                    "( (S (NP (NN Rain)) (VP (VBD fell)) (. .)) )\n")
    parsed = tmp_path / "parsed.txt"
    parsed.write_text("(S (NP (XX John)) (VP (XX left) (XX .)))\n"
                      "(S (NP (XX Rain)) (VP (XX fell)) (XX !) (XX .))\n")
    args = [f"--reference={gold}", f"--parsed={parsed}"]
    assert evalb_command.main(args + [f"--write_gold={tmp_path / 'g'}",
                                      f"--write_test={tmp_path / 't'}"]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == "2 : Length unmatch (2|4)"  # the gold tags do not fit line 2
    assert out.splitlines()[:9] == [
        "-- All --", "Number of sentence        =      2",
        "Number of Error sentence  =      1", "Number of Skip  sentence  =      0",
        "Number of Valid sentence  =      1", "Bracketing Recall         = 100.00",
        "Bracketing Precision      = 100.00", "Bracketing FMeasure       = 100.00",
        "Complete match            = 100.00"]
    assert out.splitlines()[10:12] == ["-- len<=40 --", "Number of sentence        =      2"]
    # the command prints EvalbResult.summary() of the files it wrote, scored as EVALB does
    written = score_sentences(read_gold_trees(tmp_path / "g"),
                              read_test_trees(tmp_path / "t"), tags="own")
    assert out.rstrip("\n") == EvalbResult.from_scores(written).summary()
    assert (tmp_path / "t").read_text().splitlines()[0] == \
        "(TOP (S (NP (NNP John)) (VP (VBD left) (. .))))"
    # misaligned files and half the file flags are one-line errors
    parsed.write_text("(S (XX John))\n")
    assert evalb_command.main(args) == 2
    assert "holds 2 trees but --parsed" in capsys.readouterr().err
    assert evalb_command.main(args + [f"--write_gold={tmp_path / 'g'}"]) == 2
    assert "go together" in capsys.readouterr().err
