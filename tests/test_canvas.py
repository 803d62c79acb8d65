"""Canvas templates: compact masks, validation errors, slicing into canvases."""

import pytest
import torch

from diffreason import CanvasConstraint, CanvasTemplate, TemplateError


def test_equal_allowed_sets_share_one_mask():
    digits = range(10, 19)
    t = CanvasTemplate.from_positions(50, [5, list(digits), None, set(digits), 7, {1, 2}])
    assert t.masks.shape == (2, 50)
    assert t.fixed.tolist() == [5, -1, -1, -1, 7, -1]
    assert t.mask_index.tolist() == [-1, 0, -1, 0, -1, 1]
    assert t.allowed(1).tolist() == list(digits)
    assert t.allowed(2) is None and t.allowed(0).tolist() == [5]


@pytest.mark.parametrize(
    "positions, message",
    [
        ([1, set()], "position 1 has an empty allowed set"),
        ([1, 60], "position 1 fixes token 60, outside the vocabulary"),
        ([{3, 99}], "position 0 allows token 99, outside the vocabulary"),
        ([], "at least one position"),
    ],
)
def test_build_time_errors(positions, message):
    with pytest.raises(TemplateError, match=message):
        CanvasTemplate.from_positions(50, positions)


def test_low_level_constructor_validates():
    masks = torch.zeros(2, 10, dtype=torch.bool)
    masks[0, 3] = True
    with pytest.raises(TemplateError, match="length mismatch"):
        CanvasTemplate(10, [-1, -1], [0], masks)
    with pytest.raises(TemplateError, match="mask 1 allows no token"):
        CanvasTemplate(10, [-1, -1], [0, 1], masks)
    with pytest.raises(TemplateError, match="refers to mask 5"):
        CanvasTemplate(10, [-1], [5], masks[:1])
    with pytest.raises(TemplateError, match=r"shape \[K, 10\]"):
        CanvasTemplate(10, [-1], [0], torch.ones(1, 9, dtype=torch.bool))
    with pytest.raises(TemplateError, match="which its allowed set excludes"):
        CanvasTemplate(10, [4], [0], masks[:1])


def test_eos_is_kept_out_of_positions_before_a_required_token():
    """(An EOS allowed before fixed tokens ended the output and the commit turned them into pad: QA, 2026-12-07.)
    EOS 1, pad 0: EOS stays allowed where nothing after it requires a token other than pad or EOS."""
    t = CanvasTemplate.from_positions(20, [None, {1, 5}, {1, 5}, 7, None, {1, 6}, 1])
    out = t.ending_at_its_end(eos=1, pad=0)
    assert [out.allowed(i) is None for i in range(7)] == [False, False, False, False, True, False, False]
    assert 1 not in out.allowed(0).tolist() and len(out.allowed(0)) == 19
    assert out.allowed(1).tolist() == out.allowed(2).tolist() == [5] and out.allowed(3).tolist() == [7]
    assert out.allowed(5).tolist() == [1, 6] and out.allowed(6).tolist() == [1]
    assert t.allowed(1).tolist() == [1, 5]  # (a new template: the given one is unchanged)
    ends = CanvasTemplate.from_positions(20, [None, {1, 5}, 0, {0, 3}, 1])  # (nothing after needs more than pad)
    assert ends.ending_at_its_end(eos=1, pad=0) is ends
    with pytest.raises(TemplateError, match="position 1 allows only EOS .1. but position 2 after it must hold a "
                                            "token other than pad or EOS"):
        CanvasTemplate.from_positions(20, [4, 1, 4]).ending_at_its_end(eos=1, pad=0)
    with pytest.raises(TemplateError, match="position 0 allows only EOS"):
        CanvasTemplate.from_positions(20, [{1}, 4]).ending_at_its_end(eos=1, pad=0)


