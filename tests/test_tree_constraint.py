"""Constrained decoding for parsing: the tree state machine on a hand-built vocabulary,
beam and greedy search with random logits (every output a well-formed tree over the right
number of words), agreement with the unconstrained search when its best is already valid,
and the real Transformer through the Translator (growing and preallocated caches) and the
exported SavedModel with a SentencePiece parsing vocabulary."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data.problem import get_problem
from t2t_lite.data.vocab import EOS_ID, load_vocabulary
from t2t_lite.decoding import DecodingPlan, DecodingState, beam_search, greedy_search
from t2t_lite.decoding.translator import Translator
from t2t_lite.models.transformer import Transformer
from t2t_lite.parsing.constraint import TreeConstraint
from t2t_lite.parsing.linearize import (LinearizationError, delinearize,
                                        placeholders_from_words)

S = "\u2581"
PIECES = ["<pad>", "</s>", "<unk>", S + "XX", S + "(S", S + ")S", S + "(NP", S + ")NP",
          S + "(VP", S + ")VP", S + "the", S + "dog", "s", S, "<0x28>", S + "(ORPHAN",
          "XX", S + ")"]
ID = {piece: index for index, piece in enumerate(PIECES)}
V = len(PIECES)
OPENS = {S + "(S", S + "(NP", S + "(VP"}   # not (ORPHAN: it has no closer


def constraint(max_depth=8):
    return TreeConstraint(PIECES, EOS_ID, control_ids=[0, 1], unknown_ids=[2],
                          max_depth=max_depth)


def target_tokens(ids, pieces=PIECES):
    """Linearised tokens of an output id row (up to EOS)."""
    tokens = []
    for index in ids:
        if index == EOS_ID:
            break
        tokens.append(pieces[index].replace(S, " ").strip())
    return tokens


def is_tree_over(ids, num_words, pieces=PIECES):
    ids = [int(i) for i in ids]
    if EOS_ID not in ids:
        return False
    if num_words == 0:
        return ids[0] == EOS_ID
    try:
        delinearize(target_tokens(ids, pieces), [f"w{i}" for i in range(num_words)])
    except LinearizationError:
        return False
    return True


def source(num_words):
    """Source ids of ``num_words`` words (``the dog s`` pieces), EOS, padded to 12."""
    row = []
    for n in range(num_words):
        row += [ID[S + "dog"], ID["s"]] if n % 2 else [ID[S + "the"]]
    return row + [EOS_ID] + [0] * (12 - len(row) - 1)


def allowed_after(machine, tokens, num_words, decode_length=40):
    state = machine.initial_state(tf.constant([source(num_words)]), tf.constant([decode_length]))
    for token in tokens:
        state = machine.update(state, tf.constant([ID[token]]))
    budget = tf.constant([decode_length - len(tokens)])
    return {PIECES[i] for i in np.flatnonzero(machine.allowed(state, budget).numpy()[0])}


def test_word_counts_follow_str_split():
    machine = constraint()
    rows = {
        "the dog": [ID[S + "the"], ID[S + "dog"], EOS_ID, 0],
        "the dogs": [ID[S + "the"], ID[S + "dog"], ID["s"], EOS_ID],
        "  the": [ID[S], ID[S + "the"], EOS_ID, 0],            # leading spaces
        "the (": [ID[S + "the"], ID[S], ID["<0x28>"], EOS_ID],  # a word of byte pieces
        "s the": [ID["s"], ID[S + "the"], EOS_ID, 0],          # no dummy prefix
        "  ": [ID[S], ID[S], EOS_ID, 0],
        "": [EOS_ID, 0, 0, 0],
    }
    counts = machine.word_counts(tf.constant(list(rows.values()))).numpy()
    assert counts.tolist() == [len(text.split()) for text in rows]


def test_mask_follows_the_tree_grammar():
    machine = constraint()
    opens = OPENS
    assert allowed_after(machine, [], 2) == opens
    assert allowed_after(machine, [S + "(S"], 2) == opens | {S + "XX"}
    # One word left: the root may not close yet; an empty bracket may not close.
    assert allowed_after(machine, [S + "(S", S + "XX"], 2) == opens | {S + "XX"}
    assert allowed_after(machine, [S + "(S", S + "(NP"], 2) == opens | {S + "XX"}
    # Closing needs the innermost label; no word left: no new bracket, no XX.
    assert allowed_after(machine, [S + "(S", S + "(NP", S + "XX", S + "XX"], 2) == {S + ")NP"}
    assert allowed_after(machine, [S + "(S", S + "(NP", S + "XX", S + ")NP"], 2) == (
        opens | {S + "XX"})
    assert allowed_after(machine, [S + "(S", S + "(NP", S + "XX", S + ")NP", S + "XX"], 2) == {
        S + ")S"}
    done = [S + "(S", S + "XX", S + "XX", S + ")S"]
    assert allowed_after(machine, done, 2) == {"</s>"}
    assert allowed_after(machine, [], 0) == {"</s>"}     # an empty input: empty output


def test_length_budget_leaves_room_to_close():
    machine = constraint()
    # 2 words in 5 tokens: exactly "(S XX XX )S EOS"; no room for a second bracket.
    # A bracket costs two tokens: "(S (NP XX )NP XX )S EOS" needs 7.
    assert allowed_after(machine, [S + "(S"], 2, decode_length=5) == {S + "XX"}
    assert allowed_after(machine, [S + "(S"], 2, decode_length=6) == {S + "XX"}
    assert allowed_after(machine, [S + "(S"], 2, decode_length=7) == OPENS | {S + "XX"}
    # The depth limit: at max_depth only words and closers.
    deep = constraint(max_depth=2)
    assert allowed_after(deep, [S + "(S", S + "(NP"], 2) == {S + "XX"}
    # At most max_open_run opening brackets in a row; a word or closer starts a new run.
    runs = TreeConstraint(PIECES, EOS_ID, control_ids=[0, 1], unknown_ids=[2],
                          max_open_run=3)
    three = [S + "(S", S + "(NP", S + "(NP"]
    assert allowed_after(runs, three, 2) == {S + "XX"}
    assert allowed_after(runs, three + [S + "XX"], 2) == OPENS | {S + "XX", S + ")NP"}
    assert allowed_after(runs, [S + "(S", S + "(NP", S + "XX", S + ")NP", S + "(VP",
                                S + "(NP"], 2) == OPENS | {S + "XX"}
    # The shortest tree does not fit: the constraint steps aside (repair's job).
    state = machine.initial_state(tf.constant([source(2)]), tf.constant([4]))
    assert not state["active"].numpy()[0]
    assert machine.allowed(state, tf.constant([4])).numpy().all()


def random_step(seed, max_length=40, peak=None, peak_weight=0.0):
    """Logits from a random table indexed by (step, last token); ``peak`` [b, T] adds
    ``peak_weight`` to one token per sentence and step (a model that prefers it)."""
    table = tf.constant(np.random.default_rng(seed).normal(0, 3, [max_length, V, V]),
                        tf.float32)

    def step(ids, i, states, sentence_states):
        logits = tf.gather(table[i], ids)
        if peak is not None:
            rows = tf.shape(ids)[0]
            beams = rows // peak.shape[0]
            wanted = tf.repeat(tf.constant(peak)[:, i], beams)
            logits += peak_weight * tf.one_hot(wanted, V)
        return logits, states

    return step


WORDS = [1, 3, 6, 0, 2]
LENGTHS = [4, 9, 40, 10, 5]   # 1 word in 4 tokens and 2 in 5: exactly (S XX.. )S EOS


def search(kind, step, constrained, beam_size=4, words=WORDS, lengths=LENGTHS, **kwargs):
    inputs = tf.constant([source(n) for n in words])
    decode_length = tf.constant(lengths)
    extra = {}
    if constrained:
        machine = constraint()
        extra = dict(constraint=machine,
                     constraint_state=machine.initial_state(inputs, decode_length))
    start = tf.zeros([len(words)], tf.int32)
    if kind == "greedy":
        ids, scores = greedy_search(step, DecodingState(start), DecodingPlan(),
                                    decode_length, eos_id=EOS_ID, max_length=40, **extra,
                                    **kwargs)
        return ids.numpy()[:, None], scores.numpy()[:, None]
    ids, scores = beam_search(step, DecodingState(start), DecodingPlan(beam_size),
                              decode_length, 0.6, eos_id=EOS_ID, max_length=40, **extra,
                              **kwargs)
    return ids.numpy(), scores.numpy()


@pytest.mark.parametrize("kind", ["greedy", "beam"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_output_of_a_random_model_is_a_tree_over_the_words(kind, seed):
    options = {} if kind == "greedy" else {"stop_early": seed != 2}  # 2: full N-best lists
    ids, scores = search(kind, random_step(seed), True, **options)
    unconstrained, _ = search(kind, random_step(seed), False)
    for row, (num_words, length) in enumerate(zip(WORDS, LENGTHS)):
        finite = np.isfinite(scores[row])
        assert finite[0]
        for hypothesis in ids[row][finite]:
            assert is_tree_over(hypothesis, num_words), target_tokens(hypothesis)
            assert list(hypothesis).index(EOS_ID) < length
    # Random logits almost never give a tree by themselves.
    assert not all(is_tree_over(ids_, n) for ids_, n in zip(unconstrained[:, 0], WORDS))


@pytest.mark.slow
def test_constrained_search_compiles_with_xla():
    step = random_step(3)
    inputs = tf.constant([source(n) for n in WORDS])
    machine = constraint()

    @tf.function(jit_compile=True, autograph=False)
    def run(inputs, decode_length):
        return beam_search(step, DecodingState(tf.zeros([len(WORDS)], tf.int32)),
                           DecodingPlan(3), decode_length, 0.6,
                           eos_id=EOS_ID, max_length=40, constraint=machine,
                           constraint_state=machine.initial_state(inputs, decode_length))

    ids, scores = run(inputs, tf.constant(LENGTHS))
    eager_ids, eager_scores = search("beam", step, True, beam_size=3)
    np.testing.assert_array_equal(ids.numpy(), eager_ids)
    np.testing.assert_allclose(scores.numpy(), eager_scores, rtol=1e-5)
    for row, num_words in enumerate(WORDS):
        assert is_tree_over(ids.numpy()[row, 0], num_words)


def valid_targets(words, width=40):
    """A well-formed target per sentence: (S (NP XX )NP XX ... )S, as ids padded with EOS."""
    rows = []
    for n in words:
        if n == 0:
            tokens = []
        else:
            tokens = [S + "(S", S + "(NP", S + "XX", S + ")NP"] + [S + "XX"] * (n - 1) + [S + ")S"]
        row = [ID[t] for t in tokens] + [EOS_ID]
        rows.append(row + [EOS_ID] * (width - len(row)))
    return np.array(rows, np.int32)


@pytest.mark.parametrize("kind", ["greedy", "beam"])
def test_constrained_and_unconstrained_agree_when_the_best_is_valid(kind):
    words, lengths = [1, 3, 6, 0], [20, 20, 40, 10]
    peak = valid_targets(words)
    step = random_step(5, peak=peak, peak_weight=12.0)
    free_ids, free_scores = search(kind, step, False, words=words, lengths=lengths)
    ids, scores = search(kind, step, True, words=words, lengths=lengths)
    for row, n in enumerate(words):
        assert is_tree_over(free_ids[row, 0], n)   # the unconstrained best is valid
    np.testing.assert_array_equal(ids[:, 0], free_ids[:, 0])
    np.testing.assert_allclose(scores[:, 0], free_scores[:, 0], rtol=1e-6)


def test_greedy_agrees_whenever_its_unconstrained_output_is_valid():
    # A weaker preference: some unconstrained outputs are valid, some are not.
    words, lengths = [1, 3, 6, 2, 4, 5], [20, 20, 40, 10, 30, 12]
    valid = 0
    for seed in range(3):
        step = random_step(seed, peak=valid_targets(words), peak_weight=9.0)
        free_ids, free_scores = search("greedy", step, False, words=words, lengths=lengths)
        ids, scores = search("greedy", step, True, words=words, lengths=lengths)
        for row, n in enumerate(words):
            assert is_tree_over(ids[row, 0], n)
            if is_tree_over(free_ids[row, 0], n):
                valid += 1
                np.testing.assert_array_equal(ids[row, 0], free_ids[row, 0])
                assert scores[row, 0] == pytest.approx(free_scores[row, 0], rel=1e-6)
    assert 0 < valid < 18   # both cases occurred


# Words in the target: the word slot copies the source's pieces -----------------------
def word_constraint(max_depth=8):
    return TreeConstraint(PIECES, EOS_ID, control_ids=[0, 1], unknown_ids=[2],
                          max_depth=max_depth, words_in_target=True)


def test_words_in_target_mask_copies_the_source_pieces():
    machine = word_constraint()
    # source(2) is "the dogs": pieces ▁the | ▁dog s
    def after(tokens, decode_length=40):
        return allowed_after(machine, tokens, 2, decode_length)

    assert after([]) == OPENS
    assert after([S + "(S"]) == OPENS | {S + "the"}
    assert after([S + "(S", S + "the"]) == OPENS | {S + "dog"}   # the root waits for the word
    assert after([S + "(S", S + "the", S + "dog"]) == {"s"}     # inside a word: its next piece
    assert after([S + "(S", S + "(NP", S + "the", S + "dog"]) == {"s"}
    assert after([S + "(S", S + "the", S + "dog", "s"]) == {S + ")S"}
    assert after([S + "(S", S + "the", S + "dog", "s", S + ")S"]) == {"</s>"}
    # The budget counts pieces: (S ▁the ▁dog s )S EOS is 6 tokens; a bracket costs 2.
    assert after([S + "(S"], decode_length=6) == {S + "the"}
    assert after([S + "(S"], decode_length=7) == {S + "the"}
    assert after([S + "(S"], decode_length=8) == OPENS | {S + "the"}
    state = machine.initial_state(tf.constant([source(2)]), tf.constant([5]))
    assert not state["active"].numpy()[0]
    assert allowed_after(machine, [], 0) == {"</s>"}


def test_a_copied_piece_that_is_also_a_bracket_is_read_as_the_word():
    machine = word_constraint()
    inputs = tf.constant([[ID[S + "(NP"], ID[S + "the"], EOS_ID]])   # the words "(NP the"
    state = machine.initial_state(inputs, tf.constant([20]))
    for token in (S + "(S", S + "(NP"):
        state = machine.update(state, tf.constant([ID[token]]))
    assert state["depth"].numpy()[0] == 1 and state["position"].numpy()[0] == 1
    allowed = machine.allowed(state, tf.constant([18])).numpy()[0]
    assert {PIECES[i] for i in np.flatnonzero(allowed)} == OPENS | {S + "the"}


def test_group_starts_put_space_pieces_with_the_word_after_them():
    machine = word_constraint()
    rows = [[ID[S + "the"], ID[S + "dog"], ID["s"], EOS_ID],
            [ID[S], ID[S + "the"], EOS_ID, 0],                  # "  the": one group
            [ID[S + "the"], ID[S], ID["<0x28>"], EOS_ID],        # "the (": ▁ goes with "("
            [ID["s"], ID[S + "the"], EOS_ID, 0]]                 # no dummy prefix
    starts = machine.group_starts(tf.constant(rows)).numpy().astype(int).tolist()
    assert starts == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]]


BRACKET_IDS = {ID[p] for p in PIECES if p[1:2] in ("(", ")")}


def source_words(row):
    return "".join(PIECES[i] for i in row if i > EOS_ID).replace(S, " ").split()


@pytest.mark.parametrize("kind", ["greedy", "beam"])
@pytest.mark.parametrize("seed", [0, 1])
def test_words_in_target_outputs_copy_the_source_into_a_tree(kind, seed):
    words, lengths = [1, 3, 6, 0, 2], [4, 9, 40, 10, 6]   # 1 and 3 pieces: exact fits
    inputs = tf.constant([source(n) for n in words])
    machine = word_constraint()
    options = dict(constraint=machine,
                   constraint_state=machine.initial_state(inputs, tf.constant(lengths)),
                   eos_id=EOS_ID, max_length=40)
    start = tf.zeros([len(words)], tf.int32)
    if kind == "greedy":
        ids, scores = greedy_search(random_step(seed), DecodingState(start), DecodingPlan(),
                                    tf.constant(lengths), **options)
        ids, scores = ids.numpy()[:, None], scores.numpy()[:, None]
    else:
        ids, scores = beam_search(random_step(seed), DecodingState(start), DecodingPlan(3),
                                  tf.constant(lengths), 0.6, **options)
        ids, scores = ids.numpy(), scores.numpy()
    for row, length in enumerate(lengths):
        assert np.isfinite(scores[row, 0])
        for hypothesis in ids[row][np.isfinite(scores[row])]:
            hypothesis = list(hypothesis[:list(hypothesis).index(EOS_ID)])
            assert len(hypothesis) < length
            content = [i for i in source(words[row]) if i > EOS_ID]
            assert [i for i in hypothesis if i not in BRACKET_IDS] == content
            text = "".join(PIECES[i] for i in hypothesis).replace(S, " ")
            expected = source_words(content)
            if expected:
                delinearize(placeholders_from_words(text, expected), expected)
            else:
                assert text == ""


# The real Transformer and a SentencePiece parsing vocabulary -------------------------
TREES = ["(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S",
         "(S (NP XX )NP (VP XX (PP XX (NP XX XX )NP )PP )VP )S",
         "(NP (NP XX XX )NP (PP XX (NP XX )NP )PP )NP"]
SENTENCES = ["The dog barks .", "a", "Pierre Vinken , 61 years old , will join the board",
             "(hi) there  friend", "Ünïcode wörds ok"]


@pytest.fixture(scope="module")
def parsing_model(tmp_path_factory):
    """(vocabulary, random Transformer). The vocabulary is loaded after the seed is set:
    setting it clears the eager kernel cache that holds the tokenizer's resource."""
    from t2t_lite.parsing.vocab import train_parsing_vocab
    keras.utils.set_random_seed(11)
    texts = TREES + ["The dog barks at the board .", "Pierre Vinken will join the board ."]
    path = tmp_path_factory.mktemp("vocab") / "v.spm.model"
    size = train_parsing_vocab(texts * 30, path, 400).vocab_size
    hparams = registry.hparams("transformer_tiny", "num_hidden_layers=1,hidden_size=32,"
                               "filter_size=64,num_heads=2,max_length=64")
    model = Transformer(hparams, size)
    two_tokens = tf.ones([1, 2], tf.int32)   # a call records the inputs export needs
    model({"inputs": two_tokens, "targets": two_tokens}, training=False)
    return load_vocabulary(path), model


