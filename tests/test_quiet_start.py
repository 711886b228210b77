"""A quiet start: the commands print none of TensorFlow's start-up noise by
default, one ``devices:`` line instead, and TensorFlow's logs again when asked
(``--verbosity`` or a user-set ``TF_CPP_MIN_LOG_LEVEL``); errors and tracebacks stay.

The commands run as a user runs them: console scripts in a subprocess, with the
environment of a fresh shell (no ``TF_CPP_MIN_LOG_LEVEL``, which conftest sets for the
test process).
"""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from t2t_lite.commands.startup import devices_line
from t2t_lite.quiet_tf import is_noise

BIN = Path(sys.executable).parent

# Lines TensorFlow 2.21 printed on this project's CPU machine before the change.
NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795408453.422501   15479 cudart_stub.cc:31] Could not find cuda drivers "
    "on your machine, GPU will not be used.",
    "I0000 00:00:1795408453.720955   15479 cpu_feature_guard.cc:227] This TensorFlow binary "
    "is optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795408461.369756   15479 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1732000000.000000   1234 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results due to floating-point round-off errors.",
    "W0000 00:00:1732000000.000000   1234 dataset.cc:42] TFRecordDataset `buffer_size` is "
    "unspecified, default to 262144",
    "normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity normalization.",
]
KEPT = [
    "error: --data_dir=x is an existing file, not a directory; give a directory path",
    "Traceback (most recent call last):",
    "E0000 00:00:1795408461.369756   15479 op_kernel.cc:1830] OP_REQUIRES failed: "
    "out of memory",
    "devices: CPU:0",
]


def test_noise_is_recognised_and_real_messages_are_kept():
    assert [line for line in NOISE if not is_noise(line + "\n")] == []
    assert [line for line in KEPT if is_noise(line + "\n")] == []


def test_devices_line():
    assert devices_line([]) == "devices: CPU:0"
    assert devices_line(["/physical_device:GPU:0"]) == "devices: GPU:0"
    assert devices_line(["/job:localhost/replica:0/task:0/device:GPU:0",
                         "/job:localhost/replica:0/task:0/device:GPU:1"]) == \
        "devices: 2 GPUs (GPU:0, GPU:1)"
    assert devices_line(["/job:worker/replica:0/task:0/device:CPU:0",
                         "/job:worker/replica:0/task:0/device:CPU:1"]) == \
        "devices: 2 CPUs (CPU:0, CPU:1)"


