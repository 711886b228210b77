"""Sinusoids, learning-rate schedule, optimizer, label-smoothed loss and token metrics,
each against an independent numpy computation of the paper's formulas."""
import math

import keras
import numpy as np
import pytest

from t2t_lite.hparams_lib import HParams
from t2t_lite.layers.embedding import SharedEmbedding, timing_signal
from t2t_lite.training.losses import LabelSmoothedCrossEntropy, label_smoothed_cross_entropy
from t2t_lite.training.metrics import LogPerplexity, TokenAccuracy, token_statistics
from t2t_lite.training.optimizer import make_optimizer
from t2t_lite.training.schedule import TransformerSchedule


def test_sinusoids_match_the_paper_formula():
    length, d = 50, 32
    expected = np.zeros((length, d))
    for pos in range(length):
        for i in range(d // 2):
            expected[pos, 2 * i] = math.sin(pos / 10000 ** (2 * i / d))
            expected[pos, 2 * i + 1] = math.cos(pos / 10000 ** (2 * i / d))
    np.testing.assert_allclose(timing_signal(np.arange(length), d), expected, atol=2e-5)
    # A single position (as in incremental decoding) gives the same row.
    np.testing.assert_array_equal(timing_signal(np.array([17]), d)[0],
                                  timing_signal(np.arange(length), d)[17])


def test_shared_embedding_scales_and_zeroes_padding():
    layer = SharedEmbedding(10, 4)
    out = np.asarray(layer(np.array([[3, 0]])))
    table = np.asarray(layer.embeddings)
    np.testing.assert_allclose(out[0, 0], table[3] * 2.0, rtol=1e-6)   # sqrt(4) = 2
    assert np.all(out[0, 1] == 0.0)
    x = np.random.default_rng(0).normal(size=(1, 2, 4)).astype("float32")
    np.testing.assert_allclose(layer.logits(x), x @ table.T, rtol=1e-5, atol=1e-6)


def paper_rate(step, d_model=512, warmup=4000):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


@pytest.mark.parametrize("step", [1, 4000, 100000])
def test_schedule_matches_the_paper(step):
    schedule = TransformerSchedule(512, 4000)
    # Keras passes the optimizer's iterations, which start at 0: step = iterations + 1.
    assert float(schedule(step - 1)) == pytest.approx(paper_rate(step), rel=1e-6)


def test_schedule_serialises_and_optimizer_uses_hparams():
    schedule = TransformerSchedule(256, 1000, constant=2.0)
    clone = TransformerSchedule.from_config(schedule.get_config())
    assert float(clone(99)) == pytest.approx(2.0 * paper_rate(100, 256, 1000), rel=1e-6)
    optimizer = make_optimizer(HParams())
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert float(optimizer.learning_rate) == pytest.approx(paper_rate(1), rel=1e-6)
    assert optimizer.global_clipnorm is None
    assert make_optimizer(HParams(clip_grad_norm=1.5)).global_clipnorm == 1.5


LABELS = np.array([[2, 3, 1, 0]])                      # last position is padding
LOGITS = np.array([[[0.1, 0.5, 2.0, -1.0],
                    [1.0, 0.0, 0.3, 0.7],
                    [0.2, 3.0, -0.5, 0.0],
                    [9.0, -9.0, 4.0, 2.0]]], np.float32)


def hand_smoothed_loss(labels, logits, eps):
    total, count = 0.0, 0
    vocab = logits.shape[-1]
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            if labels[b, t] == 0:
                continue
            z = logits[b, t].astype(np.float64)
            log_p = z - np.log(np.exp(z).sum())
            target = np.full(vocab, eps / (vocab - 1))
            target[labels[b, t]] = 1 - eps
            total += -(target * log_p).sum()
            count += 1
    return total, count


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.2])
def test_label_smoothed_loss_matches_hand_computation(eps):
    loss_sum, tokens = label_smoothed_cross_entropy(LABELS, LOGITS, eps)
    expected_sum, expected_count = hand_smoothed_loss(LABELS, LOGITS, eps)
    assert float(tokens) == expected_count == 3
    assert float(loss_sum) == pytest.approx(expected_sum, rel=1e-5)
    loss = LabelSmoothedCrossEntropy(eps)(LABELS, LOGITS)
    assert float(loss) == pytest.approx(expected_sum / expected_count, rel=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_label_smoothed_loss_gradient_is_softmax_minus_target(eps, dtype):
    """The written-out gradient: (softmax(z) - q) per real token, zero at padding."""
    import tensorflow as tf
    logits = tf.constant(LOGITS, dtype)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss_sum, _ = label_smoothed_cross_entropy(LABELS, logits, eps)
    gradient = tape.gradient(loss_sum, logits)
    assert gradient.dtype == dtype
    z = np.asarray(tf.cast(logits, "float32"), np.float64)
    probs = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    target = np.full(z.shape, eps / (z.shape[-1] - 1))
    np.put_along_axis(target, LABELS[..., None], 1 - eps, axis=-1)
    expected = (probs - target) * (LABELS != 0)[..., None]
    tolerance = 1e-6 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(np.asarray(tf.cast(gradient, "float32")), expected,
                               atol=tolerance)


def test_padding_never_counts():
    changed = LOGITS.copy()
    changed[0, 3] = [-5.0, 7.0, 0.0, 1.0]
    for fn in (lambda l: label_smoothed_cross_entropy(LABELS, l, 0.1)[0],
               lambda l: LabelSmoothedCrossEntropy(0.1)(LABELS, l),
               lambda l: token_statistics(LABELS, l)["nll_sum"]):
        assert float(fn(LOGITS)) == pytest.approx(float(fn(changed)), rel=1e-7)
    # More padding columns leave the mean unchanged.
    wide_labels = np.pad(LABELS, ((0, 0), (0, 3)))
    wide_logits = np.pad(LOGITS, ((0, 0), (0, 3), (0, 0)))
    assert float(LabelSmoothedCrossEntropy(0.1)(wide_labels, wide_logits)) == pytest.approx(
        float(LabelSmoothedCrossEntropy(0.1)(LABELS, LOGITS)), rel=1e-6)
    loss = LabelSmoothedCrossEntropy(0.1)
    assert LabelSmoothedCrossEntropy.from_config(loss.get_config()).smoothing == 0.1


def test_token_metrics_match_hand_computation():
    accuracy, log_ppl = TokenAccuracy(), LogPerplexity()
    accuracy.update_state(LABELS, LOGITS)
    log_ppl.update_state(LABELS, LOGITS)
    # argmax per real position: 2 (gold 2), 0 (gold 3), 1 (gold 1) -> 2 of 3 correct.
    assert float(accuracy.result()) == pytest.approx(2 / 3)
    expected_nll, count = hand_smoothed_loss(LABELS, LOGITS, 0.0)
    assert float(log_ppl.result()) == pytest.approx(expected_nll / count, rel=1e-5)
    log_ppl.reset_state()
    assert float(log_ppl.result()) == 0.0
    assert keras.metrics.deserialize(keras.metrics.serialize(accuracy),
                                     custom_objects={"TokenAccuracy": TokenAccuracy}
                                     ).name == "token_accuracy"


def test_evaluator_builds_one_translator_for_every_evaluation(monkeypatch):
    """Each evaluation used to build a new Translator, retracing decoding for every bucket."""
    import run_dir_helpers
    from t2t_lite.decoding import translator as translator_module
    from t2t_lite.runs.loading import load_trained_model
    from t2t_lite.training.evaluation import Evaluator

    run_config, problem, model, vocabulary = load_trained_model(run_dir_helpers.tiny_run_dir())
    built = []
    original = translator_module.Translator.__init__

    def counting_init(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(translator_module.Translator, "__init__", counting_init)
    evaluator = Evaluator(model, problem, vocabulary, run_config.resolved_hparams(),
                          str(run_dir_helpers.data_dir()), eval_steps=1, decode_sentences=3)
    first, second = evaluator.text_metrics(), evaluator.text_metrics()
    assert len(built) == 1 and first == second and "exact_match" in first


def test_evaluator_loss_traces_a_few_times_over_every_eval_shape():
    """Eval batches of many (batch, length) shapes used to retrace the loss function once
    per shape (and print TensorFlow's retracing warning after the fifth)."""
    import run_dir_helpers
    from t2t_lite.data.pipeline import make_dataset
    from t2t_lite.runs.loading import load_trained_model
    from t2t_lite.training.evaluation import Evaluator

    run_config, problem, model, vocabulary = load_trained_model(run_dir_helpers.tiny_run_dir())
    hparams, data_dir = run_config.resolved_hparams(), str(run_dir_helpers.data_dir())
    evaluator = Evaluator(model, problem, vocabulary, hparams, data_dir, decode_sentences=0)
    shapes = {tuple(features["targets"].shape) for features in
              make_dataset(problem, data_dir, "dev", hparams, training=False)}
    assert len(shapes) >= 3          # one trace each before the fix
    metrics = evaluator.loss_metrics()
    assert 0.0 < metrics["accuracy"] <= 1.0
    assert evaluator._stats_fn.experimental_get_tracing_count() <= 2
