"""Attention monitoring end to end: summaries of a tiny run served by a real TensorBoard,
a headless Chromium screenshot of its images dashboard, the weights' invariants, and the
decoder's --attention_dir."""
import io
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import run_dir_helpers
from t2t_lite.commands import decoder
from t2t_lite.monitoring.attention import KINDS, AttentionConfig
from t2t_lite.monitoring.rendering import image_size, tensorboard_columns
from t2t_lite.monitoring.summaries import LOG_SUBDIR, AttentionMonitor
from t2t_lite.runs.loading import load_trained_model

CHROMIUM = Path("/usr/bin/chromium")
# Small probes: an untrained model translates up to max_tokens past its source.
CONFIG = AttentionConfig(num_probes=1, min_source_tokens=4, max_tokens=10)
STEP = 7


@pytest.fixture(scope="module")
def monitored_run(tmp_path_factory):
    """A copy of the tiny run with attention summaries written at STEP; (run, records)."""
    run = run_dir_helpers.copy_run_dir(tmp_path_factory.mktemp("attention") / "run")
    _, problem, model, vocabulary = load_trained_model(run)
    monitor = AttentionMonitor(model, problem, vocabulary, str(run_dir_helpers.data_dir()),
                               str(run / LOG_SUBDIR), every_steps=0, config=CONFIG)
    assert not monitor.after_step(STEP)               # not an evaluation step
    assert monitor.after_step(STEP, evaluated=True)
    records = monitor.write(STEP + 1)
    monitor.close()
    return run, records


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


@pytest.fixture(scope="module")
def tensorboard(monitored_run):
    """A TensorBoard server on the run (127.0.0.1, a free port) once its tags are loaded."""
    run, _ = monitored_run
    port = _free_port()
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(run), "--host",
               "127.0.0.1", "--port", str(port), "--load_fast=false", "--reload_interval=1"]
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                tags = json.loads(_get(f"{base}/data/plugin/images/tags"))
                if tags.get(LOG_SUBDIR):
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"TensorBoard did not serve the attention tags: "
                            f"{log.read()[-2000:].decode(errors='replace')}")
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_weights_sum_to_one_and_decoder_self_is_causal(monitored_run):
    _, records = monitored_run
    assert [r.mode for r in records] == ["reference", "translation"]
    for record in records:
        for kind in KINDS:
            weights = record.weights[kind]
            queries, keys = record.axis_labels(kind)
            assert weights.shape[2:] == (len(queries), len(keys))
            np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)
        causal = record.weights["decoder_self"]
        above = np.triu(np.ones(causal.shape[2:], bool), k=1)
        assert np.all(causal[:, :, above] == 0.0)
        assert record.target_tokens[-1] == "</s>" and record.decoder_inputs[0] == "<s>"


@pytest.mark.slow
def test_tensorboard_lists_attention_tags_and_serves_png(monitored_run, tensorboard):
    _, records = monitored_run
    layers = records[0].num_layers
    images = json.loads(_get(f"{tensorboard}/data/plugin/images/tags"))[LOG_SUBDIR]
    expected = {f"attention/{kind}/layer_{i}" for kind in KINDS for i in range(layers)}
    assert set(images) == expected
    assert all(images[tag]["samples"] == len(records) for tag in expected)
    scalars = json.loads(_get(f"{tensorboard}/data/plugin/scalars/tags"))[LOG_SUBDIR]
    for kind in KINDS:
        assert f"attention_entropy/{kind}/layer_0" in scalars
        assert f"attention_concentrated/{kind}/layer_0" in scalars
    series = json.loads(_get(f"{tensorboard}/data/plugin/scalars/scalars?run={LOG_SUBDIR}"
                             f"&tag=attention_entropy/encdec/layer_0"))
    assert [point[1] for point in series] == [STEP, STEP + 1]
    assert all(point[2] >= 0 for point in series)

    tag = "attention/encdec/layer_0"
    entries = json.loads(_get(f"{tensorboard}/data/plugin/images/images?run={LOG_SUBDIR}"
                              f"&tag={tag}&sample=0"))
    assert [entry["step"] for entry in entries] == [STEP, STEP + 1]
    png = _get(f"{tensorboard}/data/plugin/images/individualImage?{entries[-1]['query']}")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    columns = tensorboard_columns(records[0].num_heads)
    sizes = [image_size(r.num_heads, *r.axis_labels("encdec"), columns) for r in records]
    width, height = max(w for w, _ in sizes), max(h for _, h in sizes)
    assert Image.open(io.BytesIO(png)).size == (width, height)


