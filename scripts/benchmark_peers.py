"""The peers a user would pick instead of t2t-lite, timed on the benchmark's shapes.

``python scripts/benchmark.py decode --compare`` and ``train --compare`` call these after
timing t2t-lite, in the same process, with random weights of the same dimensions (layers, d_model,
heads, d_ff, shared vocabulary V):

* decoding: CTranslate2 (``ctranslate2.Translator``, ``compute_type`` float32 and int8)
  on a ``TransformerSpec`` (post-norm, sinusoidal positions, ReLU, shared embeddings and
  tied softmax projection), and PyTorch ``nn.Transformer`` with a plain beam search
  (no incremental cache: each step re-runs the decoder over the prefix, which is what
  ``nn.Transformer`` offers). Every search keeps exactly ``target_length`` tokens
  (CTranslate2: ``min_decoding_length = max_decoding_length``; PyTorch: EOS never chosen),
  beam ``beam_size``, the same source ids ``[batch, source_length]``.
* training: PyTorch ``nn.Transformer`` with the same dims, tied embeddings, label-smoothed
  cross-entropy and Adam (beta 0.9/0.98, eps 1e-9), dropout as the hparams.

Each ``*_run`` function prepares a peer and returns a callable that runs it once.
``compare_paired`` times t2t-lite and the peers in rounds, each round timing every one of
them in turn (each right after an untimed run of its own), and reports the median of the
per-round ratios: a change in the machine's load during the benchmark then slows both
sides of a ratio alike, where timing all of t2t-lite's runs and then all of a peer's would
let it move the ratio. The peers come from
the optional extra ``pip install -e .[bench]`` (``ctranslate2``, ``torch``); ``missing()``
names what is not installed. This module imports nothing from ``benchmark.py``: it takes
t2t-lite's run as a callable.
"""
from __future__ import annotations

import importlib.util
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

INSTALL_HINT = 'pip install -e ".[bench]"'
PEERS = {"decode": ("ctranslate2_float32", "ctranslate2_int8", "torch"), "train": ("torch",)}


def check_peers(mode: str, text: str) -> None:
    """``--peers`` names only peers of ``mode``; else one ``error:`` line and exit 2."""
    unknown = sorted({name for name in text.split(",") if name} - set(PEERS[mode]))
    if unknown:
        print(f"error: --peers: unknown {', '.join(unknown)} for {mode}; choose from "
              f"{','.join(PEERS[mode])}", file=sys.stderr)
        raise SystemExit(2)


def missing() -> List[str]:
    """The peer packages that are not installed."""
    return [name for name in ("ctranslate2", "torch") if importlib.util.find_spec(name) is None]


