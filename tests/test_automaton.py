"""Token automata for fixed-length slots: per-position sets and the constrained (Viterbi) commit."""

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diffreason import TemplateError
from diffreason.constrain import Compiler
from diffreason.tokenizer import train_byte_bpe

TOK = train_byte_bpe()
C = Compiler.for_tokenizer(TOK)
PAD = TOK.pad_token_id
REGEXES = [r"(ab|ba)", r"-?(0|[1-9][0-9]*)", r'"[a-z ]{2,9}"', r"(true|false|null)", r"[0-9]{4}-[0-9]{2}"]


def text(tokens):
    return TOK.decode([t for t in tokens if t != PAD])


def test_per_position_sets_and_commit_of_a_non_factorising_language():
    a = C.automaton("(ab|ba)").with_padding(PAD)
    allowed, _, backward = a.slot_sets(2)
    ids = TOK.convert_tokens_to_ids(["a", "b"])
    assert [x.nonzero().flatten().tolist() for x in allowed] == [sorted(ids)] * 2
    # the model prefers "aa", which the per-position sets allow but the language does not
    lp = torch.full((2, len(TOK)), -20.0)
    lp[:, ids[0]] = 0.0
    lp[1, ids[1]] = -1.0
    path = a.best_path(lp, backward)
    assert text(path) == "ab" and a.accepts(path)


def test_slot_too_short_is_a_clear_error():
    a = C.automaton(r"[0-9]{4}-[0-9]{2}").with_padding(PAD)
    with pytest.raises(TemplateError, match="fits in 1 tokens"):
        a.slot_sets(1)


@settings(max_examples=60, deadline=None)
@given(regex=st.sampled_from(REGEXES), length=st.integers(6, 14), seed=st.integers(0, 10**6))
def test_commit_is_always_a_member_of_the_language(regex, length, seed):
    a = C.automaton(regex).with_padding(PAD)
    allowed, _, backward = a.slot_sets(length)
    g = torch.Generator().manual_seed(seed)
    lp = (torch.randn(length, len(TOK), generator=g) * 3).log_softmax(-1)
    path = a.best_path(lp, backward)
    assert len(path) == length and a.accepts(path)
    assert all(bool(allowed[k][t]) for k, t in enumerate(path))
    assert re.fullmatch(regex, text(path))
    # padding only at the end
    first_pad = path.index(PAD) if PAD in path else length
    assert all(t == PAD for t in path[first_pad:])


def test_commit_maximises_the_score():
    """Brute force over a tiny language: Viterbi picks the best complete path."""
    a = C.automaton(r"(true|false|null)").with_padding(PAD)
    length = 5
    _, _, backward = a.slot_sets(length)
    g = torch.Generator().manual_seed(1)
    lp = torch.randn(length, len(TOK), generator=g).log_softmax(-1)
    best = a.best_path(lp, backward)
    score = lambda p: sum(float(lp[k, t]) for k, t in enumerate(p))  # noqa: E731
    # every word, tokenised every way the automaton allows, padded to the slot
    candidates = []

    def walk(state, k, path):
        if k == length:
            if a.accepting[state]:
                candidates.append(list(path))
            return
        for t, nxt in a.moves_from(state).items():
            walk(nxt, k + 1, path + [t])

    walk(a.initial, 0, [])
    assert candidates and score(best) == pytest.approx(max(score(c) for c in candidates))


@pytest.mark.parametrize("draws", ["reference", "fast"])
def test_engine_commits_regex_slots_that_match(tiny_lm, draws):
    from diffreason import CanvasTemplate, Engine, SamplerConfig

    tok = tiny_lm.tokenizer
    prefix = CanvasTemplate.from_positions(tiny_lm.vocab_size, tok.encode("date: ", add_special_tokens=False))
    regex = r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]"
    template = prefix + CanvasTemplate.from_regex(regex, tok, 14) + CanvasTemplate.from_positions(
        tiny_lm.vocab_size, [tok.eos_token_id]
    )
    engine = Engine(tiny_lm, SamplerConfig(draws=draws, max_denoising_steps=6))
    for seed in range(3):
        res = engine.generate("when?", template=template, seed=seed)
        assert template.violations(res.raw_tokens) == []
        assert res.text.startswith("date: ") and re.fullmatch(regex, res.text[len("date: "):])


