"""``t2t-lite-decoder``: translate a file (or stdin) with a trained run, one line per line.

    t2t-lite-decoder --output_dir=runs/numbers_tiny < input.en > output.de
    t2t-lite-decoder --output_dir=RUN --checkpoint_path=RUN/averaged/ckpt-avg \\
        --decode_from_file=test.en --decode_to_file=test.hyp.de --decode_reference=test.de \\
        --decode_hparams="beam_size=4,alpha=0.6,extra_length=50,batch_size=4096"

Everything about the model comes from the run directory (``run_config.json``, the
vocabulary, the latest checkpoint or ``--checkpoint_path``). Decode hparams start from
the problem's defaults (translation: beam 4, alpha 0.6, extra length 50).

Exactly one output line per input line, in input order, written as it is made: the
input is translated in consecutive chunks (about 32 batches' worth of tokens), each
chunk's lines written and flushed once it is done (``| head -1`` ends the decoder after
a chunk, with status 141). An empty or whitespace-only line gives an empty
line; a line with more tokens than ``max_input_length`` (default: the model's
``hparams.max_length``) is truncated, with a warning naming the line; a line that
is not valid UTF-8 is decoded with U+FFFD for its bad bytes, with a warning naming the
line. Each output line is ``problem.postprocess_decode(source, hypothesis)``; with
``return_beams=true`` it is ``beam_size`` tab-separated ``hypothesis<TAB>score`` pairs.
The search obeys ``problem.decode_constraint`` (parsing: well-formed trees only), and
``problem.postprocess_report`` goes to stderr (parsing: ``repaired k of n outputs``).

``--decode_hparams=sampling_method=random,num_samples=M,seed=S`` draws ``M`` random
samples per line instead of searching (``sampling_temp``, ``sampling_topk``,
``sampling_topp``; docs/decoding.md); more than one are written like ``return_beams``'s
lists. With a seed, a line's samples do not depend on the batching nor on the other lines.

``--decode_prefix_file=FILE`` (one line per input line; an empty line: no prefix) starts
each output with its line's prefix and lets the search (or the sampling) continue it; the
output includes the prefix, and the problem's constraint (parsing: a well-formed tree)
covers prefix and continuation. A prefix that leaves no room for EOS or that the
constraint refuses is an error naming its line.

Ensembles: ``--checkpoint_path=A,B,...`` (checkpoints of the run in ``--output_dir``) or
``--ensemble_dirs=RUN1,RUN2,...`` (in place of ``--output_dir``: each run's default
checkpoint; the first run gives the problem and decode defaults) decode with the members
together: each step's log-probabilities are the mean of the members' log-probabilities,
renormalised (``t2t_lite.decoding.ensemble``), in every mode above and below, with
``--jit_compile`` and ``--quantize=int8`` (every member quantized). Members may differ in
hparams but must share the problem and the vocabulary file; ``--attention_dir`` takes a
single model.

Scoring: ``--score_file=FILE`` (``source<TAB>target`` lines) or ``--score_target_file=TGT``
(targets aligned with the input lines) writes, per line, the target's log-probability
under the model (EOS included) and its length-normalised score (GNMT penalty with the
decode hparams' ``alpha``) as ``LOGPROB<TAB>NORMALISED``.

``--decode_reference=FILE`` scores the raw hypotheses against ``problem.read_references``
with the problem's metrics (BLEU: sacreBLEU's score and signature; parsing: EVALB's
``parse_f1`` against the gold trees of a ``.mrg`` or one-tree-a-line file, see
docs/parsing.md). The score goes to stdout when translations go to ``--decode_to_file``,
else to stderr.

Failures come before the work. Before TensorFlow starts (a mistake is one error line
within a second): the run directory (every ensemble member's, their checkpoints'
existence, problem and vocabulary), ``--quantize``, the names and values of
``--decode_hparams``, that the flags choosing the mode agree (scoring takes no
``--decode_reference``, ``--attention_dir``, ``--decode_prefix_file`` or sampling), that
the input, reference, prefix and scoring files can be read (or that stdin is open) and
that ``--decode_to_file`` can be created. Before decoding starts:
``--decode_to_file`` is opened as a temporary file beside it (renamed onto it once every
line is written, removed on any failure, so an existing file is never lost) and the
references and the prefixes are counted against the input.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, TextIO, Tuple

from t2t_lite.commands.common import command_parser, require, run_command, sigterm_raises
from t2t_lite.commands.quantize_flag import add_quantize_flag, prepare_decoder_command
from t2t_lite.errors import UserError
from t2t_lite.user_paths import AtomicOutput, creatable_file, path_error, readable_file

MAX_WARNINGS = 20  # warnings of one kind printed line by line, then counted
CHUNK_BATCHES = 32  # output written every this many batches' worth of input tokens (as --help says)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("t2t-lite-decoder", __doc__, run_dir=True)
    parser.add_argument("--output_dir", help="run directory written by t2t-lite-trainer")
    parser.add_argument("--checkpoint_path", default="",
                        help="checkpoint prefix (e.g. RUN/ckpt-7 or one written by "
                             "t2t-lite-avg-checkpoints) or RUN/best (the best dev score's "
                             "model the trainer kept); default: the run's latest. Several, "
                             "separated by commas, decode as an ensemble")
    parser.add_argument("--ensemble_dirs", default="", metavar="RUN1,RUN2,...",
                        help="decode with an ensemble of these runs (each with its default "
                             "checkpoint) instead of --output_dir; they must share the "
                             "problem and the vocabulary")
    parser.add_argument("--decode_from_file", default="",
                        help="input sentences, one per line (default: stdin)")
    parser.add_argument("--decode_to_file", default="",
                        help="where to write the translations (default: stdout)")
    parser.add_argument("--decode_hparams", default="",
                        help="over the run's defaults (the problem's, then its hparams "
                             "set's decode_beam_size and decode_alpha), e.g. "
                             "'beam_size=4,alpha=0.6,extra_length=50,batch_size=4096,"
                             "return_beams=false,max_input_length=0'")
    parser.add_argument("--decode_reference", default="",
                        help="references, one per input line: print the problem's "
                             "metrics (sacreBLEU with its signature; for parsing, EVALB's "
                             "scores against gold trees: a .mrg file or one tree a line)")
    parser.add_argument("--attention_dir", default="",
                        help="also write attention heatmaps (one PNG per sentence, kind and "
                             "layer) and an interactive index.html for the translated lines")
    parser.add_argument("--attention_sentences", type=int, default=20,
                        help="with --attention_dir: how many translated lines to draw")
    parser.add_argument("--decode_prefix_file", default="",
                        help="output prefixes, one per input line (empty line: none): "
                             "each output starts with its prefix, the search continues it")
    parser.add_argument("--score_file", default="",
                        help="score given translations instead of decoding: lines "
                             "'source<TAB>target'; writes 'LOGPROB<TAB>NORMALISED' per line")
    parser.add_argument("--score_target_file", default="",
                        help="score these targets (one per input line) given the input "
                             "lines instead of decoding; writes 'LOGPROB<TAB>NORMALISED'")
    parser.add_argument("--jit_compile", action="store_true",
                        help="compile the search with XLA (worth it on GPUs)")
    add_quantize_flag(parser)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(build_parser(), argv, decode, check=require_run_flags,
                       before_tensorflow=check_before_tensorflow)


def require_run_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--output_dir`` is required unless ``--ensemble_dirs`` names the runs."""
    if not args.ensemble_dirs:
        require(parser, args, "output_dir")