@pytest.fixture(scope="module")
def parsing_vocab(parsing_model):
    return parsing_model[0]


@pytest.fixture(scope="module")
def random_transformer(parsing_model):
    return parsing_model[1]


def assert_trees_over_words(outputs, sentences, words_in_target=False):
    for output, sentence in zip(outputs, sentences):
        words = sentence.split()
        tokens = placeholders_from_words(output, words) if words_in_target else output.split()
        delinearize(tokens, words)  # raises unless well formed
        if words_in_target:          # every word copied, in order, and nothing else
            assert [t for t in output.split() if t[:1] not in "()"] == \
                [w for w in words if w[:1] not in "()"]


def test_parsing_problems_constrain_and_translation_does_not(parsing_vocab):
    machine = get_problem("parsing_english_ptb_sample").decode_constraint(parsing_vocab)
    assert isinstance(machine, TreeConstraint) and {"S", "NP", "VP", "PP"} <= set(machine.labels)
    ids = tf.ragged.constant([row + [EOS_ID] for row in parsing_vocab.encode_batch(SENTENCES)])
    ids = ids.to_tensor()
    assert machine.word_counts(ids).numpy().tolist() == [len(s.split()) for s in SENTENCES]
    assert get_problem("translate_ende_numbers").decode_constraint(parsing_vocab) is None


