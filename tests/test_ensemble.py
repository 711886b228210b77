"""Decoding with an ensemble (``t2t_lite.decoding.ensemble``, ``t2t-lite-decoder
--checkpoint_path=A,B`` and ``--ensemble_dirs=R1,R2``): the ensemble's log-probabilities
against the mean computed in numpy from the members' own forward passes, the searches and
the scorer over it, and the decoder's flags and errors."""
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.commands import decoder
from t2t_lite.data.vocab import EOS_ID
from t2t_lite.decoding.beam_search import beam_search
from t2t_lite.decoding.config import parse_decode_hparams
from t2t_lite.decoding.ensemble import Ensemble
from t2t_lite.decoding.plan import DecodingPlan
from t2t_lite.decoding.scoring import Scorer
from t2t_lite.decoding.step import step_function
from t2t_lite.decoding.translator import Translator
from t2t_lite.runs.loading import load_trained_model

from run_dir_helpers import copy_run_dir, make_run_dir, tiny_run_dir

SOURCES = ["twenty-one", "three hundred and five", "seven thousand and eleven", "nine"]
TARGETS = ["einundzwanzig", "dreihundertfünf", "siebentausendelf", "neun und neun"]
# A second run of other hparams (two layers, four heads, another seed), same vocabulary.
OTHER_OVERRIDES = "num_hidden_layers=2,hidden_size=32,filter_size=48,num_heads=4,max_length=24"


@pytest.fixture(scope="module")
def other_run(tmp_path_factory):
    return make_run_dir(tmp_path_factory.mktemp("ensemble") / "other", OTHER_OVERRIDES,
                        seed=2, checkpoints=1)


@pytest.fixture(scope="module")
def members(other_run):
    _, _, first, vocabulary = load_trained_model(tiny_run_dir())
    _, _, second, _ = load_trained_model(other_run)
    return first, second, vocabulary


def padded(rows):
    batch = np.zeros([len(rows), max(len(row) for row in rows)], np.int32)
    for index, row in enumerate(rows):
        batch[index, :len(row)] = row
    return batch


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    logits = logits - logits.max(axis=-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))


def hand_log_probs(models, source, target):
    """float64 [t, V]: the renormalised mean of the members' log-probabilities at each
    target position, from each member's own unbatched teacher-forced pass."""
    features = {"inputs": tf.constant([source]), "targets": tf.constant([target])}
    mean = np.mean([log_softmax(model(features, training=False).numpy()[0])
                    for model in models], axis=0)
    return log_softmax(mean)


def encoded_pairs(vocabulary):
    sources = [list(ids) + [EOS_ID] for ids in vocabulary.encode_batch(SOURCES)]
    targets = [list(ids) + [EOS_ID] for ids in vocabulary.encode_batch(TARGETS)]
    return sources, targets


def test_an_ensemble_of_a_model_with_itself_is_the_model(members):
    model, _, vocabulary = members
    twice = Ensemble([model, model])
    outputs = [Translator(decoded, vocabulary, beam_size=3, extra_length=4,
                          return_beams=True).translate_nbest(SOURCES)
               for decoded in (model, twice)]
    assert outputs[0] == outputs[1]      # N-best texts and float scores, bit for bit
    assert len(outputs[0][0]) == 3
    sources, targets = encoded_pairs(vocabulary)
    assert (Scorer(model, vocabulary).score_encoded(sources, targets)
            == Scorer(twice, vocabulary).score_encoded(sources, targets))