def check_before_tensorflow(args: argparse.Namespace) -> None:
    """What needs no TensorFlow, checked before it starts: ``prepare_decoder_command``
    (run directory, ``--quantize``, ``--decode_hparams``, oneDNN), the input (a readable
    file or an open stdin), the references, and that ``--decode_to_file`` can be created.
    Creates nothing; the checks where the files are used still run. An ensemble's members
    are checked first (``check_ensemble_flags``); with ``--ensemble_dirs`` the first run
    stands for ``--output_dir`` from then on."""
    check_ensemble_flags(args)
    prepare_decoder_command(args)
    check_mode_flags(args)
    if args.score_file:
        readable_file(args.score_file, "--score_file")
    elif args.decode_from_file:
        readable_file(args.decode_from_file, "--decode_from_file")
    elif sys.stdin is None:
        raise closed_stdin()
    if args.score_target_file:
        readable_file(args.score_target_file, "--score_target_file")
    if args.decode_prefix_file:
        readable_file(args.decode_prefix_file, "--decode_prefix_file")
    if args.decode_reference:
        readable_file(args.decode_reference, "--decode_reference")
    if args.decode_to_file:
        creatable_file(args.decode_to_file, "--decode_to_file")


def check_ensemble_flags(args: argparse.Namespace) -> None:
    """Sets ``args.members`` (``t2t_lite.runs.ensemble_members``: one, or an ensemble's)
    after checking them without TensorFlow: their run directories and recorded
    ``--t2t_usr_dir``s, named checkpoints, shared problem and vocabulary. With
    ``--ensemble_dirs`` sets ``args.output_dir`` to its first run. An ensemble takes no
    ``--attention_dir``."""
    from t2t_lite.runs.ensemble_members import check_members, ensemble_members
    from t2t_lite.usr_dir import check_run_usr_dir
    args.members = ensemble_members(args.output_dir, args.checkpoint_path, args.ensemble_dirs)
    if args.ensemble_dirs:
        args.output_dir = args.members[0].run_dir
    if len(args.members) == 1:
        return
    if args.attention_dir:
        raise UserError("--attention_dir draws one model's attention; decode with one "
                        "checkpoint (not an ensemble) to draw it, or drop --attention_dir")
    check_members(args.members)
    for run_dir in dict.fromkeys(member.run_dir for member in args.members):
        check_run_usr_dir(run_dir, args.t2t_usr_dir)


