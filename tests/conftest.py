"""Shared test fixtures: the real data under ../shared/data, and quiet TensorFlow logs."""
import fcntl
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Callable

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


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``build(folder)`` fills, built once per test session by whichever
    pytest-xdist worker asks first while the others wait for it (a lock file in the
    session's temporary folder, which the workers share). A build that raises leaves no
    folder behind, so the next test that asks builds again."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-N/popen-gwK: pytest-N is the session's, shared
    folder, done = base / name, base / f"{name}.done"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder


@pytest.fixture(scope="session")
def uninterrupted_trainer_run(numbers_data, tmp_path_factory) -> Path:
    """A run directory of ``t2t-lite-trainer`` (test_trainer's tiny flags) trained 30 steps
    on ``numbers_data`` without interruption, once per session: the weights that runs
    interrupted by SIGKILL or SIGTERM and resumed must end with. Tests read it only. One
    worker trains it on its own ``numbers_data``; datagen is deterministic, so that is the
    same data every worker's interrupted runs train on."""
    import subprocess
    from test_trainer import trainer_command

    def train(run: Path) -> None:
        subprocess.run(trainer_command(numbers_data, run, "--train_steps=30",
                                       "--save_checkpoints_secs=3600"),
                       check=True, capture_output=True, timeout=300,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return built_once(tmp_path_factory, "uninterrupted_run", train)


@pytest.fixture(scope="session")
def trained_ptb_parser(tmp_path_factory):
    """A parser trained briefly on the WSJ sample (``trained_parser.train_ptb_parser``),
    once per session: tests read it, never write into it."""
    import trained_parser
    sample = shared_data_dir("ptb_wsj_sample")
    root = built_once(tmp_path_factory, "ptb_parser",
                      lambda root: trained_parser.train_ptb_parser(sample, root))
    return trained_parser.load(root)


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


# The suite runs on every core (setup.cfg: pytest-xdist's ``-n auto --dist loadfile``): a
# worker gets whole test files, so module-scoped fixtures are built once; session fixtures
# that cost a training run are built once for all workers by ``built_once``. Files with the
# most slow tests go first, so that no long file starts last while the other workers idle.
def pytest_collection_modifyitems(config, items):
    slow_tests = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow_tests[item.path])  # stable: each file's order kept
