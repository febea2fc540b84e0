"""about(): whether a text only supposes, and whose fact it states, from its structure."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.engine import aboutness
from memseal.engine.aboutness import MAX_CHARS, SOMEONE, About, about, sentences


@pytest.mark.parametrize(
    "text",
    [
        "We relocated to Lisbon in June.",
        "I gave up running.",
        "I no longer eat meat.",
        "Since March my manager is Priya.",
        "My new boss is now Dana.",
        "My partner and I moved to Porto.",
        "I visited my brother Tomas last week.",
        "My dog is called Rex.",
        "I would like my answers short.",
        "I'd prefer tea.",
        "We cancelled the trip to Rome.",
        "I am moving our website to another host.",
        "My dog is called Max now; the old one went to my sister.",
    ],
)
def test_the_speakers_plain_statements(text: str) -> None:
    assert about(text) == About()


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("My brother Tomas has a new job.", "Tomas"),
        ("my brother, Tomas, has a new job", "Tomas"),
        ("Last week my older sister Ana got married.", "Ana"),
        ("Ana, my sister, lives in Rome.", "Ana"),
        ("My sister got married last week.", SOMEONE),
        ("My friend's wife is a doctor.", SOMEONE),
        ("She works at Google now.", SOMEONE),
        ("My mom and dad moved to Faro.", SOMEONE),
        ("My brother Tomas got a job. He moved to Berlin.", "Tomas"),
        ("My cousin Lea moved to Oslo. My friend Ben moved to Bergen.", SOMEONE),
        ("My colleague José-Luis started at Acme.", "José-Luis"),
    ],
)
def test_another_persons_facts(text: str, subject: str) -> None:
    assert about(text) == About(subject=subject)


@pytest.mark.parametrize(
    "text",
    [
        "If I ever worked abroad, I would live in Tokyo.",
        "Suppose we moved to Canada.",
        "I might move to Berlin next year.",
        "I'd love to visit Japan someday.",
        "I'm thinking of quitting my job.",
        "What if I moved to Oslo?",
        "I wish I lived by the sea.",
        "Hypothetically, we could sell the house.",
    ],
)
def test_hypotheticals(text: str) -> None:
    assert about(text) == About(hypothetical=True)


def test_a_hypothetical_about_someone_else_keeps_its_subject() -> None:
    assert about("If my brother Tomas moved here, he would love it.") == About(
        hypothetical=True, subject="Tomas"
    )


def test_a_plain_statement_beside_a_hypothetical_is_a_statement() -> None:
    text = "I live in Porto. If I ever moved, it would be to Faro."
    assert about(text) == About()
    assert [s.states for s in sentences(text)] == [True, False]


@pytest.mark.parametrize(
    "text",
    ["Where do I live now?", "what's my name", "Can you remind me where I work", "Do you know?"],
)
def test_questions_state_nothing_and_suppose_nothing(text: str) -> None:
    (sentence,) = sentences(text)
    assert sentence.question and not sentence.states
    assert about(text) == About()


def test_a_statement_opening_with_a_wh_word_is_no_question() -> None:
    (sentence,) = sentences("What I love is tea.")
    assert sentence.states


def test_a_conversation_is_read_by_its_user_lines() -> None:
    text = "user: My brother Tomas has a new job.\nassistant: If you ever move, I'd help."
    assert about(text) == About(subject="Tomas")
    text = "user: I live in Porto.\nassistant: Your brother would love it."
    assert about(text) == About()
    # Without a user line the text is read whole (a learning, a document).
    assert about("assistant: She lives in Rome.") == About(subject=SOMEONE)


def test_the_speakers_statement_outweighs_another_persons() -> None:
    assert about("My sister moved to Rome. I live in Porto.") == About()


def test_a_name_after_my_relation_is_never_a_sentence_word() -> None:
    # "Since" after "my friend" is not a name: the subject is an unnamed friend.
    assert about("My friend Since moved.") == About(subject=SOMEONE)
    assert about("My brother Yesterday moved.") == About(subject=SOMEONE)


def test_only_the_first_characters_are_read() -> None:
    text = "I live in Porto. " + "x" * MAX_CHARS + " My brother Tomas moved."
    assert about(text) == About()


@given(st.text(max_size=300))
def test_deterministic_and_total(text: str) -> None:
    first = about(text)
    assert about(text) == first
    assert first.subject is None or first.subject == SOMEONE or first.subject[:1].isupper()


@pytest.mark.parametrize(
    "text",
    [
        "My mentor at the hospital is Grace.",
        "My landlady in Glasgow is Moira now.",
        "My coach from the rowing club is still Henrik.",
        "My doctor's name is Okafor.",
        "My new boss over at the depot is Dmitri, he started on Monday.",
    ],
)
def test_who_the_speakers_relation_is_is_the_speakers_fact(text: str) -> None:
    # A qualifier between the relation and its name (where, which one) keeps the
    # sentence about who the user's relation is: the user's fact, not the relation's.
    assert about(text) == About()


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("My sister in Leeds bought a flat.", SOMEONE),
        ("My mentor at the lab is retiring.", SOMEONE),
        ("My brother's wife is Carla.", SOMEONE),
    ],
)
def test_a_qualified_relation_doing_something_stays_theirs(text: str, subject: str) -> None:
    assert about(text) == About(subject=subject)


@pytest.mark.parametrize(
    "text",
    [
        "We're renting in Bristol these days, I suppose.",
        "I suppose the gym is over for me.",
        "Vegetarian again, I guess.",
        "I think we're settled in Cork now.",
        "I'd say I'm a morning person now.",
        "We suppose the car is sold.",
    ],
)
def test_a_hedge_states_what_it_hedges(text: str) -> None:
    (sentence,) = sentences(text)
    assert sentence.states
    assert about(text) == About()


@pytest.mark.parametrize(
    "text",
    ["Suppose I retrained as a nurse.", "I suppose I could retrain as a nurse."],
)
def test_a_supposition_is_still_hypothetical(text: str) -> None:
    assert about(text) == About(hypothetical=True)


def test_reading_1_reads_as_before_the_hedges_and_qualified_relations() -> None:
    # Reads recorded under the currency rule's version 1 re-derive with reading 1.
    assert about("My mentor at the hospital is Grace.", 1) == About(subject=SOMEONE)
    assert about("I suppose the gym is over for me.", 1) == About(hypothetical=True)
    assert about("My mentor is Grace.", 1) == About()


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("Ingrid's nephew just learned to swim.", "Ingrid"),
        ("Olamide's bakery closed for the winter.", "Olamide"),
        ("Bartek has a new apartment by the river.", "Bartek"),
        ("Yusuf was promoted to head chef.", "Yusuf"),
    ],
)
def test_a_sentence_opened_by_someones_name_is_theirs_from_reading_3(
    text: str, subject: str
) -> None:
    assert about(text) == About(subject=subject)
    assert about(text, 2) == About()  # reading 2 read it as the speaker's


@pytest.mark.parametrize(
    "text",
    [
        "Bartek has invited me to the harbour.",  # the speaker is in it: theirs too
        "Ingrid and I repainted the shed.",
        "It's snowing on the pass.",  # a pronoun's 's, not a name's
        "There's a leak under my sink.",
        "Borrowed a ladder from the shop.",  # a capital word alone names no one
        "June was rainy on the coast.",  # a month, not a name
        "What is the ferry timetable?",
    ],
)
def test_what_names_no_one_else_stays_the_speakers_in_reading_3(text: str) -> None:
    assert about(text).subject is None


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("Went sailing with my uncle Piet on Sunday.", "Piet"),
        ("Dinner at the pub with my cousin Mira, lovely evening.", "Mira"),
        ("Home these days is Bath, with my partner Kit and the dog.", "Kit"),
        ("Spent the whole evening with her family.", SOMEONE),
        ("Bought him a bike for his birthday.", SOMEONE),
    ],
)
def test_a_relation_after_a_preposition_is_the_speakers_fact_from_reading_4(
    text: str, before: str
) -> None:
    # The relation or pronoun is what the preposition takes, not who the sentence is about.
    assert about(text) == About()
    assert about(text, 3) == About(subject=before)


def test_a_relation_before_any_preposition_is_still_the_subject_in_reading_4() -> None:
    assert about("My uncle Piet went sailing with me.", 4) == About(subject="Piet")
    assert about("Her sister moved to Hull.", 4) == About(subject=SOMEONE)


@pytest.mark.parametrize(
    "text",
    [
        "I cycle to the office instead if the ferry is late.",
        "The walk to the station takes ten minutes if the lights are kind.",
        "Marta asked if I could host the book club, and I do now.",
        "My landlord checked whether we would renew; we signed for a year.",
    ],
)
def test_a_real_conditional_or_an_asked_if_states_from_reading_4(text: str) -> None:
    (sentence,) = sentences(text)
    assert sentence.states
    assert not about(text).hypothetical
    assert about(text, 3).hypothetical


@pytest.mark.parametrize(
    "text",
    [
        "If the ferry stopped running I'd cycle.",
        # An opening "if" sets a condition first, as a supposition does, whatever its
        # tense: read as stated, it would replace the user's current fact.
        "If I get the Leeds job, I move to Leeds in the spring.",
        "If the ferry is late I cycle to the office instead.",
        "If I get the flat I'll paint the kitchen green.",
        "If only we had a garden.",
        "If I were taller I could row in the eight.",
        "Kofi might retrain as a nurse next year.",
        "A flat near the river would be nice.",
    ],
)
def test_an_unreal_or_future_conditional_and_a_modal_suppose_in_reading_4(text: str) -> None:
    assert about(text, 4).hypothetical


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("Brightwell's office moved to Derby in the spring.", "Brightwell"),
        ("Corvex's head office is in Lyon now.", "Corvex"),
        ("Budget is tight this month.", "Budget"),
        ("Lunch is at one on Fridays.", "Lunch"),
    ],
)
def test_an_organisation_or_a_bare_noun_is_no_person_from_reading_4(text: str, before: str) -> None:
    assert about(text) == About()
    assert about(text, 3) == About(subject=before)


def test_a_persons_possessive_stays_theirs_in_reading_4() -> None:
    # What an office or a headquarters belongs to is no person; a bakery may be.
    assert about("Odile's bakery opened on Friday.", 4) == About(subject="Odile")


@pytest.mark.parametrize(
    ("text", "subject", "before"),
    [
        ("Piet and his husband are moving to Utrecht.", "Piet", SOMEONE),
        ("Kofi works at the harbour now.", "Kofi", None),
        ("Mira finally sold the boat.", "Mira", None),
        ("Lars teaches Year 6 at the village school.", "Lars", None),
        ("Yusra moved to Hull last month.", "Yusra", None),
        ("Tanaka-san is retiring in June.", "Tanaka-san", None),
        ("Our daughter Elin is at college in Leeds.", "Elin", None),
        ("My youngest grandson started school.", SOMEONE, None),
        ("My newest granddaughter arrived on Tuesday.", SOMEONE, None),
    ],
)
def test_more_ways_of_naming_another_person_from_reading_4(
    text: str, subject: str, before: str | None
) -> None:
    assert about(text) == About(subject=subject)
    assert about(text, 3) == About(subject=before)


@pytest.mark.parametrize(
    "text",
    [
        "Piano lessons start in May.",  # a plural noun, then its verb
        "Two weeks in at the new job and loving it.",
        "Running helps my back.",  # a gerund
        "Team meets on Mondays at nine.",
        "Apparently the ferry runs late on Sundays.",
    ],
)
def test_what_opens_with_no_name_stays_the_speakers_in_reading_4(text: str) -> None:
    assert about(text, 4).subject is None


@pytest.mark.parametrize(
    "text",
    [
        # A lowercase month is no modal, and a modal in a clause about a thing weighs
        # that clause, not the fact the sentence states.
        "I moved to Lisbon near the old harbour in may.",
        "I live in Lisbon now, where the rent might be lower.",
        "I gave up milk because dairy could upset my stomach.",
    ],
)
def test_a_stated_fact_with_a_modal_in_a_clause_states_in_reading_4(text: str) -> None:
    assert not about(text, 4).hypothetical


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("Émile moved to Lisbon last spring.", "Émile"),
        ("Łukasz works at the shipyard now.", "Łukasz"),
        ("McKenzie moved to Leeds.", "McKenzie"),
        ("O'Brien works at the port now.", "O'Brien"),
        # How a place strikes one names no person.
        ("Lisbon feels like home now.", None),
        ("Porto looks like a good fit for us.", None),
    ],
)
def test_whose_fact_with_any_latin_name_in_reading_4(text: str, subject: str | None) -> None:
    assert about(text, 4).subject == subject


def test_reading_4_weighs_prepositions_in_time_linear_in_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each pronoun looks only at the words just before it: counted, not timed (the
    # machines are shared), as the characters the preposition search is handed.
    real = aboutness._PREPOSITION_BEFORE
    seen: list[int] = []

    class Counting:
        def search(self, text: str) -> re.Match[str] | None:
            seen.append(len(text))
            return real.search(text)

    monkeypatch.setattr(aboutness, "_PREPOSITION_BEFORE", Counting())
    about("of her " * 3000, 4)
    assert len(seen) > 500 and max(seen) <= aboutness._PREPOSITION_REACH


@pytest.mark.parametrize(
    "text",
    [
        # A second review: a modal after a place or a day, or a wish in a clause, beside
        # what the user states, weighs that clause; a set phrase's "if" supposes nothing.
        "Rent could be lower here, so I live in Berlin now.",
        "I moved to Berlin, which would be ideal for work.",
        "Berlin might be expensive but I live there now.",
        "Monday could be my first day.",
        "If you need me, I live in Berlin now.",
        "If memory serves, I work at Google now.",
    ],
)
def test_what_the_user_states_beside_a_modal_or_a_set_if_states_in_reading_4(text: str) -> None:
    assert not about(text, 4).hypothetical


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("DeShawn moved to Atlanta last year.", "DeShawn"),
        ("LeBron lives in Ohio now.", "LeBron"),
        ("Their son lives in Atlanta with his partner now.", SOMEONE),
    ],
)
def test_an_inner_capital_or_their_relation_is_someone_elses_in_reading_4(
    text: str, subject: str
) -> None:
    assert about(text, 4).subject == subject


@pytest.mark.parametrize("text", ["A'" * 2000, "O'" * 2000, "Ab-" * 1333, "Ab-Cd" * 800])
def test_a_capital_before_a_modal_is_looked_for_at_the_opening_only(text: str) -> None:
    # The opening anchor keeps the search linear: one match attempt, not one per capital.
    assert aboutness._OTHERS_MODAL_4.pattern.startswith("^")
    assert not about(text, 4).hypothetical
