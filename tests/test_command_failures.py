"""User-caused failures of the real console commands: run as a user would,
from another directory, each must print exactly one ``error:`` line naming the flag or
file, no traceback, exit with status 2 (a closed stdout: quietly, 141), and lose nothing
the user made. A wrong flag or path that needs no data to see comes before TensorFlow
starts (no ``devices:`` line), within a second."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import corpus_helpers
from corpus_helpers import read_gz, write_gz
from run_dir_helpers import tiny_run_dir

BIN = Path(sys.executable).parent
PROBLEM = "translate_ende_numbers"


def run_command(name, *flags, cwd, stdin=subprocess.DEVNULL, shell_suffix=""):
    """Runs the console script ``name`` in ``cwd``; ``shell_suffix`` (e.g. ``'| true'``)
    runs it through bash."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [str(BIN / name), *map(str, flags)]
    if shell_suffix:
        import shlex
        command = ["bash", "-c", "set -o pipefail; " + shlex.join(command) + " " + shell_suffix]
    return subprocess.run(command, cwd=cwd, stdin=stdin, capture_output=True, env=env,
                          timeout=600)


def the_one_error_line(err: str, *needles) -> str:
    """The single ``error:`` line of a command's stderr ``err`` (no traceback), which
    holds every one of ``needles``."""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert "Traceback" not in err, err
    assert len(errors) == 1, err
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def assert_one_error_line(result, *needles, status=2):
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == status, err
    return the_one_error_line(err, *needles)


def assert_refused_before_tensorflow(result, *needles):
    """``assert_one_error_line``, printed before TensorFlow started: no ``devices:``
    line, which every command prints once TensorFlow is up."""
    line = assert_one_error_line(result, *needles)
    assert b"devices:" not in result.stderr, result.stderr.decode()
    return line


# datagen ---------------------------------------------------------------------------------
def test_datagen_data_dir_that_is_a_file_or_under_one(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    result = run_command("t2t-lite-datagen", f"--problem={PROBLEM}", "--data_dir=notes.txt",
                         cwd=tmp_path)
    assert_refused_before_tensorflow(result, "--data_dir=notes.txt", "is an existing file")
    result = run_command("t2t-lite-datagen", f"--problem={PROBLEM}", "--data_dir=notes.txt/data",
                         cwd=tmp_path)
    assert_refused_before_tensorflow(result, "--data_dir=notes.txt/data",
                          "notes.txt is a file, not a directory")
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_datagen_data_dir_permission_denied_and_read_only(tmp_path, unwritable_dir):
    unwritable = unwritable_dir
    result = run_command("t2t-lite-datagen", f"--problem={PROBLEM}",
                         f"--data_dir={unwritable}/t2t_data", cwd=tmp_path)
    assert_refused_before_tensorflow(result, f"--data_dir={unwritable}/t2t_data")
    result = run_command("t2t-lite-datagen", f"--problem={PROBLEM}", f"--data_dir={unwritable}",
                         cwd=tmp_path)
    assert_refused_before_tensorflow(result, f"--data_dir={unwritable}", "cannot create files in it")


@pytest.fixture
def raw_multi30k(tmp_path, multi30k_dir):
    return corpus_helpers.mini_multi30k(multi30k_dir, tmp_path / "raw",
                                        dict.fromkeys(corpus_helpers.MULTI30K_SPLITS, 200))


def _datagen_multi30k(tmp_path):
    return run_command("t2t-lite-datagen", "--problem=translate_ende_multi30k",
                       "--data_dir=data", "--tmp_dir=raw", "--no_download", cwd=tmp_path)


@pytest.mark.slow
def test_datagen_train_line_counts_differ(tmp_path, raw_multi30k):
    write_gz(raw_multi30k / "train.de.gz", read_gz(raw_multi30k / "train.de.gz", 190))
    result = _datagen_multi30k(tmp_path)
    assert_one_error_line(result, "raw/train.en.gz has 200 lines", "raw/train.de.gz has 190 lines")


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["train", "val"])
def test_datagen_empty_split_is_refused_naming_its_files(tmp_path, raw_multi30k, stem):
    for lang in ("en", "de"):
        write_gz(raw_multi30k / f"{stem}.{lang}.gz", [])
    result = _datagen_multi30k(tmp_path)
    assert_one_error_line(result, "has no usable examples", f"raw/{stem}.en.gz",
                          f"raw/{stem}.de.gz")


@pytest.mark.slow
def test_datagen_error_leaves_no_tmp_text_files(tmp_path, raw_multi30k):
    write_gz(raw_multi30k / "val.de.gz", read_gz(raw_multi30k / "val.de.gz", 150))
    result = _datagen_multi30k(tmp_path)
    assert_one_error_line(result, "raw/val.de.gz has 150 lines")
    assert not list((tmp_path / "data").glob("*.tmp"))


# decoder --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run_dir():
    return tiny_run_dir()


DECODE = "--decode_hparams=beam_size=1,extra_length=3,max_input_length=8"


