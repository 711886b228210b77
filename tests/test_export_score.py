"""The SavedModel's ``score`` signature and sampling exports (``t2t_lite.runs.export``):
``score`` gives ``t2t-lite-decoder --score_file``'s numbers (float32 and int8), sampling
exports take a per-row ``seed``, and both load in a fresh process with only tensorflow and
tensorflow_text. One export of each kind is shared by the module's tests."""
import functools
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.commands import decoder, exporter
from t2t_lite.decoding.scoring import Scorer, format_score
from t2t_lite.runs.loading import load_trained_model

from run_dir_helpers import tiny_run_dir
from test_exporter import DECODE_HPARAMS

# max_input_length=8 (DECODE_HPARAMS) cuts the third source; blank source and target are
# scored as EOS alone, as the decoder scores them.
SOURCES = ["twenty-one", "three hundred and five",
           "ninety-nine thousand, nine hundred and ninety-nine", "", "nine", "sieben"]
TARGETS = ["einundzwanzig", "dreihundertfünf", "neunundneunzigtausendneunhundert", "null",
           "", "neun und neun"]
SAMPLE_HPARAMS = "sampling_method=random,num_samples=3,seed=7,extra_length=3,max_input_length=8"
SAMPLED = ["twenty-one", "three hundred", "", "nine thousand and eleven", "five", "forty"]

FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
search_dir, sampling_dir = sys.argv[1:3]
request = json.loads(sys.stdin.read())
score = tf.saved_model.load(search_dir).signatures["score"]
scored = score(sources=tf.constant(request["sources"]), targets=tf.constant(request["targets"]))
sample = tf.saved_model.load(sampling_dir).signatures["serving_default"]
sampled = sample(sentences=tf.constant(request["sampled"]),
                 seed=tf.constant(request["seeds"], tf.int64))
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "t2t_lite")
print(json.dumps({"log_probs": scored["log_probs"].numpy().tolist(),
                  "scores": scored["scores"].numpy().tolist(),
                  "samples": [[t.decode("utf-8") for t in row]
                              for row in sampled["beam_translations"].numpy()],
                  "modules": loaded}))