def check_mode_flags(args: argparse.Namespace) -> None:
    """Flags that choose what the decoder does must not contradict each other: scoring
    (``--score_file`` or ``--score_target_file``, not both) writes scores, so it takes no
    ``--decode_reference``, ``--attention_dir``, ``--decode_from_file`` beside
    ``--score_file``, nor ``sampling_method=random``."""
    from t2t_lite.decoding import parse_decode_hparams
    scoring = args.score_file or args.score_target_file
    if not scoring:
        return
    if args.score_file and args.score_target_file:
        raise UserError("--score_file and --score_target_file both given; give one: "
                        "--score_file=PAIRS, or --decode_from_file=SRC "
                        "--score_target_file=TGT")
    if args.score_file and args.decode_from_file:
        raise UserError("--score_file holds the sources; drop --decode_from_file (or use "
                        "--decode_from_file=SRC --score_target_file=TGT)")
    if args.decode_prefix_file:
        raise UserError("--decode_prefix_file starts decoded outputs; scoring decodes "
                        "nothing, so drop --decode_prefix_file or the scoring flag")
    for flag in ("decode_reference", "attention_dir"):
        if getattr(args, flag):
            raise UserError(f"--{flag} needs translations; scoring writes scores, so drop "
                            f"--{flag} or the scoring flag")
    scoring_hparams = parse_decode_hparams(args.decode_hparams)
    if scoring_hparams.sampling or scoring_hparams.mbr:
        flag = "sampling_method=random" if scoring_hparams.sampling else "mbr=true"
        raise UserError(f"scoring takes no --decode_hparams={flag}; drop it")


def decode(args: argparse.Namespace) -> None:
    """The decoder's work for parsed flags, after ``check_before_tensorflow``; user
    errors raise (reported by ``main``)."""
    # Opened before any work: an unwritable path fails now, and an existing file is only
    # replaced (by rename) once every translation is written.
    output = AtomicOutput(args.decode_to_file, "--decode_to_file") if args.decode_to_file else None
    with sigterm_raises(), output or contextlib.nullcontext():  # SIGTERM: temp file removed
        _decode(args, output)