def test_slots_must_fit_in_one_canvas(tiny_lm):
    from diffreason import CanvasTemplate, Engine

    C = tiny_lm.canvas_length
    template = CanvasTemplate.unconstrained(C - 3, tiny_lm.vocab_size) + CanvasTemplate.from_regex(
        "[a-z]{3,6}", tiny_lm.tokenizer, 8
    )
    with pytest.raises(TemplateError, match="crosses a canvas boundary"):
        Engine(tiny_lm).generate("x", template=template)


def test_caches_are_bounded_by_bytes_not_count():
    from diffreason.constrain.cache import BytesLRU

    cache, built = BytesLRU(max_bytes=100), []
    build = lambda k: (lambda: built.append(k) or k)  # noqa: E731
    for key in ("a", "b", "c"):
        cache.get(key, build(key), lambda v: 40)
    assert list(cache.items) == ["b", "c"] and cache.bytes == 80  # "a" evicted: 120 bytes > 100
    assert cache.get("b", build("b2"), lambda v: 40) == "b" and built == ["a", "b", "c"]  # a hit builds nothing
    assert cache.get("huge", build("huge"), lambda v: 1000) == "huge" and "huge" not in cache.items
    # a cache of values that grow once cached weighs them again when it hands them out: what no longer fits goes
    growing, box = BytesLRU(max_bytes=100, reweigh=True), {"bytes": 10}
    weigh = lambda v: v["bytes"]  # noqa: E731
    growing.get("x", lambda: box, weigh)
    growing.get("y", lambda: {"bytes": 50}, weigh)
    box["bytes"] = 60
    assert growing.get("x", build("x2"), weigh) is box and list(growing.items) == ["x"] and growing.bytes == 60
    # what the caches are charged for a slot: its masks, its reachability table and its automaton with the index
    # structures slot_sets derives from it (uncounted, a 512 MB cache once held many GB)
    from diffreason.canvas import CanvasTemplate

    slot = CanvasTemplate.from_regex('"[a-z]{1,9}"', TOK, 12)
    automaton = slot.slots[0].automaton
    assert "state_pairs" in automaton.__dict__  # derived while building the slot
    sources, targets, (indptr, pairs) = automaton.state_pairs
    derived = automaton._keys.numel() * 8 + sources.nbytes + targets.nbytes + indptr.nbytes + pairs.nbytes
    moves = sum(t.numel() * t.element_size() for t in (automaton.src, automaton.tok, automaton.dst))
    tables = sum(sweep.table.nbytes for sweep in automaton._reach_sweeps)  # (grown in blocks of 32 rows)
    assert tables >= 2 * 13 * automaton.num_states
    assert automaton.nbytes >= moves + derived + tables
    assert slot.nbytes >= slot.masks.numel() + slot.slots[0].backward.numel() + automaton.nbytes


def test_memoised_regex_parts_build_the_same_automaton():
    """Within one regex, repeated parts (every string member's pattern) are built once: same language, same size."""
    import interegular

    import interegular.fsm

    from diffreason.constrain import chardfa

    regex = r'\{"a":("[a-z]{0,5}"),"b":("[a-z]{0,5}")(,"c":("[a-z]{0,5}"))?\}'
    crawl = interegular.fsm.crawl
    plain = interegular.parse_pattern(regex).to_fsm()  # interegular as it is
    with chardfa.interegular_patched():
        assert interegular.fsm.crawl is chardfa._indexed_crawl
        memoised = interegular.parse_pattern(regex).to_fsm()
        assert len(chardfa._PARTS.memo) > 0
    assert interegular.fsm.crawl is crawl  # the library is left as it was
    assert len(memoised.states) == len(plain.states)
    for s in ['{"a":"","b":"xy"}', '{"a":"abcde","b":"","c":"q"}', '{"a":"abcdef","b":""}', '{"b":"","a":""}']:
        assert memoised.accepts(s) == plain.accepts(s) == bool(re.fullmatch(regex, s))