def _viridis_share(image: Image.Image) -> float:
    """Share of pixels close to a viridis colour (not in TensorBoard's own palette)."""
    from matplotlib import colormaps
    stops = np.array([colormaps["viridis"](i / 15)[:3] for i in range(16)]) * 255
    pixels = np.asarray(image.convert("RGB"), np.float32).reshape(-1, 3)[::7]
    distance = np.min(np.linalg.norm(pixels[:, None, :] - stops[None], axis=-1), axis=1)
    saturated = pixels.max(axis=1) - pixels.min(axis=1) > 40  # not grey, white or black
    return float(np.mean((distance < 20) & saturated))


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed "
                    "(apt-get install -y chromium; .ci/run installs it)")
@pytest.mark.slow
def test_chromium_screenshot_shows_attention_grids(tensorboard, tmp_path):
    shot = tmp_path / "images_dashboard.png"
    profile = tmp_path / "chromium_profile"
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
               "--window-size=1400,1000", "--virtual-time-budget=15000",
               f"--screenshot={shot}", f"{tensorboard}/?darkMode=false#images"]
    result = subprocess.run(command, capture_output=True, timeout=120)
    assert shot.exists(), result.stderr.decode(errors="replace")[-2000:]
    image = Image.open(shot)
    assert image.size == (1400, 1000)
    assert _viridis_share(image) > 0.01, "no attention heatmap visible in the screenshot"


def test_decoder_attention_dir(tmp_path, capsys):
    run = run_dir_helpers.copy_run_dir(tmp_path / "run")
    source = tmp_path / "in.txt"
    source.write_text("four thousand and twelve\n\nninety-one\n", encoding="utf-8")
    out = tmp_path / "attention"
    assert decoder.main([f"--output_dir={run}", f"--decode_from_file={source}",
                         f"--decode_to_file={tmp_path / 'out.txt'}",
                         "--decode_hparams=beam_size=1,extra_length=4",
                         f"--attention_dir={out}", "--attention_sentences=1"]) == 0
    assert len((tmp_path / "out.txt").read_text().split("\n")) == 4  # 3 lines + final newline
    pngs = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
    assert pngs == sorted(f"sentence_001/{kind}_layer_0.png" for kind in KINDS)
    page = (out / "index.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r"const DATA = (.*);\n", page).group(1).replace("<\\/", "</"))
    (sentence,) = data["sentences"]
    assert sentence["source"] == "four thousand and twelve"
    for kind in KINDS:
        weights = np.array(sentence["weights"][kind]) / 1000.0   # [N, h, q, k] permille
        queries, keys = sentence["labels"][kind]
        assert weights.shape[2:] == (len(queries), len(keys))
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=0.002 * len(keys))
    causal = np.array(sentence["weights"]["decoder_self"])
    assert np.all(causal[:, :, np.triu(np.ones(causal.shape[2:], bool), k=1)] == 0)
    assert "<script>" in page and "src=" not in page  # self-contained


def test_a_dev_split_without_usable_probes_writes_no_summaries_instead_of_crashing(
        tmp_path, capsys):
    """Every dev source blank: no probe qualifies, so the monitor warns once and writes
    nothing (it used to index records[0] of an empty list)."""
    data = tmp_path / "data"
    shutil.copytree(run_dir_helpers.data_dir(), data)
    source = data / f"{run_dir_helpers.PROBLEM}-dev.source.txt"
    lines = source.read_text(encoding="utf-8").count("\n")
    source.write_text("\n" * lines, encoding="utf-8")
    run = run_dir_helpers.copy_run_dir(tmp_path / "run")
    _, problem, model, vocabulary = load_trained_model(run)
    monitor = AttentionMonitor(model, problem, vocabulary, str(data), str(run / LOG_SUBDIR),
                               config=CONFIG)
    assert monitor.write(STEP) == [] and monitor.write(STEP + 1) == []
    monitor.close()
    assert capsys.readouterr().err.count("warning: no attention summaries") == 1
    assert not (run / LOG_SUBDIR).exists()
