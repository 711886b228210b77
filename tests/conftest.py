"""Shared test fixtures: the real data under ../shared/data, and quiet TensorFlow logs."""
import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("T2T_LITE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
REQUIRE_SHARED_DATA = os.environ.get("T2T_LITE_REQUIRE_SHARED_DATA") == "1"


def shared_data_dir(name: str) -> Path:
    """``../shared/data/<name>``; skips the test when absent, fails when CI requires it."""
    path = SHARED_DATA / name
    if not path.is_dir():
        message = (f"shared data {path} is absent (set T2T_LITE_SHARED_DATA to the folder "
                   f"holding multi30k/, ptb_wsj_sample/, wmt_sgm_sample/)")
        if REQUIRE_SHARED_DATA:
            pytest.fail(message + "; T2T_LITE_REQUIRE_SHARED_DATA=1 requires it")
        pytest.skip(message)
    return path


@pytest.fixture
def multi30k_dir() -> Path:
    return shared_data_dir("multi30k")


@pytest.fixture
def ptb_sample_dir() -> Path:
    return shared_data_dir("ptb_wsj_sample")


@pytest.fixture
def wmt_sgm_dir() -> Path:
    return shared_data_dir("wmt_sgm_sample")


@pytest.fixture(scope="session")
def numbers_data() -> Path:
    """translate_ende_numbers data (vocabulary, records, dev/test text), made once per
    session and shared: tests read it, never write into it."""
    import run_dir_helpers
    return run_dir_helpers.data_dir()


@pytest.fixture(scope="session")
def uninterrupted_trainer_run(numbers_data, tmp_path_factory) -> Path:
    """A run directory of ``t2t-lite-trainer`` (test_trainer's tiny flags) trained 30 steps
    on ``numbers_data`` without interruption, once per session: the weights that runs
    interrupted by SIGKILL or SIGTERM and resumed must end with. Tests read it only."""
    import subprocess
    from test_trainer import trainer_command
    run = tmp_path_factory.mktemp("uninterrupted") / "run"
    subprocess.run(trainer_command(numbers_data, run, "--train_steps=30",
                                   "--save_checkpoints_secs=3600"),
                   check=True, capture_output=True, timeout=300,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return run


@pytest.fixture(scope="session")
def trained_ptb_parser(tmp_path_factory):
    """A parser trained briefly on the WSJ sample (``trained_parser.train_ptb_parser``),
    once per session: tests read it, never write into it."""
    import trained_parser
    return trained_parser.train_ptb_parser(shared_data_dir("ptb_wsj_sample"),
                                           tmp_path_factory.mktemp("ptb_parser"))


@pytest.fixture
def unwritable_dir(tmp_path) -> Path:
    """An existing directory this user cannot create files in: a 0500 one, or (for root,
    whom modes do not stop) /sys/kernel or /proc/self; skips when there is none."""
    candidates = [tmp_path / "locked"]
    candidates[0].mkdir(mode=0o500)
    candidates += [Path("/sys/kernel"), Path("/proc/self")]
    try:
        for candidate in candidates:
            probe = candidate / ".t2t_lite_probe"
            try:
                probe.open("w").close()
            except OSError:
                yield candidate
                return
            probe.unlink()
        pytest.skip("no directory here refuses writes to this user")
    finally:
        candidates[0].chmod(0o700)  # so that pytest can remove tmp_path