def test_automaton_is_stored_as_its_moves():
    a = C.automaton(r"[0-9]{2}")
    digits = TOK.convert_tokens_to_ids(list("0123456789"))
    first = a.moves_from(a.initial)
    assert set(digits) <= set(first) and a.src.numel() < a.num_states * a.vocab_size
    assert a.step(a.initial, TOK.convert_tokens_to_ids("x")) == -1
    encode = lambda text: TOK.encode(text, add_special_tokens=False)  # noqa: E731
    assert a.accepts(encode("42")) and not a.accepts(encode("4"))
    # ids outside the vocabulary move nowhere (a negative one must not wrap around to a real token)
    last = encode("2")[0]
    assert a.step(a.step(a.initial, encode("4")[0]), last - a.vocab_size) == -1
    assert not a.accepts([*encode("4"), last - a.vocab_size]) and not a.accepts([*encode("4"), a.vocab_size + 5])


def test_added_special_tokens_never_spell_a_value():
    """'<start_of_image>' is 16 characters a class like [0-z] allows; decoding drops it, so it must not be allowed."""
    marker = TOK.convert_tokens_to_ids("<start_of_image>")
    a = C.automaton(r"[0-z]{16,20}")
    assert all(a.step(s, marker) == -1 for s in range(a.num_states))
    assert a.step(a.initial, TOK.convert_tokens_to_ids("a")) != -1


def test_intersections_stand_where_their_placeholder_is():
    """Regex syntax has no intersection: a placeholder character stands for one, inside any regex around it."""

    mark = "\U000f0000"
    both = ((mark, ('"[a-z]+"', '"[a-c0-9]{2,3}"')),)
    a = C.automaton(r"\[" + mark + "(," + mark + r")*\]", both)
    for s in ['["ab"]', '["abc","cb"]', '["a"]', '["abcd"]', '["ad"]', '["a1"]', '["ab",]']:
        expected = bool(re.fullmatch(r'\[("[a-c]{2,3}")(,"[a-c]{2,3}")*\]', s))
        assert a.accepts(TOK.encode(s, add_special_tokens=False)) == expected, s
    assert C.matches_nothing(mark, ((mark, ("[a-z]{3}", "[a-z]{4}")),))
    assert not C.matches_nothing(mark, both)
    # without intersections the same character is just a character (a user's regex is read as written)
    literal = C.automaton(mark + "x")
    assert literal.accepts(TOK.encode(mark + "x", add_special_tokens=False))
    assert not literal.accepts(TOK.encode('"ab"', add_special_tokens=False))


def test_complement_parts_stand_for_what_their_regex_does_not_match():
    """`not`: a Complement part of an intersection matches exactly the strings its regex does not (checked over
    every string of up to three characters of a small alphabet)."""
    import itertools

    from diffreason.constrain import Complement

    mark = "\U000f0000"
    parts = ((mark, ('"[a-c]{0,3}"', Complement('"(ab|c|b[a-c]*)"'))),)
    fsm = C.char_fsm(mark, parts)
    for n in range(4):
        for chars in itertools.product("abc", repeat=n):
            s = '"' + "".join(chars) + '"'
            assert fsm.accepts(s) == (not re.fullmatch(r'"(ab|c|b[a-c]*)"', s)), s
    assert Complement("x") != "x" and len({Complement("x"), "x"}) == 2  # distinct cache keys


