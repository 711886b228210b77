"""The paper's hparam sets: base, big, every row of Table 3, parsing, and small CPU sets.

Each set derives from its parent in a line or two, so an ablation row reads as one line.
Channel counts are totals over heads (see ``t2t_lite.hparams_lib``).
"""
from t2t_lite.hparams_lib import HParams
from t2t_lite.registry import register_hparams


@register_hparams()
def transformer_base() -> HParams:
    """The paper's base model: N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1, 100K steps."""
    return HParams()


@register_hparams()
def transformer_big() -> HParams:
    """The paper's big model (EN-DE): d_model=1024, d_ff=4096, h=16, P_drop=0.3, 300K steps."""
    return transformer_base().replace(hidden_size=1024, filter_size=4096, num_heads=16,
                                      layer_prepostprocess_dropout=0.3, train_steps=300000,
                                      average_checkpoints=20)


@register_hparams()
def transformer_big_enfr() -> HParams:
    """The big model as trained on EN-FR: P_drop=0.1."""
    return transformer_big().replace(layer_prepostprocess_dropout=0.1)


# Table 3 (A): number of heads; d_k = d_v = d_model / h.
@register_hparams()
def transformer_base_h1() -> HParams:
    return transformer_base().replace(num_heads=1)


@register_hparams()
def transformer_base_h4() -> HParams:
    return transformer_base().replace(num_heads=4)


@register_hparams()
def transformer_base_h16() -> HParams:
    return transformer_base().replace(num_heads=16)


@register_hparams()
def transformer_base_h32() -> HParams:
    return transformer_base().replace(num_heads=32)


# Table 3 (B): smaller attention key size; d_v stays 64.
@register_hparams()
def transformer_base_dk16() -> HParams:
    return transformer_base().replace(attention_key_channels=16 * 8)


@register_hparams()
def transformer_base_dk32() -> HParams:
    return transformer_base().replace(attention_key_channels=32 * 8)


# Table 3 (C): model size.
@register_hparams()
def transformer_base_n2() -> HParams:
    return transformer_base().replace(num_hidden_layers=2)


@register_hparams()
def transformer_base_n4() -> HParams:
    return transformer_base().replace(num_hidden_layers=4)


@register_hparams()
def transformer_base_n8() -> HParams:
    return transformer_base().replace(num_hidden_layers=8)


@register_hparams()
def transformer_base_d256() -> HParams:
    """d_model=256, d_k=d_v=32."""
    return transformer_base().replace(hidden_size=256)


@register_hparams()
def transformer_base_d1024() -> HParams:
    """d_model=1024, d_k=d_v=128."""
    return transformer_base().replace(hidden_size=1024)


@register_hparams()
def transformer_base_ff1024() -> HParams:
    return transformer_base().replace(filter_size=1024)


@register_hparams()
def transformer_base_ff4096() -> HParams:
    return transformer_base().replace(filter_size=4096)


# Table 3 (D): dropout and label smoothing.
@register_hparams()
def transformer_base_drop0() -> HParams:
    return transformer_base().replace(layer_prepostprocess_dropout=0.0)


@register_hparams()
def transformer_base_drop2() -> HParams:
    return transformer_base().replace(layer_prepostprocess_dropout=0.2)


@register_hparams()
def transformer_base_ls0() -> HParams:
    return transformer_base().replace(label_smoothing=0.0)


@register_hparams()
def transformer_base_ls2() -> HParams:
    return transformer_base().replace(label_smoothing=0.2)


# Table 3 (E): learned positional embedding instead of sinusoids.
@register_hparams()
def transformer_base_learned_pos() -> HParams:
    return transformer_base().replace(pos="emb")


# Section 6.3: English constituency parsing.
@register_hparams()
def transformer_parsing_wsj() -> HParams:
    """4 layers, d_model=1024; the rest as base. Targets are long linearised trees."""
    return transformer_base().replace(num_hidden_layers=4, hidden_size=1024, max_length=512)


# Small sets that train in minutes on a 2-core CPU.
@register_hparams()
def transformer_tiny() -> HParams:
    """2 layers, d_model 128, 4 heads, 2,048 tokens a step for 1,000 steps: the quick
    start's model for translate_ende_numbers on a CPU (README gives its figures)."""
    return transformer_base().replace(num_hidden_layers=2, hidden_size=128, filter_size=512,
                                      num_heads=4, batch_size=2048, max_length=64,
                                      learning_rate_warmup_steps=400, train_steps=1000)