def _decode(args: argparse.Namespace, output: Optional[AtomicOutput]) -> None:
    """``decode`` once the output file is open (``None``: stdout)."""
    from tqdm import tqdm

    from t2t_lite.decoding import parse_decode_hparams
    from t2t_lite.decoding.lines import decode_lines, is_blank, split_lines
    from t2t_lite.decoding.translator import Translator
    from t2t_lite.runs.loading import load_trained_model
    from t2t_lite.usr_dir import import_run_usr_dir

    members = getattr(args, "members", None) or []
    if len(members) > 1:
        run_config, problem, model, vocabulary = load_ensemble(args)
    else:
        import_run_usr_dir(args.output_dir, args.t2t_usr_dir)
        run_config, problem, model, vocabulary = load_trained_model(
            args.output_dir, args.checkpoint_path or None)
        if args.quantize == "int8":
            quantize_int8([model], args.jit_compile)
    hp = parse_decode_hparams(args.decode_hparams, problem.decode_defaults,
                              run_config.resolved_hparams())
    if args.score_file:
        source_name = args.score_file
        data = read_input_file(args.score_file, "--score_file")
    else:
        source_name = args.decode_from_file or "<stdin>"
        data = read_input_file(args.decode_from_file) if args.decode_from_file else read_stdin()
    sources, bad_lines = decode_lines(split_lines(data))
    warn_lines((f"{source_name}: {bad}" for bad in bad_lines), "lines not valid UTF-8")
    if args.score_file or args.score_target_file:
        _score(args, output, model, vocabulary, hp, sources, source_name)
        return
    references = (read_aligned_references(problem, args.decode_reference, len(sources))
                  if args.decode_reference else None)
    prefix_texts = (read_aligned_prefixes(args.decode_prefix_file, source_name, len(sources))
                    if args.decode_prefix_file else None)

    translator = Translator.from_decode_hparams(
        model, vocabulary, hp, jit_compile=args.jit_compile,
        constraint=problem.decode_constraint(vocabulary))
    todo = [index for index, text in enumerate(sources) if not is_blank(text)]
    encoded, truncations = translator.encode([sources[index] for index in todo])
    warn_lines((f"{source_name}: line {todo[cut.index] + 1}: {cut.num_tokens} tokens (EOS "
               f"included) exceed max_input_length={translator.max_input_length}; truncated "
               f"to {cut.kept} (raise --decode_hparams=max_input_length=N)"
               for cut in truncations), "truncated lines")

    prefixes = None
    if prefix_texts is not None:
        prefixes = dict(zip(todo, (list(ids) for ids in vocabulary.encode_batch(
            [prefix_texts[index] for index in todo]))))
    with tqdm(total=len(todo), unit="sent", desc="decoding", file=sys.stderr,
              dynamic_ncols=True) as bar:
        hypotheses, seconds = translate_and_write(
            translator, todo, encoded, len(sources),
            format_line=lambda index, beams: format_output(
                problem, sources[index], beams, hp.return_beams or hp.num_samples > 1),
            output=output, prefixes=prefixes,
            progress=lambda done: (bar.update(done), stop_if_reader_gone(output)))
    if output is not None:
        output.commit()
    else:
        stop_if_reader_gone(output)   # all of it fitted in the pipe, but no one reads it
    print(f"decoded {len(sources)} lines ({len(todo)} translated, "
          f"{len(sources) - len(todo)} blank) in {seconds:.1f}s, "
          f"{len(todo) / max(seconds, 1e-9):.1f} sentences/s "
          f"[{hp.to_string()}]", file=sys.stderr)
    report = problem.postprocess_report(sources, hypotheses)
    if report:
        print(report, file=sys.stderr)

    if args.attention_dir:
        from t2t_lite.monitoring.html_report import write_decoder_attention
        path = write_decoder_attention(model, vocabulary, [sources[i] for i in todo], encoded,
                                       [hypotheses[i] for i in todo], args.attention_dir,
                                       args.attention_sentences)
        print(f"attention of {min(len(todo), args.attention_sentences)} sentences: {path}",
              file=sys.stderr)

    if args.decode_reference:
        report = score_report(problem, hypotheses, sources, args.decode_reference,
                              references)
        print(report, file=sys.stdout if args.decode_to_file else sys.stderr)


def load_ensemble(args: argparse.Namespace):
    """(run_config, problem, ``Ensemble`` of the restored members, vocabulary) of
    ``args.members`` (quantized to int8 with ``--quantize=int8``); the first member gives
    the run configuration (so its hparams set's decode defaults), the problem and the
    vocabulary (the others share the last two: ``check_members``). Prints which
    checkpoints."""
    from t2t_lite.decoding.ensemble import Ensemble
    from t2t_lite.runs.loading import load_trained_runs
    from t2t_lite.usr_dir import import_run_usr_dir

    for run_dir in dict.fromkeys(member.run_dir for member in args.members):
        import_run_usr_dir(run_dir, args.t2t_usr_dir)
    runs = load_trained_runs(args.members)
    print(f"ensemble of {len(runs)}: {', '.join(run.checkpoint for run in runs)}",
          file=sys.stderr)
    if args.quantize == "int8":
        quantize_int8([run.model for run in runs], args.jit_compile)
    return (runs[0].run_config, runs[0].problem, Ensemble([run.model for run in runs]),
            runs[0].vocabulary)


def quantize_int8(models: Sequence, jit_compile: bool) -> None:
    """Quantizes each model's matmul weights to int8 in place and prints the first one's
    summary line (marked ``(every member)`` for an ensemble)."""
    from t2t_lite.layers.quantization import describe_quantization, quantize_model
    summaries = [quantize_model(model) for model in models]
    every = " (every member)" if len(models) > 1 else ""
    print(f"{describe_quantization(summaries[0], jit_compile)}{every}", file=sys.stderr)


