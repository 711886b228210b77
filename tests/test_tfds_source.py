"""WMT problems read from TensorFlow Datasets (``--data_source=tfds``), offline.

``tfds.testing.mock_data(as_dataset_fn=...)`` replaces what the TFDS builder would read
with known examples (real Multi30k lines, plus a few unusable ones), so the tests check
that exactly those examples reach the records, the kept dev/test text and the trained
model, and that the builder asked for is the problem's.
"""
import gzip

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from t2t_lite.commands import datagen as datagen_command
from t2t_lite.commands import decoder as decoder_command
from t2t_lite.commands import trainer as trainer_command
from t2t_lite.data.datagen import DROP_EMPTY, generate_problem_data
from t2t_lite.data.problem import VocabSpec, eval_text
from t2t_lite.data.records import read_examples
from t2t_lite.data.raw import RawDataError
from t2t_lite.errors import UserError
from t2t_lite.problems.translate_multi30k import TranslateEndeMulti30k
from t2t_lite.problems.translate_wmt14 import (TranslateEndeWmt14, TranslateEndeWmtT2t,
                                               TranslateEnfrWmt14)

SPLIT_SIZES = {"train": 300, "validation": 30, "test": 20}


def _lines(path, start, count):
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle][start:start + count]


@pytest.fixture(scope="module")
def tfds_examples():
    """Per TFDS split, the (en, xx) pairs the mocked builder serves: distinct real lines."""
    from conftest import shared_data_dir
    m30k = shared_data_dir("multi30k")
    examples, start = {}, 0
    for split, count in SPLIT_SIZES.items():
        examples[split] = list(zip(_lines(m30k / "train.en.gz", start, count),
                                   _lines(m30k / "train.de.gz", start, count)))
        start += count
    examples["train"][7] = ("", examples["train"][7][1])  # unusable: reported, not kept
    return examples


@pytest.fixture
def mocked_tfds(tfds_examples):
    """Mocks TFDS; yields the list of (builder name, split) pairs that were read."""
    reads = []

    def as_dataset(self, split, *args, **kwargs):
        name = str(split)
        reads.append((f"{self.name}/{self.builder_config.name}", name))
        other = [lang for lang in self.builder_config.language_pair if lang != "en"][0]
        pairs = tfds_examples[name]
        return tf.data.Dataset.from_tensor_slices(
            {"en": [en for en, _ in pairs], other: [xx for _, xx in pairs]})

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        yield reads


def _usable(pairs):
    return [(en, xx) for en, xx in pairs if en.strip() and xx.strip()]


def test_ende_wmt14_records_hold_exactly_the_tfds_examples(tmp_path, mocked_tfds,
                                                          tfds_examples):
    problem = TranslateEndeWmt14(vocab_spec=VocabSpec(size=600))
    data_dir = tmp_path / "data"
    summary = generate_problem_data(problem, data_dir, tmp_path / "unused_raw",
                                    data_source="tfds", workers=1)
    assert sorted(set(mocked_tfds)) == [("wmt14_translate/de-en", "test"),
                                        ("wmt14_translate/de-en", "train"),
                                        ("wmt14_translate/de-en", "validation")]
    assert not (tmp_path / "unused_raw").exists()  # no raw archive was looked for
    assert summary.splits["train"].examples == 299
    assert summary.splits["train"].dropped[DROP_EMPTY].count == 1
    assert summary.splits["train"].dropped[DROP_EMPTY].first == (
        "wmt14_translate/de-en[train] (en) line 8")
    vocab = problem.load_vocab(data_dir)
    train = read_examples(problem.shard_files(data_dir, "train"))
    assert {(vocab.decode(s), vocab.decode(t)) for s, t in train} == set(
        _usable(tfds_examples["train"]))
    for split, tfds_split in (("dev", "validation"), ("test", "test")):
        sources, references = eval_text(problem, data_dir, split)
        assert list(zip(sources, references)) == tfds_examples[tfds_split]


def test_enfr_and_t2t_problems_read_their_own_builders(tmp_path, mocked_tfds, tfds_examples):
    enfr = TranslateEnfrWmt14(vocab_spec=VocabSpec(kind="wordpiece", size=500))
    generate_problem_data(enfr, tmp_path / "fr", tmp_path / "raw", data_source="tfds")
    t2t = TranslateEndeWmtT2t(vocab_spec=VocabSpec(size=600))
    generate_problem_data(t2t, tmp_path / "t2t", tmp_path / "raw", data_source="tfds")
    assert {name for name, _ in mocked_tfds} == {"wmt14_translate/fr-en",
                                                 "wmt_t2t_translate/de-en"}
    assert eval_text(t2t, tmp_path / "t2t", "test")[1] == tuple(
        xx for _, xx in tfds_examples["test"])