@register_hparams()
def transformer_small() -> HParams:
    return transformer_base().replace(num_hidden_layers=3, hidden_size=256, filter_size=1024,
                                      num_heads=4, batch_size=4096, max_length=128,
                                      learning_rate_warmup_steps=1000, train_steps=10000)


@register_hparams()
def transformer_multi30k_small() -> HParams:
    """transformer_small regularised for Multi30k's 29,000 training pairs: dropout 0.3 on
    sub-layer outputs and embeddings, none on attention weights or ReLU outputs; 4,096
    tokens a step for 5,000 steps, learning rate 1.5 * d^-0.5 with 1,000 warm-up steps
    (peak 3.0e-3); the last 12 checkpoints averaged, decoded with alpha 1.5. Train with
    ``--mixed_precision`` (docs/training.md gives its commands and BLEU)."""
    return transformer_small().replace(layer_prepostprocess_dropout=0.3, attention_dropout=0.0,
                                       relu_dropout=0.0, learning_rate_constant=1.5,
                                       learning_rate_warmup_steps=1000, train_steps=5000,
                                       average_checkpoints=12, decode_alpha=1.5)


@register_hparams()
def transformer_multi30k() -> HParams:
    """The Multi30k recipe: transformer_multi30k_small with 6 layers instead of 3 and
    pre-norm residual blocks (y = x + Dropout(F(LayerNorm(x)))), 4,000 steps, the last 8
    checkpoints averaged, decoded with alpha 1.5. Train with ``--mixed_precision`` and
    ``--save_checkpoints_steps=100`` (docs/training.md gives the recipe and its BLEU)."""
    return transformer_multi30k_small().replace(num_hidden_layers=6, layer_norm_position="pre",
                                               train_steps=4000, average_checkpoints=8)


@register_hparams()
def transformer_multi30k_tiny() -> HParams:
    """The published fairseq Multi30k Transformer: transformer_multi30k_small 4 layers deep
    and 128 wide (d_ff 256, 4 heads, post-norm), 8,192 tokens a step for 8,000 steps,
    learning rate 2.53 * d^-0.5 with 2,000 warm-up steps (peak 5.0e-3), the last 25
    checkpoints averaged, decoded with beam 5 and alpha 1.5. Train with ``--mixed_precision``
    and ``--save_checkpoints_steps=100`` (docs/training.md gives the recipe and its BLEU)."""
    return transformer_multi30k_small().replace(num_hidden_layers=4, hidden_size=128,
                                               filter_size=256, batch_size=8192,
                                               learning_rate_constant=2.53,
                                               learning_rate_warmup_steps=2000,
                                               train_steps=8000, average_checkpoints=25,
                                               decode_beam_size=5)


@register_hparams()
def transformer_parsing_tiny() -> HParams:
    """transformer_tiny for the WSJ sample's parsing problems on a CPU: max_length 256
    (linearised trees are long), 1,024-token steps at half transformer_tiny's learning
    rate (constant 0.5, peak 2.2e-3 at step 400), 3,000 steps (docs/parsing.md gives the
    one-hour recipe and its F1)."""
    return transformer_tiny().replace(max_length=256, batch_size=1024,
                                      learning_rate_constant=0.5, train_steps=3000)


@register_hparams()
def transformer_parsing_small() -> HParams:
    """transformer_small (3 layers, d_model 256, d_ff 1,024, 4 heads) for
    parsing_english_ptb_sample_words: max_length 256, 2,048 tokens a step, dropout 0.3 on
    sub-layer outputs and embeddings and none on attention weights or ReLU outputs,
    learning rate 1.0 * d^-0.5 with 1,000 warm-up steps (peak 2.0e-3), 10,000 steps. Train with
    ``--mixed_precision`` (docs/parsing.md gives the recipe and its F1)."""
    return transformer_small().replace(max_length=256, batch_size=2048,
                                       layer_prepostprocess_dropout=0.3, attention_dropout=0.0,
                                       relu_dropout=0.0, learning_rate_constant=1.0,
                                       train_steps=10000)


@register_hparams()
def transformer_parsing_sample() -> HParams:
    """The WSJ sample's parser: transformer_parsing_small with 2 layers instead of 3, for
    13,600 steps (about the time of transformer_parsing_small's 10,000), the last 10
    checkpoints averaged. Train with ``--mixed_precision`` and ``--save_checkpoints_steps=400``
    (docs/parsing.md gives the recipe and its F1)."""
    return transformer_parsing_small().replace(num_hidden_layers=2, train_steps=13600,
                                               average_checkpoints=10)