"""


def export(tmp_path_factory, name, *flags):
    export_dir = tmp_path_factory.mktemp(name) / "export"
    assert exporter.main(["--output_dir", str(tiny_run_dir()), "--export_dir",
                          str(export_dir), *flags]) == 0
    return export_dir


@pytest.fixture(scope="module")
def search_export(tmp_path_factory):
    return export(tmp_path_factory, "search", "--decode_hparams", DECODE_HPARAMS)


@pytest.fixture(scope="module")
def sampling_export(tmp_path_factory):
    return export(tmp_path_factory, "sampling", "--decode_hparams", SAMPLE_HPARAMS)


@pytest.fixture(scope="module")
def trained_run():
    _, _, model, vocabulary = load_trained_model(tiny_run_dir())
    return model, vocabulary


@functools.lru_cache(maxsize=None)
def load(export_dir: str):
    """The loaded SavedModel, once per export (loading takes a second)."""
    return tf.saved_model.load(export_dir)


def export_scores(export_dir, sources=SOURCES, targets=TARGETS) -> np.ndarray:
    score = load(str(export_dir)).signatures["score"]
    out = score(sources=tf.constant(sources, tf.string), targets=tf.constant(targets, tf.string))
    return np.stack([out["log_probs"].numpy(), out["scores"].numpy()], axis=1)   # [n, 2]


def decoder_scores(capsys, tmp_path, *flags):
    """``t2t-lite-decoder --score_file`` of SOURCES/TARGETS: its output lines."""
    pairs, out = tmp_path / "pairs.tsv", tmp_path / "scores.txt"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(SOURCES, TARGETS)), encoding="utf-8")
    capsys.readouterr()
    status = decoder.main(["--output_dir", str(tiny_run_dir()), "--score_file", str(pairs),
                           "--decode_to_file", str(out), "--decode_hparams",
                           "alpha=0.6,max_input_length=8", *flags])
    assert status == 0, capsys.readouterr().err
    return out.read_text(encoding="utf-8").split("\n")[:-1]


def test_score_signature_is_the_scorers_and_the_decoders(search_export, trained_run, capsys,
                                                         tmp_path):
    model, vocabulary = trained_run
    served = export_scores(search_export)
    wanted = Scorer(model, vocabulary, alpha=0.6, max_input_length=8).score(SOURCES, TARGETS)
    np.testing.assert_allclose(served, np.array(wanted), rtol=0, atol=1e-5)
    # The decoder's lines, as it prints them.
    assert [format_score(tuple(row)) for row in served] == decoder_scores(capsys, tmp_path)
    # One pair alone scores as in the batch; another target scores otherwise.
    np.testing.assert_allclose(export_scores(search_export, SOURCES[:1], TARGETS[:1]),
                               served[:1], rtol=0, atol=1e-5)
    other = export_scores(search_export, SOURCES, TARGETS[1:] + TARGETS[:1])
    assert not np.allclose(other[:, 0], served[:, 0], atol=1e-2)
    # Normalised = log P / GNMT penalty over the target's tokens, EOS included.
    lengths = [len(ids) + 1 for ids in vocabulary.encode_batch(TARGETS)]
    np.testing.assert_allclose(served[:, 1], served[:, 0] / ((5 + np.array(lengths)) / 6) ** 0.6,
                               rtol=1e-6)


@pytest.mark.parametrize("sources,targets,message", [
    ([], [], "score: the batch is empty"),
    (["one", "two"], ["eins"], r"score: got 2 sources but 1 targets; give exactly one "
                               r"target per source"),
    (["one"], ["eins", "zwei"], r"score: got 1 sources but 2 targets")])
def test_score_refuses_an_empty_or_misaligned_batch(search_export, sources, targets, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        export_scores(search_export, sources, targets)


def test_score_refuses_a_target_longer_than_learned_positions(tmp_path):
    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.runs.export import TranslationModule

    from run_dir_helpers import OVERRIDES, make_run_dir
    run = make_run_dir(tmp_path / "run", OVERRIDES + ",pos=emb", checkpoints=1)
    _, problem, model, vocabulary = load_trained_model(run)
    module = TranslationModule(model, vocabulary,
                               parse_decode_hparams("", problem.decode_defaults))
    fits = module.score(tf.constant(["neun"]), tf.constant(["neun"]))
    assert fits["log_probs"].shape == [1]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"score: a target has \d+ tokens \(EOS included\); learned "
                             r"positions exist for at most 24; shorten it"):
        module.score(tf.constant(["neun"]), tf.constant(["neun " * 30]))


def test_a_search_exports_serving_default_keeps_its_signature(search_export):
    serve = load(str(search_export)).signatures["serving_default"]
    assert list(serve.structured_input_signature[1]) == ["sentences"]
    assert sorted(serve.structured_outputs) == ["scores", "translations"]
    info = json.loads((search_export / "t2t_lite_export.json").read_text())
    assert info["inputs"] == {"sentences": "tf.string [n]"}
    assert info["score"]["outputs"] == ["log_probs", "scores"]


@pytest.mark.slow
def test_an_int8_exports_score_agrees_with_the_int8_decoder(tmp_path_factory, capsys,
                                                            tmp_path):
    """Scoring is one teacher-forced pass, which never uses the self-attention cache (the
    one part whose dtype an int8 export and the int8 decoder may choose differently): the
    scores agree to 1e-5 (the decoder prints 6 decimals), and stay near float32's."""
    int8_export = export(tmp_path_factory, "int8", "--decode_hparams", DECODE_HPARAMS,
                         "--quantize=int8")
    served = export_scores(int8_export)
    decoded = np.array([[float(x) for x in line.split("\t")]
                        for line in decoder_scores(capsys, tmp_path, "--quantize=int8")])
    np.testing.assert_allclose(served, decoded, rtol=0, atol=1e-5)
    float32 = np.array([[float(x) for x in line.split("\t")]
                        for line in decoder_scores(capsys, tmp_path)])
    assert not np.array_equal(served, float32)   # int8 really ran
    np.testing.assert_allclose(served, float32, rtol=0.05)


def sample(export_dir, sentences, seed=None) -> dict:
    """``serving_default`` of a sampling export; ``seed`` None: the input left empty."""
    serve = load(str(export_dir)).signatures["serving_default"]
    seeds = tf.constant([] if seed is None else seed, tf.int64)
    out = serve(sentences=tf.constant(sentences, tf.string), seed=seeds)
    return {name: value.numpy().tolist() for name, value in out.items()}


def test_a_sampling_export_is_reproducible_per_seed(sampling_export):
    seeds = [11, 12, 13, 14, 15, 16]
    first = sample(sampling_export, SAMPLED, seeds)
    assert first == sample(sampling_export, SAMPLED, seeds)           # every call the same
    assert np.array(first["beam_translations"]).shape == (len(SAMPLED), 3)   # num_samples
    assert first["translations"] == [row[0] for row in first["beam_translations"]]
    assert first["beam_translations"][2] == [b""] * 3 and first["beam_scores"][2] == [0.0] * 3
    other = sample(sampling_export, SAMPLED, [seed + 100 for seed in seeds])
    assert other["beam_translations"] != first["beam_translations"]
    differing = [i for i in range(len(SAMPLED))
                 if other["beam_translations"][i] != first["beam_translations"][i]]
    assert len(differing) >= 3, differing
    # A row's samples are its sentence's and seed's, wherever it stands in the call.
    alone = sample(sampling_export, SAMPLED[3:4], seeds[3:4])
    assert alone["beam_translations"][0] == first["beam_translations"][3]
    swapped = sample(sampling_export, SAMPLED[::-1], seeds[::-1])
    assert swapped["beam_translations"][::-1] == first["beam_translations"]