@pytest.mark.parametrize("kernel", ["scipy", "numpy"])
@pytest.mark.parametrize("regex", REGEXES)
def test_slots_of_one_automaton_at_several_lengths_share_reachability_correctly(regex, kernel, monkeypatch):
    """Reachability tables kept with the automaton (grown as longer slots ask) give every length the sets a fresh
    automaton computes for it alone, in whatever order the lengths come; the work done with scipy's CSR kernels
    gives what numpy gives (used without those kernels: should a scipy release move them)."""
    import dataclasses

    import diffreason.constrain.tokens as automaton

    if kernel == "numpy":
        monkeypatch.setattr(automaton, "_csr_matvec", None)
        monkeypatch.setattr(automaton, "_csr_matvecs", None)
    # (a copy: the cached automaton keeps the tables other tests built)
    shared = dataclasses.replace(C.automaton(regex)).with_padding(PAD)
    for length in (40, 3, 70, 1, 33, 65, 12):
        fresh = dataclasses.replace(shared)  # the same moves, nothing derived yet
        try:
            with monkeypatch.context() as numpy_step:  # (the reference)
                numpy_step.setattr(automaton, "_csr_matvec", None)
                numpy_step.setattr(automaton, "_csr_matvecs", None)
                expected = [t.tolist() for t in fresh.slot_sets(length)]
        except TemplateError:
            with pytest.raises(TemplateError):
                shared.slot_sets(length)
            continue
        assert [t.tolist() for t in shared.slot_sets(length)] == expected


def _byte_fsm(regex):
    """The byte-level FSM the automaton module hands outlines' index (ASCII alphabets' conversion, else the general
    one of `constrain.utf8`), narrowed to valid UTF-8."""
    from diffreason.constrain import utf8
    from diffreason.constrain.automata import byte_level_fsm, valid_utf8_only

    fsm = C.char_fsm(regex)
    ours = byte_level_fsm(fsm)
    return valid_utf8_only(ours if ours is not None else utf8.byte_level_fsm(fsm))


@pytest.mark.parametrize("regex", REGEXES + [r'"([^"\\]|\\["\\/bfnrt]){0,8}"', r"[a-c]x|[b-d]y", "é[^a]{1,2}"])
def test_moves_over_token_classes_are_exactly_outlines_token_moves(regex):
    """A leaf automaton is built by outlines over one token per group its FSM's alphabet reads alike, and keeps one
    move per token class; read token by token it is outlines' index over the whole vocabulary (without its EOS
    moves), and its partition is the coarsest: tokens in different classes move differently from some state."""
    import numpy as np
    from outlines_core.fsm.regex import Index

    tokenizer = C.adapter
    index = Index(_byte_fsm(regex).fsm_info, tokenizer.outlines_vocabulary, TOK.eos_token_id, frozenset())
    a = C.automaton(regex)
    assert a.classes is not None and a.classes.count < a.vocab_size // 4
    transitions = {s: m for s, m in index.get_transitions().items() if m}
    labels = sorted(set(transitions) | {d for m in transitions.values() for d in m.values()} | {index.get_initial_state()})
    number = {label: i for i, label in enumerate(labels)}
    assert a.initial == number[index.get_initial_state()] and a.num_states == len(labels)
    table = np.full((a.num_states, a.vocab_size), -1)
    for label, i in number.items():
        expected = {t: number[d] for t, d in transitions.get(label, {}).items() if t != TOK.eos_token_id}
        assert a.moves_from(i) == expected
        assert bool(a.accepting[i]) == (TOK.eos_token_id in transitions.get(label, {}) or index.is_final_state(label))
        table[i, list(expected)] = list(expected.values())
    assert len({tuple(column) for column in table.T}) == a.classes.count


