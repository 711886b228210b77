"""--t2t_usr_dir on every command, translate_text_files, and start-up without TensorFlow.

The user's package is written into a temporary directory and the commands run as a
user runs them: console scripts in a subprocess whose working directory is that
temporary directory (registrations never leak into this test process).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from t2t_lite.errors import UserError
from t2t_lite.runs.config import RunConfig

COMMANDS = ("info", "datagen", "trainer", "decoder", "exporter", "avg-checkpoints", "evalb")
MODULES = {"info": "info", "datagen": "datagen", "trainer": "trainer", "decoder": "decoder",
           "exporter": "exporter", "avg-checkpoints": "avg_checkpoints", "evalb": "evalb"}


def command(name: str) -> list:
    """The console script ``t2t-lite-NAME`` of this interpreter's environment (or
    ``python -m`` of its module where the scripts are not installed)."""
    script = Path(sys.executable).parent / f"t2t-lite-{name}"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", f"t2t_lite.commands.{MODULES[name]}"]


def run(name: str, *flags: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(command(name) + list(flags), cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def write_package(root: Path, name: str = "my_t2t", **modules: str) -> Path:
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "".join(f"from . import {module}  # noqa: F401\n" for module in modules))
    for module, source in modules.items():
        (package / f"{module}.py").write_text(textwrap.dedent(source))
    return package


MY_HPARAMS = """
    from t2t_lite.hparams import transformer
    from t2t_lite.registry import register_hparams


    @register_hparams()
    def my_tiny():
        return transformer.transformer_tiny().replace(
            num_hidden_layers=1, hidden_size=32, filter_size=64, num_heads=2, batch_size=256)
"""

MY_PROBLEM = """
    from t2t_lite.data.problem import VocabSpec
    from t2t_lite.problems.translate_text_files import TranslateTextFiles
    from t2t_lite.registry import register_problem


    @register_problem("translate_my_digits")
    class TranslateMyDigits(TranslateTextFiles):
        vocab_spec = VocabSpec(size=64, byte_fallback=False)
        train_shards = 1