def translate_and_write(translator, todo: Sequence[int], encoded: Sequence[Sequence[int]],
                        num_lines: int, format_line: Callable[[int, list], str],
                        output: Optional[AtomicOutput],
                        progress: Callable[[int], None],
                        prefixes: Optional[Dict[int, List[int]]] = None
                        ) -> Tuple[List[str], float]:
    """Translates the lines ``todo`` (``encoded[j]`` is line ``todo[j]``'s ids; the other
    of the ``num_lines`` lines are blank) and writes all ``num_lines`` output lines, in
    input order, to ``output`` (``None``: stdout) as they are done: a chunk of lines
    (``lines.chunks``: about ``CHUNK_BATCHES`` batches' worth of padded tokens) at a time,
    flushed, so that a reader of stdout gets the first lines early and ``| head -1`` ends
    the decoder after a chunk. A line's output is ``format_line(line index, its
    hypotheses)``, blank lines give "". Returns each line's best hypothesis ("" for
    blank lines) and the seconds spent translating."""
    from t2t_lite.decoding.lines import chunks

    line_of = dict(zip(todo, range(len(todo))))   # line index -> index into encoded
    costs = [0] * num_lines
    for index, ids in zip(todo, encoded):
        costs[index] = translator.bucket_for(len(ids))
    hypotheses = [""] * num_lines
    seconds = 0.0
    for lines in chunks(costs, CHUNK_BATCHES * translator.batch_size):
        chunk = [index for index in lines if index in line_of]
        start = time.perf_counter()
        nbest = translator.translate_encoded(
            [encoded[line_of[index]] for index in chunk], progress=progress,
            sentence_ids=chunk,
            prefixes=None if prefixes is None else [prefixes[index] for index in chunk])
        seconds += time.perf_counter() - start
        outputs = {}
        for index, beams in zip(chunk, nbest):
            hypotheses[index] = beams[0][0] if beams else ""
            outputs[index] = format_line(index, beams)
        text = "".join(outputs.get(index, "") + "\n" for index in lines).encode("utf-8")
        if output is not None:
            output.write(text)
        else:
            sys.stdout.buffer.write(text)
            sys.stdout.buffer.flush()
    return hypotheses, seconds


def write_output_lines(outputs: Sequence[str], output: Optional[AtomicOutput]) -> None:
    """Writes one line per entry of ``outputs`` to ``output`` (committed) or stdout."""
    text = "".join(line + "\n" for line in outputs).encode("utf-8")
    if output is not None:
        output.write(text)
        output.commit()
    else:
        sys.stdout.buffer.write(text)
        sys.stdout.buffer.flush()
        stop_if_reader_gone(output)   # all of it fitted in the pipe, but no one reads it


def _score(args: argparse.Namespace, output: Optional[AtomicOutput], model, vocabulary, hp,
           lines: List[str], source_name: str) -> None:
    """Scoring mode: ``LOGPROB<TAB>NORMALISED`` per pair (``t2t_lite.decoding.scoring``)."""
    from t2t_lite.decoding.lines import decode_lines, split_lines
    from t2t_lite.decoding.scoring import Scorer, format_score, split_pairs

    if args.score_file:
        sources, targets = split_pairs(lines, args.score_file)
    else:
        sources = lines
        targets, bad_lines = decode_lines(split_lines(
            read_input_file(args.score_target_file, "--score_target_file")))
        warn_lines((f"{args.score_target_file}: {bad}" for bad in bad_lines),
                   "lines not valid UTF-8")
        if len(targets) != len(sources):
            raise UserError(f"--score_target_file={args.score_target_file} has "
                            f"{len(targets)} lines but {source_name} has {len(sources)}; "
                            f"they must align line by line")
    scorer = Scorer(model, vocabulary, alpha=hp.alpha, max_input_length=hp.max_input_length,
                    batch_size=hp.batch_size)
    start = time.perf_counter()
    scores = scorer.score(sources, targets)
    seconds = time.perf_counter() - start
    write_output_lines([format_score(score) for score in scores], output)
    print(f"scored {len(scores)} lines in {seconds:.1f}s [alpha={hp.alpha}]", file=sys.stderr)


def stop_if_reader_gone(output: Optional[AtomicOutput]) -> None:
    """Writing to stdout (``output`` is None) piped to a reader that has gone (``| head``):
    raises ``BrokenPipeError`` (exit status 141) instead of translating for nobody."""
    from t2t_lite.decoding.lines import reader_gone
    if output is None and reader_gone(sys.stdout):
        raise BrokenPipeError("stdout's reader has gone")


