"""Typed, immutable hyperparameters with tensor2tensor's names.

``HParams`` is a frozen dataclass: every key has a type and a default (the paper's base
model), ``replace`` derives a new set, ``override_from_string`` parses
``"num_heads=4,label_smoothing=0.2"`` with type checking, and ``to_json``/``from_json``
round-trip it so that a run directory can store it. An unknown key, a badly typed value
or one out of its range (counts and sizes positive, channels >= 0, dropouts, label
smoothing and Adam betas in [0, 1), epsilons and ``learning_rate_constant`` > 0, no NaN
or infinity) raises ``HParamsError`` naming the key (see ``typed_config``).

Channel counts follow tensor2tensor: ``attention_key_channels`` and
``attention_value_channels`` are totals over all heads (d_k * h and d_v * h); 0 means
``hidden_size``, so d_k = d_v = d_model / h.

``decode_beam_size`` and ``decode_alpha`` say how a set's models are best decoded; the
decoder, the exporter and the trainer's dev decoding apply them over the problem's decode
defaults (``decode_defaults``), and ``--decode_hparams`` over both.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Dict, Tuple

from t2t_lite.typed_config import ConfigError, TypedConfig

POSITION_ENCODINGS = ("timing", "emb")
LAYER_NORM_POSITIONS = ("post", "pre")


class HParamsError(ConfigError):
    """An unknown hparams key, a badly typed value, or an inconsistent set."""


@dataclasses.dataclass(frozen=True)
class HParams(TypedConfig):
    """Model, optimisation and batching hyperparameters (defaults: the paper's base model)."""

    KIND = "hparam"
    FLAG = "--hparams"
    CONFIG_ERROR = HParamsError

    # Architecture.
    hidden_size: int = 512                    # d_model
    filter_size: int = 2048                   # d_ff
    num_heads: int = 8                        # h
    num_hidden_layers: int = 6                # N, for encoder and decoder
    attention_key_channels: int = 0           # d_k * h; 0 = hidden_size
    attention_value_channels: int = 0         # d_v * h; 0 = hidden_size
    pos: str = "timing"                       # "timing" (sinusoids) or "emb" (learned)
    shared_embedding_and_softmax_weights: bool = True
    layer_norm_position: str = "post"         # "post": LayerNorm(x + Dropout(F(x))); "pre"
    layer_norm_epsilon: float = 1e-6
    # Regularisation.
    layer_prepostprocess_dropout: float = 0.1  # P_drop: sub-layer outputs and embeddings
    attention_dropout: float = 0.0
    relu_dropout: float = 0.0
    label_smoothing: float = 0.1              # epsilon_ls
    # Optimisation: lrate = constant * d^-0.5 * min(step^-0.5, step * warmup^-1.5).
    learning_rate_constant: float = 1.0
    learning_rate_warmup_steps: int = 4000
    optimizer_adam_beta1: float = 0.9
    optimizer_adam_beta2: float = 0.98
    optimizer_adam_epsilon: float = 1e-9
    clip_grad_norm: float = 0.0               # 0 = no clipping (the paper clips nothing)
    # Batching and training length.
    batch_size: int = 25000                   # tokens per step per side, over all replicas
    max_length: int = 256                     # longest sequence (tokens) kept for training
    train_steps: int = 100000
    average_checkpoints: int = 5              # the paper averages the last 5 (base), 20 (big)
    # How this set's models are best decoded: the problem's default where unset.
    decode_beam_size: int = 0                 # 0 = the problem's (translation 4, parsing 21)
    decode_alpha: float = -1.0                # -1 = the problem's (translation 0.6, parsing 0.3)

    # Keys that say how to use a trained model, not what it is: a resumed run may change
    # them (run_config.json records the newest).
    USAGE_KEYS: ClassVar[Tuple[str, ...]] = ("decode_beam_size", "decode_alpha")

    def _validate(self) -> None:
        if self.pos not in POSITION_ENCODINGS:
            self._fail(f"hparam 'pos' must be one of {POSITION_ENCODINGS}, got {self.pos!r}")
        if self.layer_norm_position not in LAYER_NORM_POSITIONS:
            self._fail(f"hparam 'layer_norm_position' must be one of {LAYER_NORM_POSITIONS}, "
                       f"got {self.layer_norm_position!r}")
        for name in ("hidden_size", "filter_size", "num_heads", "num_hidden_layers",
                     "batch_size", "max_length", "train_steps", "learning_rate_warmup_steps",
                     "average_checkpoints"):
            if getattr(self, name) <= 0:
                self._fail(f"hparam {name!r} must be positive, got {getattr(self, name)}")
        if self.pos == "timing" and self.hidden_size % 2:
            self._fail(f"hparam 'hidden_size' must be even with pos='timing' (sinusoids "
                       f"come in sin/cos pairs), got {self.hidden_size}")
        self._require_at_least({"attention_key_channels": 0, "attention_value_channels": 0})
        for name in ("key", "value"):
            channels = getattr(self, f"{name}_channels")
            if channels % self.num_heads:
                self._fail(f"attention {name} channels ({channels}) must be divisible by "
                       f"num_heads ({self.num_heads}); set attention_{name}_channels")
        self._require_unit_interval("layer_prepostprocess_dropout", "attention_dropout",
                                    "relu_dropout", "label_smoothing", "optimizer_adam_beta1",
                                    "optimizer_adam_beta2")
        self._validate_ranges()

    def _validate_ranges(self) -> None:
        """Ranges of the keys not checked above (each failure names its key)."""
        self._require_at_least({"clip_grad_norm": 0.0, "decode_beam_size": 0})
        if self.decode_alpha != -1.0 and self.decode_alpha < 0.0:
            self._fail(f"hparam 'decode_alpha' must be >= 0 (or -1: the problem's), got "
                       f"{self.decode_alpha!r}")
        self._require_above({"layer_norm_epsilon": 0.0, "learning_rate_constant": 0.0,
                             "optimizer_adam_epsilon": 0.0})

    # Derived values ---------------------------------------------------------------
    @property
    def decode_defaults(self) -> Dict[str, Any]:
        """The decode hparams this set sets (``{"beam_size": 5, "alpha": 1.5}``; ``{}``:
        none), to apply over the problem's decode defaults."""
        defaults: Dict[str, Any] = {}
        if self.decode_beam_size:
            defaults["beam_size"] = self.decode_beam_size
        if self.decode_alpha != -1.0:
            defaults["alpha"] = self.decode_alpha
        return defaults

    @property
    def key_channels(self) -> int:
        """Total query/key channels over heads (d_k * h)."""
        return self.attention_key_channels or self.hidden_size

    @property
    def value_channels(self) -> int:
        """Total value channels over heads (d_v * h)."""
        return self.attention_value_channels or self.hidden_size