"""


def error_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# Start-up: --help and --registry_help without TensorFlow ------------------------------
def test_help_and_registry_help_do_not_import_tensorflow():
    probe = textwrap.dedent(f"""
        import contextlib, importlib, io, sys
        for name in {sorted(set(MODULES.values()))!r}:
            module = importlib.import_module("t2t_lite.commands." + name)
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    module.main(["--help"])
                except SystemExit:
                    pass
        from t2t_lite.commands import info
        with contextlib.redirect_stdout(io.StringIO()) as out:
            status = info.main(["--registry_help"])
        assert status == 0 and "translate_text_files" in out.getvalue(), out.getvalue()
        assert "  transformer" in out.getvalue()
        print(sorted(m for m in ("tensorflow", "keras", "tensorflow_text") if m in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_declared_model_is_imported_on_first_get():
    probe = textwrap.dedent("""
        import sys
        from t2t_lite import registry
        assert "transformer" in registry.MODELS.names() and "transformer" in registry.MODELS
        assert "t2t_lite.models.transformer" not in sys.modules and "keras" not in sys.modules
        model = registry.MODELS.get("transformer")
        assert model.__module__ == "t2t_lite.models.transformer", model
        assert model.registered_name == "transformer"
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# --t2t_usr_dir on every command ---------------------------------------------------------
@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_takes_the_flag(name, tmp_path):
    result = run(name, "--help", cwd=tmp_path, timeout=60)
    assert result.returncode == 0
    assert "--t2t_usr_dir" in result.stdout


def test_registry_help_lists_the_users_registrations(tmp_path):
    write_package(tmp_path, my_hparams=MY_HPARAMS, my_problem=MY_PROBLEM)
    for name in ("info", "trainer"):
        result = run(name, "--t2t_usr_dir=my_t2t", "--registry_help", cwd=tmp_path, timeout=60)
        assert result.returncode == 0, result.stderr
        assert "  translate_my_digits" in result.stdout
        assert "  my_tiny" in result.stdout
        assert "  translate_ende_numbers" in result.stdout


def test_info_resolves_a_users_hparams_set(tmp_path):
    write_package(tmp_path, my_hparams=MY_HPARAMS)
    result = run("info", "--t2t_usr_dir=my_t2t", "--hparams_set=my_tiny", "--vocab_size=64",
                 cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '"hidden_size": 32' in result.stdout


@pytest.mark.parametrize("setup, message", [
    (lambda root: None, "does not exist"),
    (lambda root: (root / "my_t2t").write_text("x"), "is not a directory"),
    (lambda root: (root / "my_t2t").mkdir(), "holds no __init__.py"),
])
def test_a_wrong_path_is_one_error_line(tmp_path, setup, message):
    setup(tmp_path)
    result = run("info", "--t2t_usr_dir=my_t2t", "--registry_help", cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert result.stderr.startswith("error: --t2t_usr_dir=my_t2t ")
    assert message in result.stderr


def test_a_module_that_raises_shows_its_own_traceback(tmp_path):
    write_package(tmp_path, broken="""
        def helper():
            raise FileNotFoundError("my_corpus.tsv is not there")


        helper()
    """)
    result = run("datagen", "--t2t_usr_dir=my_t2t", "--problem=x", "--data_dir=d",
                 cwd=tmp_path, timeout=60)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    lines = lines[[line.startswith("error:") for line in lines].index(True):]
    assert lines[0] == ("error: --t2t_usr_dir=my_t2t failed to import; the traceback below "
                        "is from its code")
    assert lines[1] == "Traceback (most recent call last):"
    assert "my_t2t/__init__.py" in lines[2]          # the user's frames, not importlib's
    assert any("broken.py" in line and "helper" in line for line in lines)
    assert lines[-1] == "FileNotFoundError: my_corpus.tsv is not there"


def test_a_syntax_error_shows_its_file_and_line_without_importlibs_frames(tmp_path):
    package = write_package(tmp_path)
    (package / "__init__.py").write_text("def helper(:\n    pass\n")
    result = run("datagen", "--t2t_usr_dir=my_t2t", "--problem=x", "--data_dir=d",
                 cwd=tmp_path, timeout=60)
    assert result.returncode == 1
    err = result.stderr
    assert "importlib" not in err and "<frozen" not in err and "t2t_lite/" not in err, err
    lines = err.strip().splitlines()
    lines = lines[[line.startswith("error:") for line in lines].index(True):]
    assert lines[0] == ("error: --t2t_usr_dir=my_t2t failed to import; the traceback below "
                        "is from its code")
    assert "my_t2t/__init__.py" in lines[1] and "line 1" in lines[1]
    assert lines[-1].startswith("SyntaxError: ")


def test_a_name_taken_by_a_builtin_is_refused_with_the_users_traceback(tmp_path):
    write_package(tmp_path, clash="""
        from t2t_lite.registry import register_model


        @register_model("transformer")
        class MyTransformer:
            pass
    """)
    result = run("info", "--t2t_usr_dir=my_t2t", "--registry_help", cwd=tmp_path, timeout=60)
    assert result.returncode == 1
    assert "clash.py" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "ValueError: model 'transformer' is already registered (by module "
        "t2t_lite.models.transformer); register yours under another name, or drop it "
        "to use that one")


def test_old_run_config_without_usr_dir_loads(tmp_path):
    values = {"problem": "translate_ende_numbers", "model": "transformer",
              "hparams_set": "transformer_tiny", "hparams_overrides": "", "hparams": {},
              "vocab_size": 100, "vocab_file": "vocab.x", "data_dir": "/data"}
    (tmp_path / "run_config.json").write_text(json.dumps(values))
    assert RunConfig.load(str(tmp_path)).usr_dir == ""


def test_a_recorded_usr_dir_that_is_gone_names_it_and_the_flag(tmp_path):
    from t2t_lite.usr_dir import import_run_usr_dir
    gone = tmp_path / "gone" / "my_t2t"
    values = {"problem": "translate_my_digits", "model": "transformer",
              "hparams_set": "my_tiny", "hparams_overrides": "", "hparams": {},
              "vocab_size": 100, "vocab_file": "vocab.x", "usr_dir": str(gone)}
    (tmp_path / "run_config.json").write_text(json.dumps(values))
    with pytest.raises(UserError) as error:
        import_run_usr_dir(str(tmp_path))
    message = str(error.value)
    assert f"--t2t_usr_dir={gone}, which is gone" in message
    assert "pass --t2t_usr_dir=DIR" in message and "\n" not in message


@pytest.mark.parametrize("name, flags", [
    ("decoder", []), ("exporter", ["--export_dir=export"]), ("avg-checkpoints", []),
    ("trainer", ["--problem=translate_my_digits", "--hparams_set=my_tiny", "--data_dir=data"])])
def test_a_gone_recorded_usr_dir_is_refused_before_tensorflow(tmp_path, name, flags):
    gone = tmp_path / "gone" / "my_t2t"
    values = {"problem": "translate_my_digits", "model": "transformer",
              "hparams_set": "my_tiny", "hparams_overrides": "", "hparams": {},
              "vocab_size": 100, "vocab_file": "vocab.x", "usr_dir": str(gone)}
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run_config.json").write_text(json.dumps(values))
    result = run(name, "--output_dir=run", *flags, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [  # nothing else: TensorFlow did not start
        f"error: run was trained with --t2t_usr_dir={gone}, which is gone; pass "
        f"--t2t_usr_dir=DIR with the same modules (problem 'translate_my_digits', model "
        f"'transformer')"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]


# translate_text_files ------------------------------------------------------------------
def test_translate_text_files_names_the_missing_file(tmp_path):
    from t2t_lite.data.problem import get_problem
    from t2t_lite.data.raw import RawDataError
    for name in ("train.src", "train.tgt", "dev.src", "dev.tgt", "test.src"):
        (tmp_path / name).write_text("a\n")
    problem = get_problem("translate_text_files")
    with pytest.raises(RawDataError) as error:
        problem.text_pairs("train", tmp_path)   # before any work, though test is read last
    assert str(error.value).startswith(f"{tmp_path / 'test.tgt'} not found")
    (tmp_path / "test.tgt.gz").write_bytes(__import__("gzip").compress("b\n".encode()))
    pairs = list(problem.text_pairs("test", tmp_path))
    assert [(p.source, p.target) for p in pairs] == [(b"a", b"b")]


def test_translate_text_files_datagen_cleans_and_reports_like_other_problems(tmp_path):
    from t2t_lite.data.datagen import DROP_EMPTY, DROP_UTF8, generate
    corpus = tmp_path / "corpus"
    write_digits_corpus(corpus)
    with open(corpus / "train.src", "ab") as src, open(corpus / "train.tgt", "ab") as tgt:
        src.write(b"\none \xff\n")           # line 401: empty source; 402: bad UTF-8
        tgt.write(b"eins\neins\n")
    summary = generate("translate_text_files", tmp_path / "data", corpus, download=False)
    assert summary.splits["train"].examples == 400
    assert summary.splits["train"].dropped[DROP_EMPTY].first == "train.src line 401"
    assert summary.splits["train"].dropped[DROP_UTF8].first == "train.src line 402"
    assert (summary.splits["dev"].examples, summary.splits["test"].examples) == (20, 10)
    assert 100 < summary.vocab_size <= 8000   # BPE of up to 8,000 pieces, small corpus
    assert summary.vocab_file.endswith("vocab.translate_text_files.8000.spm.model")


# End to end, as a user would -------------------------------------------------------------
def write_digits_corpus(directory: Path) -> None:
    """English digit words -> German digit words, train 400 / dev 20 / test 10 lines."""
    english = "zero one two three four five six seven eight nine".split()
    german = "null eins zwei drei vier fünf sechs sieben acht neun".split()
    rng = random.Random(0)
    directory.mkdir()
    for split, count in (("train", 400), ("dev", 20), ("test", 10)):
        digits = [[rng.randrange(10) for _ in range(rng.randint(1, 5))] for _ in range(count)]
        for side, words in (("src", english), ("tgt", german)):
            (directory / f"{split}.{side}").write_text(
                "".join(" ".join(words[d] for d in line) + "\n" for line in digits),
                encoding="utf-8")


@pytest.mark.slow
def test_usr_dir_end_to_end_datagen_train_decode_export_serve(tmp_path):
    write_package(tmp_path, my_hparams=MY_HPARAMS, my_problem=MY_PROBLEM)
    write_digits_corpus(tmp_path / "corpus")

    result = run("datagen", "--t2t_usr_dir=my_t2t", "--problem=translate_my_digits",
                 "--tmp_dir=corpus", "--data_dir=data", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train: 400 examples" in result.stdout

    result = run("trainer", "--t2t_usr_dir=my_t2t", "--problem=translate_my_digits",
                 "--hparams_set=my_tiny", "--data_dir=data", "--output_dir=run",
                 "--train_steps=20", "--local_eval_frequency=0", "--eval_decode_sentences=0",
                 "--attention_probes=0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "step=20" in result.stdout
    recorded = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert recorded["usr_dir"] == str((tmp_path / "my_t2t").resolve())
    assert recorded["hparams"]["hidden_size"] == 32

    # No flag: the decoder and exporter import the directory recorded in the run.
    result = run("decoder", "--output_dir=run", "--decode_from_file=corpus/test.src",
                 "--decode_to_file=test.hyp", "--decode_hparams=extra_length=5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    hypotheses = (tmp_path / "test.hyp").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == 10
    result = run("exporter", "--output_dir=run", "--export_dir=export",
                 "--decode_hparams=extra_length=5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr

    serve = textwrap.dedent("""
        import sys
        import tensorflow as tf, tensorflow_text  # noqa: F401  (the export's ops)
        serving = tf.saved_model.load("export").signatures["serving_default"]
        lines = open("corpus/test.src", encoding="utf-8").read().splitlines()
        out = serving(sentences=tf.constant(lines))["translations"].numpy()
        sys.stdout.buffer.write(b"".join(text + b"\\n" for text in out))
    """)
    served = subprocess.run([sys.executable, "-c", serve], cwd=tmp_path, capture_output=True,
                            timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert served.returncode == 0, served.stderr.decode()
    assert served.stdout.decode("utf-8").splitlines() == hypotheses

    # The package moved: one error line naming it and the flag; the flag finds it again.
    (tmp_path / "elsewhere").mkdir()
    shutil.move(str(tmp_path / "my_t2t"), str(tmp_path / "elsewhere" / "my_t2t"))
    result = run("decoder", "--output_dir=run", "--decode_from_file=corpus/test.src",
                 cwd=tmp_path)
    assert result.returncode == 2
    assert "devices:" not in result.stderr  # refused before TensorFlow started
    assert error_lines(result.stderr) == [
        f"error: run was trained with --t2t_usr_dir={recorded['usr_dir']}, which is gone; "
        f"pass --t2t_usr_dir=DIR with the same modules (problem 'translate_my_digits', "
        f"model 'transformer')"]
    result = run("avg-checkpoints", "--output_dir=run", "--t2t_usr_dir=elsewhere/my_t2t",
                 "--num_last_checkpoints=1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