def format_output(problem, source: str, beams, return_beams: bool) -> str:
    """The output line of one translated sentence (best, or tab-separated N-best)."""
    from t2t_lite.decoding.lines import one_line
    if not return_beams:
        return one_line(problem.postprocess_decode(source, beams[0][0]) if beams else "")
    return "\t".join(f"{one_line(problem.postprocess_decode(source, text), chr(9))}\t"
                     f"{score:.6g}" for text, score in beams)


def read_input_file(path: str, flag: str = "--decode_from_file") -> bytes:
    """The bytes of the input file ``flag`` names; an unreadable file is one error line."""
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise path_error(flag, path, error, "give a file you can read") from None


def read_stdin() -> bytes:
    """All of stdin; a closed stdin (``<&-``) is a user error naming the fix."""
    if sys.stdin is None:
        raise closed_stdin()
    try:
        return sys.stdin.buffer.read()
    except OSError as error:  # EBADF and the like: not a readable stdin
        raise UserError(f"cannot read stdin ({error.strerror or error}); give "
                        f"--decode_from_file=FILE or pipe the sentences in") from None


def closed_stdin() -> UserError:
    return UserError("stdin is closed and no --decode_from_file was given; give "
                     "--decode_from_file=FILE or pipe the sentences in")


def read_aligned_prefixes(path: str, source_name: str, num_lines: int) -> List[str]:
    """The lines of ``--decode_prefix_file``, one per input line (checked)."""
    from t2t_lite.decoding.lines import decode_lines, split_lines
    prefixes, bad_lines = decode_lines(split_lines(read_input_file(path,
                                                                   "--decode_prefix_file")))
    warn_lines((f"{path}: {bad}" for bad in bad_lines), "lines not valid UTF-8")
    if len(prefixes) != num_lines:
        raise UserError(f"--decode_prefix_file={path} has {len(prefixes)} lines but "
                        f"{source_name} has {num_lines}; they must align line by line "
                        f"(an empty line: no prefix)")
    return prefixes


def read_aligned_references(problem, reference_path: str, num_lines: int) -> List[str]:
    """The references of ``--decode_reference``, checked before decoding: one per input
    line, and a problem with metrics to score them with."""
    if not problem.eval_metrics:
        raise UserError(f"problem {problem.name} names no eval_metrics to score "
                        f"--decode_reference with")
    try:
        references = problem.read_references(reference_path)
    except OSError as error:
        raise path_error("--decode_reference", reference_path, error,
                         "give a file you can read") from None
    if len(references) != num_lines:
        raise UserError(f"--decode_reference={reference_path} has {len(references)} "
                        f"references but the input has {num_lines} lines; they must "
                        f"align line by line")
    return references


def score_report(problem, hypotheses: Sequence[str], sources: Sequence[str],
                 reference_path: str, references: Optional[Sequence[str]] = None) -> str:
    """The problem's metrics of the raw hypotheses; BLEU with sacreBLEU's signature, mixed
    case and lowercased.

    ``references`` as read by ``read_aligned_references`` (read here when ``None``)."""
    from t2t_lite.metrics.bleu import corpus_bleu
    from t2t_lite.metrics.text_metrics import score_texts

    if references is None:
        references = read_aligned_references(problem, reference_path, len(hypotheses))
    hypotheses = problem.metric_hypotheses(sources, hypotheses)
    lines = []
    for name in problem.eval_metrics:
        if name == "bleu":  # mixed case, then lowercased (sacreBLEU's -lc)
            lines.extend(str(corpus_bleu(hypotheses, references, lowercase=lowercase))
                         for lowercase in (False, True))
        else:
            scores = score_texts((name,), hypotheses, references, sources)
            lines.extend(f"{key} = {value:.4f}" for key, value in scores.items())
    return "\n".join(lines)


def warn_lines(messages: Iterable[str], what: str, stream: Optional[TextIO] = None) -> None:
    """Prints up to ``MAX_WARNINGS`` warnings, then how many more ``what`` there were."""
    stream = stream or sys.stderr
    count = 0
    for message in messages:
        count += 1
        if count <= MAX_WARNINGS:
            print(f"warning: {message}", file=stream)
    if count > MAX_WARNINGS:
        print(f"warning: ... and {count - MAX_WARNINGS} more {what} ({count} in all)",
              file=stream)


if __name__ == "__main__":
    sys.exit(main())