@pytest.mark.parametrize("regex", [r'"[^"\\]{0,5}"', "[a-fé]+", r"-?[0-9]{1,3}"])
def test_tokens_are_read_as_outlines_reads_them(regex):
    """The grouping of tokens spells each one as outlines-core's own transition keys do (multi-byte characters as
    byte symbols included: the tokenizer has a token for every byte)."""
    from outlines_core.fsm.regex import get_vocabulary_transition_keys

    tokenizer = C.adapter
    info = _byte_fsm(regex).fsm_info
    theirs = get_vocabulary_transition_keys(info.alphabet_symbol_mapping, info.alphabet_anything_value,
                                            tokenizer.outlines_vocabulary, frozenset())
    spellings, buckets, _, names = tokenizer.symbols
    assert any(len(name) == 3 for name in names)  # byte symbols are among them
    mapping = info.alphabet_symbol_mapping
    assert sorted(i for ids, _ in buckets for i in ids) == list(range(len(spellings)))
    for ids, table in buckets:
        for i, row in zip(ids, table):
            n = int((row < len(names)).sum())  # a bucket's shorter spellings end in padding (len(names): no symbol)
            assert (row[n:] == len(names)).all()
            ours = [mapping.get(names[s], info.alphabet_anything_value) for s in row[:n]]
            assert ours == list(theirs[spellings[i]]), spellings[i]
    group, vocabulary, count = tokenizer.groups(mapping, info.alphabet_anything_value)
    keys = {}
    for text, ids in tokenizer.reduced_vocabulary.items():
        for t in ids:
            assert keys.setdefault(int(group[t]), tuple(theirs[text])) == tuple(theirs[text])
    assert len(keys) == count and (group[[TOK.eos_token_id, TOK.pad_token_id]] == count).all()
    # with the keys the FSM moves on: a token holding another one is left out (moves from no state), the rest as above
    live = set().union(*_byte_fsm(regex).map.values())
    group, vocabulary, count = tokenizer.groups(mapping, info.alphabet_anything_value, live)
    keys, left_out = {}, 0
    for text, ids in tokenizer.reduced_vocabulary.items():
        for t in ids:
            if set(theirs[text]) <= live:
                assert keys.setdefault(int(group[t]), tuple(theirs[text])) == tuple(theirs[text])
            else:
                assert group[t] == count
                left_out += 1
    assert len(keys) == count and left_out > 0 and len(set(keys.values())) == count


def _partition(labels):
    import numpy as np

    from diffreason.constrain.tokens import TokenClasses

    _, of = np.unique(np.asarray(labels), return_inverse=True)
    return TokenClasses(of.reshape(-1).astype(np.int64), int(of.max()) + 1)


@settings(max_examples=80, deadline=None)
@given(a=st.lists(st.integers(0, 3), min_size=12, max_size=12), b=st.lists(st.integers(0, 5), min_size=12, max_size=12),
       singles=st.lists(st.integers(0, 11), max_size=6))
def test_splitting_and_refining_token_partitions(a, b, singles):
    """`split` and `common` give the coarsest partition finer than their inputs with each single token alone, no
    empty class, and parent maps that name the input class of every new class."""
    import numpy as np

    from diffreason.constrain.tokens import TokenClasses

    pa, pb = _partition(a), _partition(b)
    alone = lambda p, t: int((p.of == p.of[t]).sum()) == 1  # noqa: E731
    mark = lambda t: t if t in singles else -1  # noqa: E731

    split, parent = pa.split(singles)
    assert all(alone(split, t) for t in singles)
    assert (pa.of == parent[split.of]).all() and (np.bincount(split.of, minlength=split.count) > 0).all()
    assert split.count == len({(pa.of[t], mark(t)) for t in range(12)})
    assert (split.of[pa.of < pa.count] == split.of)[[t for t in range(12) if split.of[t] < pa.count]].all()
    assert all(split.of[t] == pa.of[t] for t in range(12) if split.of[t] < pa.count)  # old classes keep numbers

    common, (qa, qb) = TokenClasses.common(12, [pa, pb], singles)
    assert all(alone(common, t) for t in singles)
    assert (pa.of == qa[common.of]).all() and (pb.of == qb[common.of]).all()
    assert common.count == len({(pa.of[t], pb.of[t], mark(t)) for t in range(12)})
    assert (np.bincount(common.of, minlength=common.count) > 0).all()
    # many partitions (keys past 2^31 are renumbered on the way): the same partition, each input's parent map right
    fine = _partition(list(range(12)))
    many, parents = TokenClasses.common(12, [pa, pb] * 6 + [fine] * 3, singles)
    assert many.count == 12 and len(parents) == 15
    assert all((p.of == q[many.of]).all() for p, q in zip([pa, pb] * 6 + [fine] * 3, parents))


@settings(max_examples=60, deadline=None)
@given(bits=st.integers(1, 12), width=st.integers(0, 40), rows=st.integers(0, 30), seed=st.integers(0, 2**16))
def test_rows_are_numbered_by_first_appearance(bits, width, rows, seed):
    """`number_rows` numbers equal rows alike, by first appearance — as numbering each row's bytes does."""
    import numpy as np

    from diffreason.constrain.tokens import number_rows

    rng = np.random.default_rng(seed)
    matrix = rng.integers(0, 2**bits, size=(rows, width))
    matrix = matrix[rng.integers(0, max(rows, 1), size=rows)] if rows else matrix  # repeats
    seen = {}
    expected = [seen.setdefault(tuple(row), len(seen)) for row in matrix.tolist()]
    numbers, count = number_rows(matrix.astype(np.int32))
    assert numbers.tolist() == expected and count == len(seen)