def test_tfds_source_errors_name_the_fix(tmp_path, capsys):
    with pytest.raises(UserError, match="has no TFDS builder.*--data_source=raw"):
        generate_problem_data(TranslateEndeMulti30k(), tmp_path / "d", tmp_path / "r",
                              data_source="tfds")
    with pytest.raises(UserError, match="TFDS .*wmt_t2t_translate/de-en.*--data_source=tfds"):
        generate_problem_data(TranslateEndeWmtT2t(), tmp_path / "d", tmp_path / "r")
    assert datagen_command.main(["--problem=translate_ende_wmt14", f"--data_dir={tmp_path}/d",
                                 f"--tfds_data_dir={tmp_path}/t"]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("devices: ")]
    assert err == [f"error: --tfds_data_dir={tmp_path}/t is only read with "
                   f"--data_source=tfds; add that flag or drop this one"]


@pytest.mark.slow
def test_trainer_generates_from_tfds_trains_and_decodes(tmp_path, mocked_tfds, tfds_examples,
                                                        capsys):
    data_dir, run_dir = tmp_path / "data", tmp_path / "run"
    assert trainer_command.main([
        "--generate_data", "--data_source=tfds", "--problem=translate_ende_wmt14",
        "--hparams_set=transformer_tiny", f"--data_dir={data_dir}", f"--output_dir={run_dir}",
        "--train_steps=3", "--local_eval_frequency=0", "--eval_decode_sentences=2",
        "--attention_probes=0", "--hparams=batch_size=2048"]) == 0
    assert "train: 299 examples" in capsys.readouterr().out
    assert ("wmt14_translate/de-en", "train") in mocked_tfds
    sources = [en for en, _ in tfds_examples["test"][:3]]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    assert decoder_command.main([f"--output_dir={run_dir}", f"--decode_from_file={tmp_path}/in.txt",
                                 f"--decode_to_file={tmp_path}/out.txt",
                                 "--decode_hparams=beam_size=2,extra_length=5"]) == 0
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")) == 4


def test_an_empty_tfds_split_names_the_tfds_fix_not_raw_files(tmp_path, tfds_examples):
    def as_dataset(self, split, *args, **kwargs):
        pairs = [] if str(split) == "validation" else tfds_examples[str(split)]
        return tf.data.Dataset.from_tensor_slices(
            {"en": tf.constant([en for en, _ in pairs], tf.string),
             "de": tf.constant([de for _, de in pairs], tf.string)})

    problem = TranslateEndeWmt14(vocab_spec=VocabSpec(size=600))
    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        with pytest.raises(RawDataError) as error:
            generate_problem_data(problem, tmp_path / "data", data_source="tfds", workers=1)
    message = str(error.value)
    assert "split 'dev' of translate_ende_wmt14 has no usable examples" in message
    assert "the TFDS split holds no examples" in message
    assert "wmt14_translate/de-en[validation]" in message
    assert "tfds build wmt14_translate/de-en" in message
    assert "raw files" not in message and "real files" not in message


def test_a_source_the_problem_does_not_declare_is_one_error_before_any_work(tmp_path,
                                                                           capsys):
    assert TranslateEndeWmtT2t.data_sources == ("tfds",)
    assert TranslateEndeWmt14.data_sources == ("raw", "tfds")
    assert TranslateEndeMulti30k.data_sources == ("raw",)
    data_dir = tmp_path / "data"
    for main, flags in ((datagen_command.main, []),
                        (trainer_command.main, ["--generate_data", "--hparams_set=transformer_tiny",
                                                f"--output_dir={tmp_path / 'run'}"])):
        assert main(["--problem=translate_ende_wmt_t2t", f"--data_dir={data_dir}",
                     *flags]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines()
                  if line.startswith("error:")]
        assert errors == ["error: problem translate_ende_wmt_t2t is read from TFDS "
                          "(wmt_t2t_translate/de-en) only, not from raw files; use "
                          "--data_source=tfds"]
        assert not data_dir.exists() and not (tmp_path / "run").exists()
    assert datagen_command.main(["--problem=translate_ende_multi30k", "--data_source=tfds",
                                 f"--data_dir={data_dir}"]) == 2
    assert "error: problem translate_ende_multi30k has no TFDS builder" in capsys.readouterr().err