def test_violations_and_canvases():
    t = CanvasTemplate.from_positions(20, [1, {2, 3}, None, 4, {5}])
    assert t.violations([1, 3, 19, 4, 5]) == []
    assert t.violations([0, 4, 0, 4, 5]) == [0, 1]
    assert t.violations([1, 2]) == [2, 3, 4]  # too short
    assert t.num_canvases(2) == 3
    last = t.canvas(2, 2)
    assert len(last) == 2 and last.fixed.tolist() == [-1, -1] and last.allowed(0).tolist() == [5]
    assert last.allowed(1) is None  # beyond the template: unrestricted


def test_concatenation_shifts_mask_indices():
    a = CanvasTemplate.from_positions(20, [{1, 2}, 3])
    b = CanvasTemplate.from_positions(20, [{7}, None])
    c = a + b
    assert len(c) == 4 and c.allowed(0).tolist() == [1, 2] and c.allowed(2).tolist() == [7]
    # a part given twice (its masks stored once), and a part whose masks equal another's without being the same tensor
    twin = CanvasTemplate.from_positions(20, [{1, 2}, 3])
    def view(t, i):
        allowed = t.allowed(i)
        return int(t.fixed[i]), None if allowed is None else allowed.tolist()

    for parts in ([a, b, a], [a, a], [b, a, twin, b, a]):
        joined = CanvasTemplate.join(parts)
        assert [view(joined, i) for i in range(len(joined))] == [view(p, i) for p in parts for i in range(len(p))]
        if len(parts) > 2:  # (`+`, two parts, skips the pass that stores equal masks once)
            assert joined.masks.shape[0] == len({tuple(m.tolist()) for p in parts for m in p.masks})
    with pytest.raises(TemplateError, match="vocabularies"):
        a + CanvasTemplate.from_positions(21, [1])


def test_dense_constraint():
    a = CanvasTemplate.from_positions(8, [1, {2, 3}, None])
    b = CanvasTemplate.unconstrained(3, 8)
    c = CanvasConstraint.from_templates([a, b])
    assert c.allowed.shape == (2, 3, 8)
    assert c.allowed[0, 0].nonzero().flatten().tolist() == [1]
    assert c.allowed[0, 1].nonzero().flatten().tolist() == [2, 3]
    assert bool(c.allowed[0, 2].all()) and bool(c.allowed[1].all())
    assert c.row_restricted == [True, False]
    assert CanvasConstraint.from_templates([b, b]) is None


def test_slots_over_a_vocabulary_widened_past_the_tokenizer():
    """`with_vocab` (a model's embedding table padded past its tokenizer, as the SGLang plugin meets it) keeps the
    slots: the extra ids are allowed nowhere, and a commit never picks one however high its score."""
    from diffreason.constrain.regex import group, lit, optional, seq
    from diffreason.tokenizer import train_byte_bpe

    tok = train_byte_bpe()
    V = len(tok)
    for regex in ['"[a-z]{1,3}"', optional(seq(lit(',"k":'), group("[0-9]{1,2}")))]:
        template = CanvasTemplate.from_regex(regex, tok, 7).with_vocab(V + 5)
        assert template.vocab_size == V + 5 and not template.masks[:, V:].any()
        slot = template.slots[0]
        scores = torch.randn(7, V + 5, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
        scores[:, V:] = 0.0  # the best score there is
        path = slot.automaton.best_path(scores, slot.backward)
        assert max(path) < V and template.violations(path) == []
        constraint = CanvasConstraint.from_templates([template])
        assert constraint.allowed.shape[-1] == V + 5 and not constraint.allowed[..., V:].any()


def test_device_masks_on_the_tables_own_device_keep_nothing_alive():
    """(On the CPU the cached "copy" was the table itself, so the cache kept every table, and its entry, for ever:
    QA, 2026-12-07.)"""
    import gc
    import weakref

    from diffreason.canvas import DeviceMasks

    masks = torch.ones(3, 50, dtype=torch.bool)
    device_masks = DeviceMasks("cpu")
    assert device_masks.get(masks) is masks
    table = weakref.ref(masks)
    del masks
    gc.collect()
    assert table() is None and len(device_masks) == 0
