# The interrupt controller's latch, and the outbox that controllers share:
# whatever happens, a controller's index is in the outbox exactly while it
# has sources to deliver, so the driver can find them all without asking
# each one.
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.abi.interrupts import ALL_SOURCES, Interrupt
from ipufs.model.interrupts import InterruptController


def test_a_masked_source_is_latched_and_delivered_once_on_unmask() -> None:
    outbox: set[int] = set()
    c = InterruptController(index=3, outbox=outbox)
    c.set_mask(Interrupt.GS1_E0.bit)
    c.raise_(Interrupt.GS1_E0)
    c.raise_(Interrupt.GS1_E0)
    assert outbox == set() and c.take() == []
    c.set_mask(0)
    assert outbox == {3}
    assert c.take() == [Interrupt.GS1_E0]
    assert outbox == set()


_OPS = st.one_of(
    st.tuples(st.just("raise"), st.integers(0, 1), st.sampled_from(list(Interrupt))),
    st.tuples(st.just("mask"), st.integers(0, 1), st.integers(0, ALL_SOURCES)),
    st.tuples(st.just("take"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("clear"), st.integers(0, 1), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_OPS, max_size=30))
def test_the_outbox_holds_exactly_the_controllers_with_something_to_deliver(
        ops: list[tuple[str, int, int]]) -> None:
    outbox: set[int] = set()
    controllers = [InterruptController(index=5, outbox=outbox), InterruptController(index=9, outbox=outbox)]
    for op, which, value in ops:
        c = controllers[which]
        if op == "raise":
            c.raise_(Interrupt(value))
        elif op == "mask":
            c.set_mask(value)
        elif op == "take":
            listed = c.index in outbox
            assert bool(c.take()) == listed
        else:
            c.clear()
            assert c.index not in outbox
    for c in controllers:
        listed = c.index in outbox
        assert bool(c.take()) == listed
    assert outbox == set()
