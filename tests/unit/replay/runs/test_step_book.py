"""The numbering rules of a durable run, held by StepBook alone (no store, no run)."""

from __future__ import annotations

from memseal.replay.runs._steps import StepBook


def test_unkeyed_calls_take_the_steps_in_order() -> None:
    book = StepBook()
    assert [book.take() for _ in range(3)] == [0, 1, 2]
    assert book.issued == 3
    assert book.next_step() == 3


def test_a_step_given_back_is_the_next_one_handed_out_and_a_reissue_until_it_commits() -> None:
    book = StepBook()
    for _ in range(4):
        book.take()
    book.give_back(2)
    book.give_back(1)
    assert book.issued == 4  # steps past them were handed out: no gap may open
    assert book.next_step() == 1
    assert [book.take(), book.take(), book.take()] == [1, 2, 4]
    assert book.is_reissue(1)
    assert book.is_reissue(2)
    book.committed(1)
    assert not book.is_reissue(1)
    assert book.is_reissue(2)


def test_giving_back_the_last_step_takes_the_numbering_back_through_the_holes() -> None:
    book = StepBook()
    for _ in range(4):
        book.take()
    book.give_back(1)
    book.give_back(2)
    book.give_back(3)  # the last one: 3, then the holes 2 and 1 below it, are taken back
    assert book.issued == 1
    assert book.next_step() == 1
    assert book.take() == 1
    assert book.issued == 2


def test_unkeyed_calls_skip_the_steps_keyed_calls_took() -> None:
    book = StepBook()
    book.keyed(0)
    book.keyed(2)
    assert [book.take(), book.take(), book.take()] == [1, 3, 4]


def test_a_keyed_step_given_back_is_no_longer_skipped() -> None:
    book = StepBook()
    book.take()
    step = book.take_free(0, lambda s: False)
    assert step == 1
    book.give_back(step)
    assert book.take() == 1


def test_a_new_keyed_call_takes_the_first_step_no_recorded_call_holds() -> None:
    book = StepBook()
    held = {3, 4, 6}
    assert book.take_free(3, held.__contains__) == 5
    assert book.issued == 6
    assert book.take_free(0, held.__contains__) == 7  # past every step handed out
    # The unkeyed numbering is not moved by keyed calls: it skips their steps only.
    assert [book.take(), book.take()] == [0, 1]


def test_a_new_keyed_call_takes_a_given_back_step_first() -> None:
    book = StepBook()
    for _ in range(3):
        book.take()
    book.give_back(0)
    assert book.take_free(0, lambda s: False) == 0
    assert book.take() == 3  # step 0 is a keyed call's now


def test_an_explicit_step_moves_both_numberings_past_it() -> None:
    book = StepBook()
    book.take()
    book.take()
    book.give_back(0)
    assert book.next_step() == 0
    book.claim(0)  # the caller's own number fills the hole: it is not handed out again
    assert book.next_step() == 2
    book.claim(5)
    assert book.issued == 6
    assert book.take() == 6


def test_a_reopened_run_numbers_from_where_it_is_told() -> None:
    book = StepBook()
    book.skip_to(4)
    assert book.take() == 4
    book.skip_to(2)  # never backwards
    assert book.take() == 5


def test_a_call_that_got_its_turn_owns_its_step() -> None:
    book = StepBook()
    for _ in range(3):
        book.take()
    book.give_back(1)
    book.entered(1)  # a second call of step 1 waited, and now runs it
    assert book.next_step() == 3
    book.entered(7)
    assert book.issued == 8