def test_step_log_probs_are_the_renormalised_mean_of_the_members(members):
    first, second, vocabulary = members
    ensemble = Ensemble([first, second])
    assert ensemble.hparams.max_length == 24 and ensemble.vocab_size == vocabulary.vocab_size
    sources, targets = encoded_pairs(vocabulary)
    inputs, outputs = padded(sources), padded(targets)
    plan = DecodingPlan(beam_size=1, growing_cache=True)
    ids, states, sentence_states = ensemble.decoding_state(tf.constant(inputs), 0, plan)
    assert len(states) == len(sentence_states) == 2
    steps = []
    for step in range(outputs.shape[1]):
        logits, states = ensemble.decode_step(ids, tf.constant(step), states, sentence_states,
                                              plan)
        steps.append(tf.nn.log_softmax(logits).numpy())
        ids = tf.constant(outputs[:, step])
    for row, (source, target) in enumerate(zip(sources, targets)):
        expected = hand_log_probs([first, second], source, target)
        got = np.stack([steps[position][row] for position in range(len(target))])
        np.testing.assert_allclose(got, expected, atol=2e-5)
        # The members disagree, so the mean is neither member's distribution.
        for member in (first, second):
            assert np.abs(hand_log_probs([member], source, target) - expected).max() > 1e-2


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_cached_greedy_decoding_is_the_argmax_of_the_uncached_mean(members, jit_compile):
    first, second, vocabulary = members
    translator = Translator(Ensemble([first, second]), vocabulary, beam_size=1, alpha=0.0,
                            extra_length=3, jit_compile=jit_compile)
    encoded, _ = translator.encode(SOURCES[:3])
    results = translator.translate_encoded(encoded)
    for source, beams in zip(encoded, results):
        output = []
        decode_length = translator.decode_length_of(source)
        while not output or output[-1] != EOS_ID:
            if len(output) == decode_length - 1:
                output.append(EOS_ID)      # the search's last position allows only EOS
                break
            # Each step from a fresh teacher-forced pass over the output so far.
            log_probs = hand_log_probs([first, second], source, output + [0])
            output.append(int(np.argmax(log_probs[-1])))
        expected = vocabulary.detokenize(tf.constant([output[:-1]])).numpy()[0].decode()
        assert beams[0][0] == expected


def test_scores_sum_the_mean_and_beam_search_scores_its_best_the_same(members):
    first, second, vocabulary = members
    ensemble = Ensemble([first, second])
    sources, targets = encoded_pairs(vocabulary)
    scores = Scorer(ensemble, vocabulary, alpha=0.0).score_encoded(sources, targets)
    for (log_prob, normalised), source, target in zip(scores, sources, targets):
        expected = hand_log_probs([first, second], source, target)
        assert log_prob == pytest.approx(expected[np.arange(len(target)), target].sum(),
                                         abs=1e-4)
        assert normalised == log_prob
    plan = DecodingPlan.choose(4, jit_compile=False, quantization="none")
    inputs = tf.constant(padded(sources))
    ids, beam_scores = tf.function(lambda: beam_search(
        step_function(ensemble, plan), ensemble.decoding_state(inputs, 0, plan), plan,
        decode_length=[len(source) + 4 for source in sources], alpha=0.0),
        autograph=False)()
    best = [row[:row.index(EOS_ID) + 1] for row in ids.numpy()[:, 0].tolist()]
    rescored = Scorer(ensemble, vocabulary, alpha=0.0).score_encoded(sources, best)
    np.testing.assert_allclose([s[0] for s in rescored], beam_scores.numpy()[:, 0],
                               rtol=1e-4, atol=1e-4)


def test_sampling_and_prefixes_of_a_self_ensemble_are_the_models(members):
    model, _, vocabulary = members
    hparams = parse_decode_hparams("sampling_method=random,num_samples=3,seed=7,"
                                   "extra_length=4")
    outputs = [Translator.from_decode_hparams(decoded, vocabulary, hparams)
               .translate_nbest(SOURCES) for decoded in (model, Ensemble([model, model]))]
    assert outputs[0] == outputs[1] and len(outputs[0][0]) == 3
    prefixes = [list(ids) for ids in vocabulary.encode_batch(["ein", "", "sieben", "neun"])]
    prefixed = []
    for decoded in (model, Ensemble([model, model])):
        translator = Translator(decoded, vocabulary, beam_size=2, extra_length=4)
        prefixed.append(translator.translate_encoded(translator.encode(SOURCES)[0],
                                                     prefixes=prefixes))
    assert prefixed[0] == prefixed[1]
    assert prefixed[0][0][0][0].startswith("ein")