@pytest.mark.slow
@pytest.mark.parametrize("target", ["notes.txt/out.de", "outdir"])
def test_decoder_unwritable_output_fails_before_decoding(tmp_path, run_dir, target):
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "in.en").write_text("one\ntwo\n")
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}", DECODE,
                         "--decode_from_file=in.en", f"--decode_to_file={target}", cwd=tmp_path)
    assert_refused_before_tensorflow(result, f"--decode_to_file={target}")
    assert b"decoding" not in result.stderr  # no progress bar: nothing was decoded
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.slow
def test_decoder_unwritable_output_dir_fails_before_decoding(tmp_path, run_dir, unwritable_dir):
    unwritable = unwritable_dir
    (tmp_path / "in.en").write_text("one\n")
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}", DECODE,
                         "--decode_from_file=in.en", f"--decode_to_file={unwritable}/out.de",
                         cwd=tmp_path)
    assert_refused_before_tensorflow(result, f"--decode_to_file={unwritable}/out.de")


@pytest.mark.slow
def test_decoder_reference_count_is_checked_before_decoding_and_output_kept(tmp_path, run_dir):
    (tmp_path / "in.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "ref.de").write_text("eins\nzwei\n")
    (tmp_path / "out.de").write_text("my earlier translations\n")
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}", DECODE,
                         "--decode_from_file=in.en", "--decode_to_file=out.de",
                         "--decode_reference=ref.de", cwd=tmp_path)
    assert_one_error_line(result, "--decode_reference=ref.de has 2 references",
                          "the input has 3 lines")
    assert b"decoding" not in result.stderr
    assert (tmp_path / "out.de").read_text() == "my earlier translations\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.en", "out.de", "ref.de"]


@pytest.mark.slow
def test_decoder_replaces_existing_output_only_when_done(tmp_path, run_dir):
    (tmp_path / "in.en").write_text("one\ntwo\n")
    (tmp_path / "out.de").write_text("old\n")
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}", DECODE,
                         "--decode_from_file=in.en", "--decode_to_file=out.de", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert len((tmp_path / "out.de").read_text().splitlines()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.en", "out.de"]  # no temp left


@pytest.mark.slow
def test_decoder_unreadable_input_and_reference_files(tmp_path, run_dir):
    if not Path("/proc/self/mem").is_file():
        pytest.skip("no /proc/self/mem (a regular file whose read fails) on this system")
    (tmp_path / "in.en").write_text("one\n")
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}", DECODE,
                         "--decode_from_file=/proc/self/mem", cwd=tmp_path)
    assert_refused_before_tensorflow(result, "--decode_from_file=/proc/self/mem")
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}", DECODE,
                         "--decode_from_file=in.en", "--decode_reference=/proc/self/mem",
                         cwd=tmp_path)
    assert_refused_before_tensorflow(result, "--decode_reference=/proc/self/mem")


@pytest.mark.slow
def test_decoder_nan_alpha_is_one_error_line(tmp_path, run_dir):
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}",
                         "--decode_hparams=alpha=nan", cwd=tmp_path, stdin=subprocess.PIPE)
    assert_refused_before_tensorflow(result, "'alpha' must be a finite number")


@pytest.mark.slow
def test_decoder_closed_stdin(tmp_path, run_dir):
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}", DECODE, cwd=tmp_path,
                         shell_suffix="<&-")
    assert_refused_before_tensorflow(result, "stdin is closed", "--decode_from_file")


@pytest.mark.slow
def test_decoder_stdout_to_a_reader_that_has_gone_ends_quietly(tmp_path, run_dir):
    (tmp_path / "in.en").write_text("one\n" * 20000)
    result = run_command("t2t-lite-decoder", f"--output_dir={run_dir}",
                         "--decode_hparams=beam_size=1,extra_length=1,max_input_length=4",
                         "--decode_from_file=in.en", cwd=tmp_path,
                         shell_suffix="| (exec 0<&-; sleep 0)")
    err = result.stderr.decode()
    assert "Traceback" not in err and "BrokenPipe" not in err and "error:" not in err, err
    assert result.returncode == 141, err


# info, exporter ------------------------------------------------------------------------
@pytest.mark.parametrize("override, message", [
    ("attention_key_channels=-16", "'attention_key_channels' must be >= 0"),
    ("optimizer_adam_beta1=1.5", "'optimizer_adam_beta1' must be in [0, 1)"),
    ("learning_rate_constant=-1", "'learning_rate_constant' must be > 0"),
    ("learning_rate_constant=nan", "'learning_rate_constant' must be a finite number"),
])
def test_info_out_of_range_hparams(capsys, override, message):
    # In process (the console script's own error path is run in tests/test_info.py).
    from t2t_lite.commands import info
    assert info.main(["--hparams_set=transformer_tiny", f"--hparams={override}"]) == 2
    the_one_error_line(capsys.readouterr().err, message)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["t2t-lite-info", "t2t-lite-trainer"])