@pytest.mark.slow
@pytest.mark.parametrize("beam_size,jit_compile,words_in_target", [
    (1, False, False), (3, False, False), (3, True, False), (1, False, True), (3, True, True)])
def test_translator_emits_only_trees_with_a_random_transformer(parsing_vocab, random_transformer,
                                                                beam_size, jit_compile,
                                                                words_in_target):
    # jit_compile=True uses the preallocated self-attention cache, False the growing one.
    options = dict(beam_size=beam_size, alpha=0.3, extra_length=30, jit_compile=jit_compile)
    machine = TreeConstraint.from_vocabulary(parsing_vocab, words_in_target=words_in_target)
    outputs = Translator(random_transformer, parsing_vocab, constraint=machine,
                         **options).translate(SENTENCES)
    assert_trees_over_words(outputs, SENTENCES, words_in_target)
    # Unconstrained, the same random model's outputs are not all trees (a check of the
    # check; without XLA, which saves a compile per source bucket and changes no output).
    free = Translator(random_transformer, parsing_vocab,
                      **dict(options, jit_compile=False)).translate(SENTENCES)
    with pytest.raises((LinearizationError, AssertionError)):
        assert_trees_over_words(free, SENTENCES, words_in_target)


@pytest.mark.slow
def test_exported_savedmodel_emits_only_trees(parsing_vocab, random_transformer, tmp_path):
    # The export carries the same constraint object the translator tests cover in both
    # linearisations; one of them shows it survives the SavedModel.
    words_in_target = True
    from t2t_lite.decoding.config import DecodeHParams
    from t2t_lite.runs.export import export_translator
    hp = DecodeHParams(beam_size=3, alpha=0.3, extra_length=30)
    machine = TreeConstraint.from_vocabulary(parsing_vocab, words_in_target=words_in_target)
    path = export_translator(random_transformer, parsing_vocab, hp, tmp_path / "export",
                             constraint=machine)
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    outputs = serve(sentences=tf.constant(SENTENCES))["translations"].numpy()
    assert_trees_over_words([o.decode("utf-8") for o in outputs], SENTENCES, words_in_target)


def test_repair_summary_counts_outputs_that_needed_repair():
    from t2t_lite.parsing.linearize import repair_summary
    problem = get_problem("parsing_english_ptb_sample")
    sources = ["The dog barks", "a", "   ", "b c"]
    hypotheses = ["(S (NP XX XX )NP (VP XX )VP )S", "(S XX", "", "(S XX XX )S"]
    assert repair_summary(sources, hypotheses) == "repaired 1 of 3 outputs (unclosed_brackets=1)"
    assert problem.postprocess_report(sources[:1], hypotheses[:1]) == "repaired 0 of 1 outputs"
    assert get_problem("translate_ende_numbers").postprocess_report(sources, hypotheses) is None
