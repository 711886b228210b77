"""Scoring given targets (``t2t_lite.decoding.scoring`` and ``t2t-lite-decoder
--score_file / --score_target_file``): teacher-forced log-probabilities, beam search's own
scores, the output format and the errors."""
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.commands import decoder
from t2t_lite.data.vocab import EOS_ID
from t2t_lite.decoding.scoring import Scorer, split_pairs
from t2t_lite.decoding.translator import Translator
from t2t_lite.errors import UserError
from t2t_lite.runs.loading import load_trained_model

from run_dir_helpers import tiny_run_dir

SOURCES = ["twenty-one", "three hundred and five", "", "seven thousand and eleven", "nine"]
TARGETS = ["einundzwanzig", "dreihundertfünf", "null", "", "neun und neun"]


@pytest.fixture(scope="module")
def trained_run():
    _, _, model, vocabulary = load_trained_model(tiny_run_dir())
    return model, vocabulary


def independent_log_prob(model, source_ids, target_ids):
    """Sum of the target's token log-probabilities from one unbatched forward pass,
    softmax in float64."""
    logits = model({"inputs": tf.constant([source_ids]), "targets": tf.constant([target_ids])},
                   training=False).numpy()[0].astype(np.float64)
    logits -= logits.max(axis=-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return float(sum(log_probs[i, token] for i, token in enumerate(target_ids)))


def test_split_pairs_names_the_file_and_line():
    assert split_pairs(["a\tb", "\tc", "d\t"], "f.tsv") == (["a", "", "d"], ["b", "c", ""])
    for bad in (["a\tb", "no tab"], ["a\tb", "two\ttabs\there"]):
        with pytest.raises(UserError, match="f.tsv: line 2: expected 'source<TAB>target'"):
            split_pairs(bad, "f.tsv")


def test_scores_are_the_models_teacher_forced_log_probabilities(trained_run):
    model, vocabulary = trained_run
    scorer = Scorer(model, vocabulary, alpha=0.6, batch_size=40)   # several batches
    scores = scorer.score(SOURCES, TARGETS)
    sources, targets = scorer.encode(SOURCES, TARGETS)
    assert len(scores) == len(SOURCES)
    for (log_prob, normalised), source_ids, target_ids in zip(scores, sources, targets):
        assert target_ids[-1] == EOS_ID
        wanted = independent_log_prob(model, source_ids, target_ids)
        np.testing.assert_allclose(log_prob, wanted, rtol=1e-5, atol=1e-5)
        penalty = ((5 + len(target_ids)) / 6) ** 0.6
        np.testing.assert_allclose(normalised, wanted / penalty, rtol=1e-5, atol=1e-5)
    # The order of the pairs and the batching change nothing.
    again = Scorer(model, vocabulary, alpha=0.6).score(SOURCES[::-1], TARGETS[::-1])[::-1]
    np.testing.assert_allclose(np.array(again), np.array(scores), rtol=1e-5, atol=1e-5)
    # A wrong target scores differently (the check can fail).
    other = scorer.score(SOURCES, TARGETS[1:] + TARGETS[:1])
    assert not np.allclose(np.array(other)[:, 0], np.array(scores)[:, 0], atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("beam_size", [1, 4])
def test_beam_searchs_best_hypothesis_scores_the_same_with_alpha_zero(trained_run, beam_size):
    model, vocabulary = trained_run
    translator = Translator(model, vocabulary, beam_size=beam_size, alpha=0.0, extra_length=5)
    encoded, _ = translator.encode(SOURCES)
    width = max(len(ids) for ids in encoded)
    batch = np.zeros([len(encoded), width], np.int32)
    for row, ids in enumerate(encoded):
        batch[row, :len(ids)] = ids
    ids, beam_scores = translator.translate_ids(tf.constant(batch))
    best = []
    for row in ids.numpy()[:, 0]:
        row = row.tolist()
        best.append(row[:row.index(EOS_ID) + 1])
    scores = Scorer(model, vocabulary, alpha=0.0).score_encoded(encoded, best)
    np.testing.assert_allclose([s[0] for s in scores], beam_scores.numpy()[:, 0], rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose([s[1] for s in scores], [s[0] for s in scores])


def run_decoder(capsys, tmp_path, *flags):
    target = tmp_path / "scores.txt"
    status = decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_to_file",
                           str(target), *flags])
    captured = capsys.readouterr()
    lines = target.read_text().split("\n")[:-1] if target.exists() else None
    return status, lines, captured.err


@pytest.mark.slow
def test_decoder_score_file_and_score_target_file(capsys, tmp_path, trained_run):
    model, vocabulary = trained_run
    pairs = tmp_path / "pairs.tsv"
    # A byte-order mark and CRLF line ends are read as without.
    pairs.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(
        f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)).encode("utf-8") + b"\r\n")
    status, lines, err = run_decoder(capsys, tmp_path, "--score_file", str(pairs),
                                     "--decode_hparams", "alpha=0.3")
    assert status == 0, err
    wanted = Scorer(model, vocabulary, alpha=0.3).score(SOURCES, TARGETS)
    assert len(lines) == len(SOURCES)
    got = np.array([[float(x) for x in line.split("\t")] for line in lines])
    np.testing.assert_allclose(got, np.array(wanted), atol=2e-6)

    source, targets = tmp_path / "src.txt", tmp_path / "tgt.txt"
    source.write_text("\n".join(SOURCES) + "\n")
    targets.write_text("\n".join(TARGETS) + "\n")
    status, second, err = run_decoder(capsys, tmp_path, "--decode_from_file", str(source),
                                      "--score_target_file", str(targets),
                                      "--decode_hparams", "alpha=0.3")
    assert status == 0, err
    assert second == lines


@pytest.mark.parametrize("flags,message", [
    (["--score_file", "PAIRS", "--score_target_file", "PAIRS"], "both given"),
    (["--score_file", "PAIRS", "--decode_from_file", "PAIRS"], "drop --decode_from_file"),
    (["--score_file", "PAIRS", "--decode_reference", "PAIRS"], "--decode_reference needs"),
    (["--score_file", "PAIRS", "--decode_hparams", "sampling_method=random"],
     "sampling_method=random"),
    (["--score_file", "MISSING"], "--score_file"),
    (["--score_file", "BAD"], "bad.tsv: line 2: expected 'source<TAB>target'"),
    (["--decode_from_file", "PAIRS", "--score_target_file", "SHORT"], "has 1 lines but"),
])
def test_scoring_user_errors_are_one_line(capsys, tmp_path, flags, message):
    (tmp_path / "pairs.tsv").write_text("a\tb\nc\td\n")
    (tmp_path / "bad.tsv").write_text("a\tb\nno tab here\n")
    (tmp_path / "short.txt").write_text("x\n")
    names = {"PAIRS": "pairs.tsv", "BAD": "bad.tsv", "SHORT": "short.txt",
             "MISSING": "missing.tsv"}
    flags = [str(tmp_path / names[f]) if f in names else f for f in flags]
    status, lines, err = run_decoder(capsys, tmp_path, *flags)
    assert status != 0 and lines is None
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], err