def preload() -> None:
    """Imports PyTorch (with ``torch._dynamo``, which its optimizers load lazily) before
    TensorFlow: loading it after TensorFlow's libraries crashes the process."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401


def _dims(hparams):
    d = hparams.hidden_size
    return d, hparams.filter_size, hparams.num_hidden_layers, hparams.num_heads


# CTranslate2 ----------------------------------------------------------------------------
def build_ctranslate2_model(hparams, vocab_size: int, directory: str, seed: int = 0) -> str:
    """Saves a random-weight CTranslate2 Transformer of ``hparams``' dims into
    ``directory``; vocabulary tokens ``<blank> <s> </s> <unk> w4 ... w{V-1}``."""
    import numpy as np
    from ctranslate2.specs import TransformerSpec

    d, ff, layers, heads = _dims(hparams)
    rng = np.random.default_rng(seed)

    def dense(out_dim, in_dim):
        return (rng.standard_normal((out_dim, in_dim)) * in_dim ** -0.5).astype(np.float32)

    def linear(spec, out_dim, in_dim):
        spec.weight = dense(out_dim, in_dim)
        spec.bias = np.zeros(out_dim, np.float32)

    def norm(spec):
        spec.gamma = np.ones(d, np.float32)
        spec.beta = np.zeros(d, np.float32)

    spec = TransformerSpec.from_config((layers, layers), heads, pre_norm=False)
    embeddings = (rng.standard_normal((vocab_size, d)) * d ** -0.5).astype(np.float32)
    spec.encoder.embeddings[0].weight = embeddings
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.projection.weight = embeddings
    for layer in spec.encoder.layer:
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        norm(layer.self_attention.layer_norm)
    for layer in spec.decoder.layer:
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        norm(layer.self_attention.layer_norm)
        linear(layer.attention.linear[0], d, d)
        linear(layer.attention.linear[1], 2 * d, d)
        linear(layer.attention.linear[2], d, d)
        norm(layer.attention.layer_norm)
    for layer in list(spec.encoder.layer) + list(spec.decoder.layer):
        linear(layer.ffn.linear_0, ff, d)
        linear(layer.ffn.linear_1, d, ff)
        norm(layer.ffn.layer_norm)
    tokens = ["<blank>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(4, vocab_size)]
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.validate()
    spec.save(directory)
    return directory


def ctranslate2_decode_run(hparams, vocab_size: int, source_ids, target_length: int,
                           beam_size: int, alpha: float, compute_type: str,
                           threads: int) -> Callable[[], None]:
    """One ``translate_batch`` of ``source_ids`` (int [b, s], ids >= 4) with exactly
    ``target_length`` output tokens per hypothesis."""
    import ctranslate2

    with tempfile.TemporaryDirectory(prefix="t2t_lite_ct2_") as directory:
        build_ctranslate2_model(hparams, vocab_size, directory)
        translator = ctranslate2.Translator(directory, device="cpu", compute_type=compute_type,
                                            intra_threads=threads, inter_threads=1)
    batch = [[f"w{int(i)}" for i in row] for row in source_ids]

    def run():
        results = translator.translate_batch(
            batch, beam_size=beam_size, length_penalty=alpha, max_batch_size=0,
            min_decoding_length=target_length, max_decoding_length=target_length)
        assert all(len(r.hypotheses[0]) == target_length for r in results), \
            [len(r.hypotheses[0]) for r in results]

    return run


# PyTorch ----------------------------------------------------------------------------------
def _torch_model(hparams, vocab_size: int, dropout: float):
    import torch
    from torch import nn

    d, ff, layers, heads = _dims(hparams)

    class Seq2Seq(nn.Module):
        """nn.Transformer with a shared embedding, tied softmax and sinusoids."""

        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, d, padding_idx=0)
            nn.init.normal_(self.embedding.weight, std=d ** -0.5)
            self.transformer = nn.Transformer(d, heads, layers, layers, ff, dropout,
                                              batch_first=True)
            self.dropout = nn.Dropout(dropout)
            position = torch.arange(1024, dtype=torch.float32)[:, None]
            rates = torch.exp(torch.arange(0, d, 2, dtype=torch.float32)
                              * (-math.log(10000.0) / d))
            table = torch.zeros(1024, d)
            table[:, 0::2] = torch.sin(position * rates)
            table[:, 1::2] = torch.cos(position * rates)
            self.register_buffer("positions", table)

        def embed(self, ids):
            x = self.embedding(ids) * d ** 0.5 + self.positions[:ids.shape[1]]
            return self.dropout(x)

        def logits(self, y):
            return y @ self.embedding.weight.T

        def encode(self, inputs):
            return self.transformer.encoder(self.embed(inputs))

        def decode(self, prefix, memory):
            t = prefix.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(t)
            return self.transformer.decoder(self.embed(prefix), memory, tgt_mask=mask,
                                            tgt_is_causal=True)

        def forward(self, inputs, targets):
            prefix = torch.nn.functional.pad(targets, (1, 0))[:, :-1]
            return self.logits(self.decode(prefix, self.encode(inputs)))

    return Seq2Seq()


def torch_decode_run(hparams, vocab_size: int, source_ids, target_length: int,
                     beam_size: int, threads: int) -> Callable[[], None]:
    """One beam search (no KV cache: the decoder re-runs over the prefix each step) of
    ``source_ids`` int [b, s], ``target_length`` tokens per hypothesis."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = _torch_model(hparams, vocab_size, 0.0).eval()
    inputs = torch.as_tensor(source_ids, dtype=torch.long)
    b, k = inputs.shape[0], beam_size

    @torch.inference_mode()
    def run():
        memory = model.encode(inputs).repeat_interleave(k, dim=0)     # [b*k, s, d]
        prefix = torch.zeros(b * k, 1, dtype=torch.long)               # start symbol
        scores = torch.full((b, k), -1e9)
        scores[:, 0] = 0.0
        for _ in range(target_length):
            logits = model.logits(model.decode(prefix, memory)[:, -1])  # [b*k, V]
            logits[:, 1] = -1e9                                          # never EOS
            total = scores[:, :, None] + torch.log_softmax(logits, -1).view(b, k, -1)
            scores, flat = total.view(b, -1).topk(k, dim=-1)             # [b, k]
            beam, token = flat // vocab_size, flat % vocab_size
            rows = (beam + torch.arange(b)[:, None] * k).view(-1)
            prefix = torch.cat([prefix[rows], token.view(-1, 1)], dim=1)
        assert prefix.shape[1] == target_length + 1

    return run


