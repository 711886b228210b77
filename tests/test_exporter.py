"""t2t-lite-exporter: a fresh process that imports only tensorflow and tensorflow_text
loads the SavedModel and translates exactly as t2t-lite-decoder does."""
import json
import os
import subprocess
import sys

import pytest

from t2t_lite.commands import decoder, exporter

from run_dir_helpers import tiny_run_dir

DECODE_HPARAMS = "beam_size=2,alpha=0.6,extra_length=3,max_input_length=8"
SENTENCES = ["twenty-one", "", "ninety-nine thousand, nine hundred and ninety-nine",
             "fünf und zwanzig", "three hundred", "   "]

FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
sentences = json.loads(sys.stdin.read())
out = serve(sentences=tf.constant(sentences, tf.string))
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "t2t_lite")
print(json.dumps({"translations": [t.decode("utf-8") for t in out["translations"].numpy()],
                  "scores": out["scores"].numpy().tolist(), "modules": loaded}))
"""


def serve_in_fresh_process(export_dir, **environment) -> dict:
    """SENTENCES through the SavedModel's ``serving_default`` in a new Python process that
    imports only tensorflow and tensorflow_text (with ``environment`` added to this
    process's): ``{"translations", "scores", "modules"}``, after checking that no t2t_lite
    module was loaded."""
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(export_dir)],
                            input=json.dumps(SENTENCES), capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, **environment))
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["modules"] == []
    return served


@pytest.mark.slow
def test_export_round_trip_in_a_fresh_process(capsys, tmp_path):
    export_dir = tmp_path / "export"
    assert exporter.main(["--output_dir", str(tiny_run_dir()), "--export_dir",
                          str(export_dir), "--decode_hparams", DECODE_HPARAMS]) == 0
    info = json.loads((export_dir / "t2t_lite_export.json").read_text())
    assert info["problem"] == "translate_ende_numbers" and "beam_size=2" in info["decode_hparams"]

    served = serve_in_fresh_process(export_dir)

    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    target = tmp_path / "out.txt"
    capsys.readouterr()
    assert decoder.main(["--output_dir", str(tiny_run_dir()), "--decode_from_file",
                         str(source), "--decode_to_file", str(target), "--decode_hparams",
                         DECODE_HPARAMS]) == 0
    decoded = target.read_text(encoding="utf-8").split("\n")[:-1]
    assert served["translations"] == decoded
    assert served["translations"][1] == served["translations"][5] == ""
    assert all(served["translations"][i] for i in (0, 2, 3, 4))


def test_export_refuses_a_non_empty_directory(capsys, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    status = exporter.main(["--output_dir", str(tiny_run_dir()), "--export_dir",
                            str(tmp_path)])
    assert status == 2 and "is not empty" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_an_export_finishing_into_a_directory_another_export_filled_is_discarded(
        tmp_path, monkeypatch):
    """Two exporters into one empty --export_dir: both pass the emptiness check, and the
    second to finish must not mix its files with the first's."""
    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.errors import UserError
    from t2t_lite.runs import export as runs_export
    from t2t_lite.runs.loading import load_trained_run

    run = load_trained_run(tiny_run_dir())
    hp = parse_decode_hparams(DECODE_HPARAMS, run.problem.decode_defaults)
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    (export_dir / "saved_model.pb").write_bytes(b"the first export's")
    monkeypatch.setattr(runs_export, "_refuse_filled", lambda path: None)  # checked when empty
    with pytest.raises(UserError, match=r"was filled by another process while this export "
                                        r"ran; this export was discarded"):
        runs_export.export_translator(run.model, run.vocabulary, hp, export_dir)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no staging left
    assert [p.name for p in export_dir.iterdir()] == ["saved_model.pb"]
    assert (export_dir / "saved_model.pb").read_bytes() == b"the first export's"


@pytest.mark.parametrize("existing", [False, True])
def test_an_export_honours_the_umask_or_the_empty_directory_it_replaces(existing, tmp_path):
    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.runs import export as runs_export
    from t2t_lite.runs.loading import load_trained_run

    run = load_trained_run(tiny_run_dir())
    hp = parse_decode_hparams(DECODE_HPARAMS, run.problem.decode_defaults)
    export_dir = tmp_path / "export"
    if existing:
        export_dir.mkdir()
        export_dir.chmod(0o750)
    previous = os.umask(0o022)
    try:
        runs_export.export_translator(run.model, run.vocabulary, hp, export_dir)
    finally:
        os.umask(previous)
    assert export_dir.stat().st_mode & 0o777 == (0o750 if existing else 0o755)


def test_an_export_on_a_full_disk_is_one_error_and_leaves_nothing(tmp_path, monkeypatch):
    import tensorflow as tf

    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.errors import UserError
    from t2t_lite.runs import export as runs_export
    from t2t_lite.runs.loading import load_trained_run

    run = load_trained_run(tiny_run_dir())
    hp = parse_decode_hparams(DECODE_HPARAMS, run.problem.decode_defaults)

    def disk_full(module, path, signatures=None):
        (tmp_path / os.path.basename(path) / "variables").mkdir(parents=True)
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", disk_full)
    with pytest.raises(UserError, match=r"^no space left on device while exporting to "
                                        r"--export_dir=.*; nothing was left there"):
        runs_export.export_translator(run.model, run.vocabulary, hp, tmp_path / "export")
    assert list(tmp_path.iterdir()) == []
