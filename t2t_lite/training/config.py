"""``TrainerConfig``: everything ``t2t-lite-trainer`` is asked to do, and its flags.

Each field made with ``flag`` is also one of the trainer's command-line flags (its name,
type, default and help live here and nowhere else; see ``t2t_lite.flag_fields``).
Importing this module does not import TensorFlow, so ``t2t-lite-trainer --help`` is fast.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from t2t_lite.data.tfds_source import DATA_SOURCE_HELP, DATA_SOURCES, TFDS_DATA_DIR_HELP
from t2t_lite.flag_fields import flag, non_negative_int, positive_int, seed_int

MIXED_PRECISION_CHOICES = ("bfloat16", "float16")
DEFAULT_KEEP_CHECKPOINT_MAX = 20


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """Everything ``t2t-lite-trainer`` was asked to do (its flags, typed), in --help order."""

    problem: str = flag("registered problem name")
    model: str = flag("registered model name", default="transformer")
    hparams_set: str = flag("registered hparams set, e.g. transformer_base")
    hparams_overrides: str = flag('overrides, e.g. "num_heads=4,label_smoothing=0.2"',
                                  default="", name="hparams")
    data_dir: str = flag("datagen output (vocabulary + TFRecords)")
    tmp_dir: str = flag("raw corpora (downloaded or local); default: <data_dir>/raw, as "
                        "t2t-lite-datagen's", default="")
    output_dir: str = flag("run directory: config, checkpoints, TensorBoard logs")
    generate_data: bool = flag("run datagen first when data is missing", default=False)
    data_source: str = flag(DATA_SOURCE_HELP, default="raw", choices=DATA_SOURCES)
    tfds_data_dir: Optional[str] = flag(TFDS_DATA_DIR_HELP, default=None)
    train_steps: Optional[int] = flag(
        "stop at this global step (default: the hparams set's train_steps)",
        default=None, type=positive_int)
    eval_steps: int = flag("dev batches per evaluation (0: the whole dev set)",
                           default=0, type=non_negative_int)
    local_eval_frequency: int = flag("evaluate every N steps (0: only at the end)",
                                     default=1000, type=non_negative_int)
    eval_decode_sentences: int = flag(
        "dev sentences decoded and scored with the problem's metrics (BLEU, exact match, "
        "parse F1) at each evaluation (0: none); --eval_bleu_sentences is an older name",
        default=100, type=non_negative_int, aliases=("--eval_bleu_sentences",))
    eval_beam_size: int = flag("beam size for evaluation decoding (1: greedy)",
                               default=1, type=positive_int)
    save_checkpoints_secs: int = flag(
        "seconds between checkpoints (the paper: 10 minutes); a final one is always written",
        default=600, type=non_negative_int)
    save_checkpoints_steps: int = flag(
        "save a checkpoint every N steps instead of every --save_checkpoints_secs, so that "
        "a run's checkpoints (and the average of its last few) are the same steps on any "
        "machine (0: by time)", default=0, type=non_negative_int)
    keep_checkpoint_max: Optional[int] = flag(
        "how many of the newest OUTPUT_DIR/ckpt-N to keep; older ones are deleted "
        "(OUTPUT_DIR/best is kept apart); keep at least as many as you will average "
        f"(default: {DEFAULT_KEEP_CHECKPOINT_MAX}, or the hparams set's average_checkpoints "
        "when that is more)", default=None, type=positive_int)
    best_checkpoint_metric: str = flag(
        "dev score that picks the model kept in OUTPUT_DIR/best (default: the problem's "
        "text metric: bleu, parse_f1 or exact_match; loss when --eval_decode_sentences=0); "
        "loss, log_ppl and perplexity: lower is better, others higher", default="")
    early_stopping_patience: int = flag(
        "stop training after N evaluations in a row without a better "
        "--best_checkpoint_metric (0: never)", default=0, type=non_negative_int)
    warm_start_from: str = flag(
        "start a new run from the model weights (not optimizer state or step) of a run "
        "directory (its latest checkpoint), RUN/best or a checkpoint prefix; the "
        "vocabulary must be the same", default="")
    log_step_count_steps: int = flag(
        "steps between progress lines and TensorBoard training scalars",
        default=100, type=positive_int)
    random_seed: int = flag(
        "seed in [0, 2**32) of the initial weights, dropout and the order of the training "
        "examples; on a CPU the same seed, data and flags train the same weights, stopped "
        "and resumed or not", default=1, type=seed_int)
    worker_gpu: Optional[int] = flag("GPUs to use (default: all visible)",
                                     default=None, type=positive_int)
    cpu_devices: int = flag(
        "split the CPU into N logical devices (multi-replica path without GPUs)",
        default=1, type=positive_int)
    jit_compile: bool = flag("compile each replica's step with XLA", default=False)
    mixed_precision: str = flag(
        "compute dtype, variables stay float32: bfloat16 (also the bare --mixed_precision) "
        "or float16 with dynamic loss scaling (GPUs without bfloat16: V100, T4)",
        default="", choices=MIXED_PRECISION_CHOICES, const="bfloat16")
    gradient_accumulation_steps: int = flag(
        "micro-batches per update, to reach the paper's ~25k+25k tokens on fewer devices",
        default=1, type=positive_int)
    attention_summary_steps: int = flag(
        "write attention images, entropy scalars and probe translations to "
        "OUTPUT_DIR/attention every N steps (0: with each evaluation)",
        default=0, type=non_negative_int)
    attention_probes: int = flag("dev sentences followed in the attention summaries (0: none)",
                                 default=3, type=non_negative_int)
    worker_timeout_secs: int = flag(
        "several workers (TF_CONFIG): stop with an error when another worker has not "
        "started within N seconds, or has not answered (collective or heartbeat) for N "
        "seconds (0: wait for every worker to start; then TensorFlow's defaults, a 10 s "
        "heartbeat timeout)", default=0, type=non_negative_int)
    usr_dir: str = ""  # --t2t_usr_dir, imported; recorded in run_config.json (not a flag here)