def torch_train_run(hparams, vocab_size: int, batch: int, length: int,
                    threads: int) -> Callable[[], None]:
    """One training step (forward, label-smoothed loss, backward, Adam) on random ids
    [batch, length] each side."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = _torch_model(hparams, vocab_size, hparams.layer_prepostprocess_dropout).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4,
                                 betas=(hparams.optimizer_adam_beta1,
                                        hparams.optimizer_adam_beta2),
                                 eps=hparams.optimizer_adam_epsilon)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=hparams.label_smoothing)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randint(2, vocab_size, (batch, length), generator=generator)
    targets = torch.randint(2, vocab_size, (batch, length), generator=generator)

    def run():
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs, targets)
        loss = loss_fn(logits.reshape(-1, vocab_size), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        float(loss)

    return run


# Reports ----------------------------------------------------------------------------------
# Before each library's turn in a round, the paired rounds wait this long, so that the
# worker threads of the one before (CTranslate2's and PyTorch's OpenMP threads keep
# spinning for a while after their work, 200 ms by default for Intel's OpenMP) have gone
# idle when the next starts.
PAUSE_SECONDS = 0.5


def decode_peer_runs(args, hparams, source_ids) -> Dict[str, Callable[[], None]]:
    """The decoding peers named by ``--peers`` (all by default), each prepared: {name: run}."""
    threads = args.intra_threads or os.cpu_count() or 1
    common = (hparams, args.vocab_size, source_ids, args.target_length, args.beam_size)
    peers = {
        "ctranslate2_float32": lambda: ctranslate2_decode_run(
            *common, args.alpha, "float32", threads),
        "ctranslate2_int8": lambda: ctranslate2_decode_run(*common, args.alpha, "int8", threads),
        "torch": lambda: torch_decode_run(*common, threads),
    }
    return {name: make() for name, make in _select(peers, args).items()}


def train_peer_runs(args, hparams) -> Dict[str, Callable[[], None]]:
    """The training peer, prepared: {"torch": run}."""
    threads = args.intra_threads or os.cpu_count() or 1
    peers = {"torch": lambda: torch_train_run(hparams, args.vocab_size, args.batch,
                                              args.length, threads)}
    return {name: make() for name, make in _select(peers, args).items()}


def _select(peers, args):
    """The peers named by ``--peers`` (all by default)."""
    names = [name for name in (getattr(args, "peers", "") or "").split(",") if name]
    return {name: peers[name] for name in peers if not names or name in names}


def paired_seconds(runs: Dict[str, Callable[[], object]], rounds: int,
                   pause: float = PAUSE_SECONDS) -> Dict[str, List[float]]:
    """Wall seconds of each of ``runs`` over ``rounds`` rounds. In each round every one
    has a turn: ``pause`` seconds of idle, one untimed run, then the timed run, so that
    each is timed warm, right after its own work, as in back-to-back batch translation
    (and not just after idling or after another library's work). Returns {name: [seconds
    per round]}."""
    seconds: Dict[str, List[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            time.sleep(pause)
            run()
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def compare_paired(t2t_run: Callable[[], object], peer_runs: Dict[str, Callable[[], None]],
                   rounds: int, tokens: int,
                   pause: float = PAUSE_SECONDS) -> Dict[str, float]:
    """Times t2t-lite and the peers in paired rounds (``paired_seconds``) and prints each
    one's median seconds and tokens/s, every round's ratio (a peer's seconds over
    t2t-lite's in the same round) and one ``ratio_vs_NAME=R`` line per peer, R the median
    of its per-round ratios (> 1: t2t-lite is faster). Returns {name: R}."""
    seconds = paired_seconds({"t2t-lite": t2t_run, **peer_runs}, rounds, pause)
    ours = seconds.pop("t2t-lite")
    median = statistics.median(ours)
    print(f"t2t-lite: {median:.3f} s, tgt_tok_s={tokens / median:.0f} (median of {rounds} "
          f"round(s), each timing t2t-lite and every peer in turn)", flush=True)
    ratios = {}
    for name, times in seconds.items():
        per_round = [theirs / mine for theirs, mine in zip(times, ours)]
        ratios[name] = statistics.median(per_round)
        peer_median = statistics.median(times)
        print(f"peer {name}: {peer_median:.3f} s, tgt_tok_s={tokens / peer_median:.0f}",
              flush=True)
        print(f"rounds vs {name}: " + " ".join(f"{r:.3f}" for r in per_round), flush=True)
    for name, ratio in ratios.items():
        print(f"ratio_vs_{name}={ratio:.3f}", flush=True)
    return ratios