def test_a_sampling_export_without_seeds_draws_the_decoders_samples(sampling_export, capsys,
                                                                    tmp_path):
    """No seeds: the recorded seed (7), row i as the decoder's line i, every call alike."""
    served = sample(sampling_export, SAMPLED)
    assert served == sample(sampling_export, SAMPLED)
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(SAMPLED) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_from_file",
                         str(source), "--decode_to_file", str(out), "--decode_hparams",
                         SAMPLE_HPARAMS]) == 0
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    for line, row in zip(lines, served["beam_translations"]):
        wanted = line.split("\t")[::2] if line else [""] * 3
        assert [text.decode("utf-8") for text in row] == wanted


def test_a_sampling_export_with_seed_minus_one_draws_afresh_each_call(tmp_path_factory):
    export_dir = export(tmp_path_factory, "fresh", "--decode_hparams",
                        "sampling_method=random,extra_length=3,max_input_length=8")
    info = json.loads((export_dir / "t2t_lite_export.json").read_text())
    assert "seed=-1" in info["decode_hparams"]
    assert info["inputs"] == {"sentences": "tf.string [n]", "seed": "int64 [n], optional"}
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel.FromString((export_dir / "saved_model.pb").read_bytes())
    signature = proto.meta_graphs[0].signature_def["serving_default"]
    assert sorted(signature.inputs) == ["seed", "sentences"]
    assert list(signature.defaults) == ["seed"]        # recorded as optional: empty
    assert tf.make_ndarray(signature.defaults["seed"]).shape == (0,)
    calls = [sample(export_dir, SAMPLED)["translations"] for _ in range(3)]
    assert calls[0] != calls[1] or calls[1] != calls[2]
    seeded = [sample(export_dir, SAMPLED, [5] * len(SAMPLED))["translations"] for _ in range(2)]
    assert seeded[0] == seeded[1]
    # The loaded module's function takes the seed as optional.
    module = load(str(export_dir))
    assert module.serve(tf.constant(["five"]))["translations"].shape == [1]


@pytest.mark.parametrize("seed,message", [
    ([1, 2], r"serving_default: seed has 2 values for 6 sentences; give one seed per "
             r"sentence"),
    ([-1] * 6, r"serving_default: every seed must be in \[0, 2\*\*32\)"),
    ([2 ** 32] * 6, r"serving_default: every seed must be in \[0, 2\*\*32\)")])
def test_a_sampling_export_refuses_bad_seeds(sampling_export, seed, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        sample(sampling_export, SAMPLED, seed)


@pytest.mark.slow
def test_score_and_samples_are_the_same_in_a_fresh_process(search_export, sampling_export):
    seeds = [3, 1, 4, 1, 5, 9]
    request = {"sources": SOURCES, "targets": TARGETS, "sampled": SAMPLED, "seeds": seeds}
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(search_export),
                             str(sampling_export)], input=json.dumps(request),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    fresh = json.loads(result.stdout.strip().splitlines()[-1])
    assert fresh["modules"] == []
    served = export_scores(search_export)
    assert fresh["log_probs"] == served[:, 0].tolist()
    assert fresh["scores"] == served[:, 1].tolist()
    here = sample(sampling_export, SAMPLED, seeds)["beam_translations"]
    assert fresh["samples"] == [[text.decode("utf-8") for text in row] for row in here]


@pytest.mark.slow
def test_a_parsers_export_scores_as_the_decoder(trained_ptb_parser, tmp_path_factory, capsys,
                                                tmp_path):
    """Parsing: the export's own (linearised) parses and mismatched ones, scored by the
    export and by ``t2t-lite-decoder --score_file``."""
    from trained_parser import PROBLEM
    data, run = trained_ptb_parser.data, trained_ptb_parser.run
    sources = (data / f"{PROBLEM}-test.source.txt").read_text().splitlines()[:4]
    export_dir = tmp_path_factory.mktemp("parser") / "export"
    assert exporter.main([f"--output_dir={run}", f"--export_dir={export_dir}",
                          "--decode_hparams=beam_size=1,extra_length=100"]) == 0
    loaded = tf.saved_model.load(str(export_dir))
    parses = [text.decode("utf-8") for text in loaded.signatures["serving_default"](
        sentences=tf.constant(sources))["translations"].numpy()]
    assert all(parse.split() for parse in parses)
    targets = parses + parses[1:] + parses[:1]
    sources = sources + sources
    out = loaded.signatures["score"](sources=tf.constant(sources), targets=tf.constant(targets))
    served = np.stack([out["log_probs"].numpy(), out["scores"].numpy()], axis=1)
    assert not np.allclose(served[:4, 0], served[4:, 0], atol=1e-2)   # the targets count
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)),
                     encoding="utf-8")
    capsys.readouterr()
    assert decoder.main([f"--output_dir={run}", f"--score_file={pairs}",
                         f"--decode_to_file={tmp_path / 'scores.txt'}"]) == 0
    decoded = np.array([[float(x) for x in line.split("\t")] for line in
                        (tmp_path / "scores.txt").read_text().split("\n")[:-1]])
    np.testing.assert_allclose(served, decoded, rtol=0, atol=1e-5)