def test_registry_help_piped_to_a_reader_that_has_gone(tmp_path, command):
    result = run_command(command, "--registry_help", cwd=tmp_path,
                         shell_suffix="| true")
    err = result.stderr.decode()
    assert "Traceback" not in err and "BrokenPipe" not in err and "error:" not in err, err
    assert result.returncode in (0, 141), err  # 0 when all fit the pipe before it closed


@pytest.mark.slow
def test_exporter_export_dir_that_is_a_file(tmp_path, run_dir):
    (tmp_path / "model.txt").write_text("mine\n")
    result = run_command("t2t-lite-exporter", f"--output_dir={run_dir}",
                         "--export_dir=model.txt", cwd=tmp_path)
    assert_refused_before_tensorflow(result, "--export_dir=model.txt", "is an existing file")
    assert (tmp_path / "model.txt").read_text() == "mine\n"


# trainer -------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, needles", [
    (["--data_dir=notes.txt"], ["--data_dir=notes.txt", "is an existing file"]),
    (["--data_dir=notes.txt/data", "--generate_data"], ["--data_dir=notes.txt/data"]),
])
def test_trainer_data_dir_that_is_a_file(tmp_path, flags, needles):
    (tmp_path / "notes.txt").write_text("mine\n")
    result = run_command("t2t-lite-trainer", f"--problem={PROBLEM}",
                         "--hparams_set=transformer_tiny", "--output_dir=run", *flags,
                         cwd=tmp_path)
    assert_refused_before_tensorflow(result, *needles)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


# the reporting itself --------------------------------------------------------------------
def test_broken_pipe_ends_quietly_with_sigpipe_status(capsys):
    from t2t_lite.commands.common import SIGPIPE_STATUS, run_reporting_errors

    def body():
        raise BrokenPipeError(32, "Broken pipe")

    assert run_reporting_errors(body) == SIGPIPE_STATUS == 141
    assert capsys.readouterr().err == ""


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_decode_is_one_line_and_leaves_no_file(signum, tmp_path):
    run = tiny_run_dir()
    source = tmp_path / "in.txt"
    # Far more than can be decoded in the moments between the progress bar's first line
    # and the signal, even on a fast machine: the signal must find decoding under way.
    source.write_text("seven hundred and twelve\n" * 200000, encoding="utf-8")
    output = tmp_path / "out.txt"
    # A suite started in the background ('pytest &') runs with SIGINT ignored, which a
    # child inherits and Python then leaves ignored. A handled signal is reset to its
    # default in the child, so the decoder starts as from a terminal.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(
            [str(BIN / "t2t-lite-decoder"), f"--output_dir={run}",
             f"--decode_from_file={source}", f"--decode_to_file={output}",
             "--decode_hparams=beam_size=1,extra_length=3"],
            cwd=tmp_path, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        stderr = ""
        while "decoding:" not in stderr:   # the progress bar: decoding has started
            char = process.stderr.read(1)
            assert char, stderr
            stderr += char
        process.send_signal(signum)
        stderr += process.stderr.read()
        process.wait(timeout=120)
    finally:
        process.kill()
    name = signal.Signals(signum).name
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    assert f"t2t-lite-decoder: interrupted ({name}); nothing was saved" in stderr
    assert list(tmp_path.iterdir()) == [source]   # no output, no temporary file


# trainer and avg-checkpoints: unwritable places, before TensorFlow ------------------------
@pytest.mark.parametrize("where", ["unwritable", "under_unwritable", "file"])
def test_trainer_output_dir_it_cannot_write_is_refused_before_tensorflow(where, tmp_path,
                                                                         unwritable_dir):
    output_dir = {"unwritable": unwritable_dir, "under_unwritable": unwritable_dir / "run",
                  "file": tmp_path / "a_file"}[where]
    (tmp_path / "a_file").write_text("x")
    result = run_command("t2t-lite-trainer", f"--problem={PROBLEM}",
                         "--hparams_set=transformer_tiny", f"--data_dir={tmp_path / 'data'}",
                         f"--output_dir={output_dir}", cwd=tmp_path)
    assert_refused_before_tensorflow(result, f"--output_dir={output_dir}")


def test_avg_checkpoints_output_it_cannot_write_is_refused_before_tensorflow(tmp_path,
                                                                            unwritable_dir):
    output_path = unwritable_dir / "averaged" / "ckpt-avg"
    result = run_command("t2t-lite-avg-checkpoints", f"--output_dir={tiny_run_dir()}",
                         f"--output_path={output_path}", cwd=tmp_path)
    assert_refused_before_tensorflow(result, "--output_path=")


@pytest.mark.slow
def test_decoder_stops_when_stdouts_reader_has_gone(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("seven hundred and twelve\n" * 10000, encoding="utf-8")
    result = run_command("t2t-lite-decoder", f"--output_dir={tiny_run_dir()}",
                         f"--decode_from_file={source}",
                         "--decode_hparams=beam_size=1,extra_length=3", cwd=tmp_path,
                         shell_suffix="| true")
    err = result.stderr.decode()
    assert result.returncode == 141, err
    assert "Traceback" not in err and "error:" not in err, err
    assert "decoded 10000 lines" not in err   # stopped at once, not after all the work