@pytest.mark.parametrize("regex", REGEXES)
def test_slot_masks_are_the_distinct_allowed_sets(regex):
    """`slot_masks` (deduplicated over token classes) gives each position exactly `slot_sets`' allowed set, each
    distinct set once, in order of first appearance."""
    a = C.automaton(regex).with_padding(PAD)
    allowed, _, backward = a.slot_sets(12)
    masks, index, backward_too = a.slot_masks(12)
    assert torch.equal(masks[index], allowed) and torch.equal(backward, backward_too)
    assert len({tuple(m.tolist()) for m in masks}) == masks.shape[0]
    firsts = [index.tolist().index(r) for r in range(masks.shape[0])]
    assert firsts == sorted(firsts)
    assert masks.shape[0] > 1


@pytest.mark.parametrize("kernel", ["scipy", "numpy"])
def test_or_product_of_a_sparse_and_a_dense_boolean_matrix(kernel, monkeypatch):
    """y[r] = OR over the rows of x that row r of the sparse matrix names, empty rows (first, inner, last) False."""
    import diffreason.constrain.tokens as automaton

    if kernel == "numpy":
        monkeypatch.setattr(automaton, "_csr_matvecs", None)
    rng = np.random.default_rng(0)
    dense = rng.random((7, 9)) < 0.3
    dense[[0, 3, 6]] = False
    x = rng.random((9, 5)) < 0.4
    indptr = np.zeros(8, dtype=np.int32)
    np.cumsum(dense.sum(axis=1), out=indptr[1:])
    indices = np.flatnonzero(dense.reshape(-1)).astype(np.int32) % 9
    y = automaton._or_product(indptr, indices, x)
    assert y.dtype == bool and y.tolist() == ((dense.astype(int) @ x.astype(int)) > 0).tolist()
    assert not y[[0, 3, 6]].any()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=30))
def test_first_appearances_of_numbers_given_in_order_of_first_appearance(values):
    """Rows numbered by first appearance: where each number first stands, as np.unique finds it by sorting."""
    from diffreason.constrain.tokens import first_appearances, first_of_each, number_by_bytes

    numbers = number_by_bytes([bytes([v]) for v in values])
    assert first_appearances(numbers).tolist() == first_of_each(numbers).tolist()
    assert [values[i] for i in first_appearances(numbers)] == list(dict.fromkeys(values))


def test_an_enums_automaton_read_off_its_trie_is_outlines_index_of_it():
    """An enum's token automaton built straight from its values' trie allows, at every length, exactly what outlines'
    index over the trie's character automaton allows, and accepts the same token sequences — non-ASCII values
    too, whose characters span several byte tokens."""
    from diffreason.constrain.regex import Choice

    for texts in (['"red"', '"green"', '"greenish"', '"blue"'], ["0", "10", "100", "-1"], ['"a-b"', '"a\\"b"'],
                  ['"é"', '"e"', '"ü€x"']):
        choice = Choice(texts)
        fast = C.automata.build(choice)
        slow = C.automata.build(str(choice))  # (a plain string: outlines' index)
        assert fast.num_states == 1 + len({t.encode()[:i] for t in texts for i in range(1, len(t.encode()) + 1)})
        for length in range(1, 10):
            try:
                expected = slow.with_padding(PAD).slot_sets(length)[0]
            except TemplateError:
                with pytest.raises(TemplateError):
                    fast.with_padding(PAD).slot_sets(length)
                continue
            assert torch.equal(fast.with_padding(PAD).slot_sets(length)[0], expected), (texts, length)
        for t in texts:
            ids = TOK.encode(t, add_special_tokens=False)
            assert fast.accepts(ids) and slow.accepts(ids)
        assert not fast.accepts(TOK.encode(texts[0] + "x", add_special_tokens=False))


