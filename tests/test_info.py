"""t2t-lite-info: hparams JSON, parameter table, total_params, errors and registry help."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

from t2t_lite import registry
from t2t_lite.commands import info
from t2t_lite.models.parameters import build_shapes_only

# The console script installed beside this interpreter (found whether or not the
# environment is activated), else the one on PATH (a user-site install).
BESIDE = Path(sys.executable).parent / "t2t-lite-info"
INFO = str(BESIDE) if BESIDE.exists() else (shutil.which("t2t-lite-info") or str(BESIDE))


def test_console_script_prints_the_models_count():
    result = subprocess.run([INFO, "--hparams_set=transformer_base",
                             "--vocab_size=37000"], capture_output=True, text=True, check=True)
    lines = result.stdout.strip().splitlines()
    expected = build_shapes_only(registry.hparams("transformer_base"), 37000).count_params()
    assert lines[-1] == f"total_params: {expected}"
    assert expected == 63045632
    # The hparams JSON comes first and parses back to the set.
    json_end = lines.index("}") + 1
    assert json.loads("\n".join(lines[:json_end])) == registry.hparams("transformer_base").to_dict()


def test_bad_override_exits_2_with_the_message():
    result = subprocess.run([INFO, "--hparams=num_head=4"], capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert "unknown hparam 'num_head'" in result.stderr and "Traceback" not in result.stderr


def test_unknown_set_exits_2(capsys):
    assert info.main(["--hparams_set=transformer_huge"]) == 2
    error = capsys.readouterr().err
    assert "unknown hparams set 'transformer_huge'" in error and "transformer_base" in error


def test_table_and_overrides(capsys):
    assert info.main(["--hparams_set=transformer_tiny", "--hparams=num_heads=2",
                      "--vocab_size=100"]) == 0
    out = capsys.readouterr().out
    assert '"num_heads": 2' in out
    table = {line.split()[0]: int(line.split()[1].replace(",", ""))
             for line in out.splitlines()
             if line.split() and line.split()[0] in ("embedding", "encoder", "decoder", "total")}
    assert table["embedding"] == 100 * 128                       # tied: counted once
    assert table["embedding"] + table["encoder"] + table["decoder"] == table["total"]
    assert out.strip().splitlines()[-1] == f"total_params: {table['total']}"


def test_registry_help(capsys):
    assert info.main(["--registry_help"]) == 0
    out = capsys.readouterr().out
    assert "transformer_base" in out and "transformer_big" in out
    models = out.split("models:")[1].split("problems:")[0]
    assert "transformer" in models.split()