@pytest.mark.slow
def test_int8_members_make_an_int8_ensemble(other_run):
    from t2t_lite.layers.quantization import quantization_of, quantize_model
    _, _, model, vocabulary = load_trained_model(other_run)
    quantize_model(model)
    ensemble = Ensemble([model, model])
    assert quantization_of(ensemble) == "int8"
    outputs = [Translator(decoded, vocabulary, beam_size=2, extra_length=3)
               .translate_nbest(SOURCES) for decoded in (model, ensemble)]
    assert outputs[0] == outputs[1]


# The command line ----------------------------------------------------------------------
def run_decoder(capsys, tmp_path, *flags, lines=("twenty-one", "", "nine")):
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n")
    target = tmp_path / "output.txt"
    status = decoder.main(["--decode_from_file", str(source), "--decode_to_file",
                           str(target), *flags])
    output = target.read_text().split("\n")[:-1] if target.exists() else None
    return status, output, capsys.readouterr().err


def test_decoder_checkpoint_list_and_ensemble_dirs(capsys, tmp_path, other_run):
    run = tiny_run_dir()
    status, output, err = run_decoder(
        capsys, tmp_path, f"--output_dir={run}",
        f"--checkpoint_path={run}/ckpt-1,{run}/ckpt-2", "--decode_hparams=extra_length=3",
        "--quantize=int8")
    assert status == 0, err
    assert len(output) == 3 and output[1] == "" and output[0] and output[2]
    assert f"ensemble of 2: {run}/ckpt-1, {run}/ckpt-2" in err
    assert "int8: matmul weights quantized" in err and "(every member)" in err
    status, output, err = run_decoder(
        capsys, tmp_path, f"--ensemble_dirs={run},{other_run}",
        "--decode_hparams=beam_size=1,extra_length=3")
    assert status == 0, err
    assert len(output) == 3 and output[1] == "" and output[0] and output[2]
    scores = tmp_path / "targets.txt"
    scores.write_text("einundzwanzig\n\nneun\n")
    status, output, err = run_decoder(capsys, tmp_path, f"--ensemble_dirs={run},{other_run}",
                                      f"--score_target_file={scores}")
    assert status == 0, err
    assert len(output) == 3 and all(len(line.split("\t")) == 2 for line in output)


def one_error_line(err):
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_members_with_different_vocabularies_are_one_error(capsys, tmp_path):
    other = copy_run_dir(tmp_path / "other")
    vocab = next(path for path in other.iterdir() if "vocab" in path.name)
    vocab.write_bytes(vocab.read_bytes() + b"extra\n")
    run = tiny_run_dir()
    status, output, err = run_decoder(capsys, tmp_path, f"--ensemble_dirs={run},{other}")
    assert status == 2 and output is None
    line = one_error_line(err)
    assert str(run) in line and str(other) in line and "vocabulary" in line
    assert "devices:" not in err          # refused before TensorFlow started
    assert not list(tmp_path.glob("*output*"))


@pytest.mark.parametrize("flags,message", [
    (["--checkpoint_path={run}/ckpt-1,{run}/ckpt-9"], "ckpt-9: no checkpoint there"),
    (["--checkpoint_path={run}/ckpt-1,"], "has an empty item"),
    (["--ensemble_dirs={run},{run}/missing"], "missing/run_config.json not found"),
    (["--ensemble_dirs={run},{run}", "--checkpoint_path={run}/ckpt-1"],
     "--checkpoint_path and --ensemble_dirs both given"),
    (["--ensemble_dirs={run},{run}", "--output_dir={run}"],
     "--output_dir and --ensemble_dirs both given"),
    (["--checkpoint_path={run}/ckpt-1,{run}/ckpt-2", "--attention_dir={tmp}/att"],
     "--attention_dir draws one model's attention"),
])
def test_ensemble_flag_errors_are_one_line(capsys, tmp_path, flags, message):
    run = tiny_run_dir()
    flags = [flag.format(run=run, tmp=tmp_path) for flag in flags]
    if not any(flag.startswith("--ensemble_dirs") for flag in flags):
        flags.append(f"--output_dir={run}")
    status, output, err = run_decoder(capsys, tmp_path, *flags)
    assert status == 2 and output is None
    assert message in one_error_line(err)
    assert "devices:" not in err