@settings(max_examples=40, deadline=None)
@given(regex=st.sampled_from(REGEXES + [r"( {4}[a-z_]+\(([a-z0-9, ]|\([a-z0-9, ]*\))*\)\n){1,3}"]),
       length=st.integers(6, 24), seed=st.integers(0, 10**6), ties=st.booleans(), sure=st.booleans())
def test_the_pruned_pass_gives_the_joint_passes_path(regex, length, seed, ties, sure):
    """`pruned_best_path` (bounds from a beam search's path, used for large automata) picks exactly the joint Viterbi pass's
    path — on rounded scores (ties) too, and on a model sure of one spelling (most states pruned) — and both fail
    alike where no value fits."""
    from diffreason.constrain.tokens import joint_best_paths, pruned_best_path

    a = C.automaton(regex).with_padding(PAD)
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(length, len(TOK), generator=g) * 3
    if sure:  # one path of the language far ahead of the rest
        try:
            path = joint_best_paths([(a, lp.log_softmax(-1), None)])[0]
        except TemplateError:
            path = None
        if path is not None:
            lp[torch.arange(length), torch.tensor(path)] += 12.0
    lp = (lp.round() if ties else lp).log_softmax(-1)
    try:
        expected = joint_best_paths([(a, lp, None)])[0]
    except TemplateError:
        with pytest.raises(TemplateError, match="no complete value"):
            pruned_best_path(a, lp)
        return
    assert pruned_best_path(a, lp) == expected and a.accepts(expected)


def test_a_class_range_over_the_surrogates_is_split_around_them():
    """(`[\\u0080-\\U0010ffff]` was refused: its surrogates cannot be spelled in UTF-8, and the byte conversion failed on
    them.) The range becomes two, and what the slot writes is a full match."""
    from diffreason.constrain.regex import from_python
    from diffreason.structured import constraint_template

    assert from_python(r"[\u0080-\U0010ffff]{2}") == "[\x80-\ud7ff\ue000-\U0010ffff]{2}"
    assert from_python(r"[-\U0001F600]") == "[-\U0001F600]" and from_python("é-ü") == "é-ü"  # (no range: kept)
    template, _ = constraint_template(TOK, 64, regex=r"[\u0080-\U0010ffff]{2}")
    slot = template.slots[0]
    g = torch.Generator().manual_seed(0)
    for _ in range(10):
        path = slot.automaton.best_path(torch.randn(slot.length, len(TOK), generator=g).log_softmax(-1), slot.backward)
        text = TOK.decode([t for t in path if t != PAD])
        assert re.fullmatch(r"[\u0080-\U0010ffff]{2}", text, re.ASCII), text


@pytest.mark.parametrize("regex", [".", "(?s).{2}", "[^é]", "é|[^x]"])
def test_any_character_is_one_valid_utf8_character_never_stray_bytes(regex):
    """Every token sequence the automaton accepts decodes (strict UTF-8) to a full match: `.` once took any lead byte
    in C0-F7 and any continuation bytes as one character (F5 B3 BA BE, the overlong F0 85 BA 85), and a lone F8-FF
    byte token as a whole character — four U+FFFD where the regex allowed one. Sequences of one to three tokens,
    every multi-byte piece of this byte-level vocabulary among them."""
    spelled, _ = C.adapter.byte_spellings
    raw = {t: b for b, ids in spelled.items() for t in ids}
    high = [t for t, b in raw.items() if any(x >= 0x80 for x in b)]
    leads = [t for t in high if raw[t][0] >= 0xE0]
    a = C.automaton(regex)
    seqs = [(t,) for t in raw] + [(x, y) for x in high for y in high] + [(x, y, z) for x in leads for y in high
                                                                          for z in high[::7]]
    accepted = 0
    for seq in seqs:
        if a.accepts(list(seq)):
            accepted += 1
            assert re.fullmatch(regex, b"".join(raw[t] for t in seq).decode("utf-8"), re.ASCII), seq
    assert accepted > 50  # (ASCII characters, and two- and three-byte characters from pieces)