def test_filtered_stderr_keeps_what_is_not_noise_and_tracebacks():
    probe = textwrap.dedent(f"""
        import os
        from t2t_lite.quiet_tf import filtered_stderr
        with filtered_stderr():
            os.write(2, {NOISE[4]!r}.encode() + b"\\n" + b"a real C++ message\\n")
            raise RuntimeError("boom")
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert "cuInit" not in result.stderr
    assert "a real C++ message" in result.stderr
    assert "Traceback" in result.stderr and "RuntimeError: boom" in result.stderr
    # A crash that kills the process inside still shows what was printed before it.
    probe = textwrap.dedent(f"""
        import os, time
        from t2t_lite.quiet_tf import filtered_stderr
        with filtered_stderr():
            os.write(2, {NOISE[4]!r}.encode() + b"\\n" + b"F0000 fatal: about to abort\\n")
            time.sleep(0.5)
            os.abort()
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "fatal: about to abort" in result.stderr and "cuInit" not in result.stderr


def fresh_env(**extra):
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    return {**env, **extra}


def run(name, *flags, cwd, env=None, timeout=600):
    return subprocess.run([str(BIN / f"t2t-lite-{name}"), *map(str, flags)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=env or fresh_env(), stdin=subprocess.DEVNULL)


def noise_lines(stderr):
    return [line for line in stderr.splitlines() if is_noise(line)]


def assert_quiet(result, status=0):
    assert result.returncode == status, result.stderr
    assert noise_lines(result.stderr) == [], result.stderr
    devices = [line for line in result.stderr.splitlines() if line.startswith("devices: ")]
    assert len(devices) == 1, result.stderr  # one line, e.g. devices: CPU:0 or GPU:0
    assert re.fullmatch(r"devices: (CPU:0|GPU:0|\d+ GPUs \(GPU:0, .*\))", devices[0])


def test_info_starts_quietly_and_the_overrides_bring_the_logs_back(tmp_path):
    flags = ("--hparams_set=transformer_tiny", "--vocab_size=100")
    quiet = run("info", *flags, cwd=tmp_path)
    assert_quiet(quiet)
    assert quiet.stdout.splitlines()[-1].startswith("total_params: ")
    for loud in (run("info", *flags, "--verbosity=2", cwd=tmp_path),
                 run("info", *flags, cwd=tmp_path, env=fresh_env(TF_CPP_MIN_LOG_LEVEL="0"))):
        assert loud.returncode == 0, loud.stderr
        assert noise_lines(loud.stderr), loud.stderr  # TensorFlow's own lines are back
        assert loud.stdout == quiet.stdout


def test_errors_and_tracebacks_still_show(tmp_path):
    result = run("info", "--hparams_set=nope", cwd=tmp_path)
    assert_quiet(result, status=2)
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        result.stderr.splitlines()[-1]]
    assert "unknown hparams set 'nope'" in result.stderr
    # A crash in the user's code (after TensorFlow started) keeps its traceback.
    package = tmp_path / "broken_t2t"
    package.mkdir()
    (package / "__init__.py").write_text("1 / 0\n")
    result = run("info", "--t2t_usr_dir=broken_t2t", "--hparams_set=transformer_tiny",
                 cwd=tmp_path)
    assert_quiet(result, status=1)
    assert "Traceback" in result.stderr and "ZeroDivisionError" in result.stderr


@pytest.mark.slow
def test_datagen_trainer_and_decoder_start_quietly(tmp_path):
    data, output = tmp_path / "data", tmp_path / "run"
    assert_quiet(run("datagen", "--problem=translate_ende_numbers", f"--data_dir={data}",
                     cwd=tmp_path))
    trained = run("trainer", "--problem=translate_ende_numbers",
                  "--hparams_set=transformer_tiny", f"--data_dir={data}",
                  f"--output_dir={output}", "--train_steps=2", "--local_eval_frequency=0",
                  "--eval_steps=1", "--eval_decode_sentences=2", "--attention_probes=0",
                  "--hparams=num_hidden_layers=1,hidden_size=32,filter_size=64,num_heads=2",
                  cwd=tmp_path)
    assert_quiet(trained)
    assert "step=2" in trained.stdout or "step 2" in trained.stdout, trained.stdout
    (tmp_path / "in.txt").write_text("twenty-one\n")
    decoded = run("decoder", f"--output_dir={output}", "--decode_from_file=in.txt",
                  "--decode_hparams=beam_size=1,extra_length=3", cwd=tmp_path)
    assert_quiet(decoded)
    assert len(decoded.stdout.splitlines()) == 1
    loud = run("decoder", f"--output_dir={output}", "--decode_from_file=in.txt",
               "--decode_hparams=beam_size=1,extra_length=3", "--verbosity=2", cwd=tmp_path)
    assert loud.returncode == 0 and noise_lines(loud.stderr), loud.stderr


def test_registry_help_with_a_user_dir_that_imports_keras_is_quiet(tmp_path):
    usr_dir = tmp_path / "my_usr"
    usr_dir.mkdir()
    (usr_dir / "__init__.py").write_text("import keras  # noqa: F401\n")
    result = subprocess.run([str(BIN / "t2t-lite-info"), "--registry_help",
                             f"--t2t_usr_dir={usr_dir}"], capture_output=True, text=True,
                            env=fresh_env(), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "transformer_tiny" in result.stdout
    assert result.stderr == ""
