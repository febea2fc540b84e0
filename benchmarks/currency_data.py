"""The conversations of the currency evaluation (``currency_eval.py``), written by hand.

Four users talk to their agent over most of a year. Each user is a list of
sessions (a day), each session a list of entries: a statement :func:`T` (a turn
the user said, with an id) or a question :func:`Q` asked at that point of the
conversation, with its gold answer:

* ``cur``: the turn ids that hold the current answer. A tuple of ids is one
  group (any of them answers); a tuple of tuples is several groups, each of
  which must be found (a multi-hop question);
* ``old``: the turn ids holding a value the user later replaced, negated or
  stopped (the stale answer);
* ``trap``: for a question nothing in the conversation answers, the turns a
  careless memory would answer it with: a hypothetical, or another person's
  fact on that subject;
* ``say`` / ``was`` / ``lure``: words that mark a derived item (a compaction
  summary, a belief) as holding the current value, the stale one or the trap.
  Each entry is one or more words joined by ``+``, all of which must appear.

The phrasings vary on purpose (moves, job changes, negations and stops said in
many ways, the way people say them), and the questions are worded apart from
the statements. ``dev`` users are the ones to look at when changing memseal;
``held`` users (``currency_held.py``) are kept for checking a change, not for
tuning to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEV", "Q", "Question", "S", "Session", "Statement", "T", "User", "check"]


@dataclass(frozen=True)
class Statement:
    id: str
    text: str


@dataclass(frozen=True)
class Question:
    text: str
    kind: str
    cur: tuple[tuple[str, ...], ...] = ()
    old: tuple[str, ...] = ()
    trap: tuple[str, ...] = ()
    say: tuple[str, ...] = ()
    was: tuple[str, ...] = ()
    lure: tuple[str, ...] = ()


@dataclass(frozen=True)
class Session:
    day: str
    entries: tuple[Statement | Question, ...]


@dataclass(frozen=True)
class User:
    name: str
    split: str
    sessions: tuple[Session, ...] = field(default_factory=tuple)


def T(id: str, text: str) -> Statement:
    return Statement(id=id, text=text)


def Q(
    text: str,
    kind: str,
    *,
    cur: tuple[str, ...] | tuple[tuple[str, ...], ...] = (),
    old: tuple[str, ...] = (),
    trap: tuple[str, ...] = (),
    say: tuple[str, ...] = (),
    was: tuple[str, ...] = (),
    lure: tuple[str, ...] = (),
) -> Question:
    nested = bool(cur) and isinstance(cur[0], tuple)
    groups = tuple(tuple(g) for g in cur) if nested else (tuple(str(g) for g in cur),)
    groups = groups if cur else ()
    return Question(
        text=text, kind=kind, cur=groups, old=old, trap=trap, say=say, was=was, lure=lure
    )


def S(day: str, *entries: Statement | Question) -> Session:
    return Session(day=day, entries=entries)


MAYA = User(
    name="maya",
    split="dev",
    sessions=(
        S(
            "2026-01-08",
            T("m01", "Hi! I'm Maya, a data engineer, and I live in Berlin, in Kreuzberg."),
            T("m02", "I work at Siemens on the energy analytics team."),
            T("m03", "My manager there is Jonas Weber, he's great at keeping meetings short."),
            T("m04", "Could you help me write a short bio for a conference talk?"),
            T("m05", "Make it less formal please, and drop the bit about awards."),
        ),
        S(
            "2026-01-20",
            T("m06", "I run 10k every Sunday morning along the canal."),
            T("m07", "My brother Tomas lives in Vienna and works as a nurse."),
            T("m08", "If I ever moved abroad again I think I'd pick Montreal."),
            T("m09", "Remind me that the dentist appointment is on February 3."),
            T("m10", "What's a good stretching routine after long runs?"),
            Q("Where am I living at the moment?", "static", cur=("m01",), say=("berlin",)),
            Q("When do I have to see the dentist?", "date", cur=("m09",), say=("february 3",)),
        ),
        S(
            "2026-02-02",
            T("m11", "My personal website is hosted on GitHub Pages."),
            T("m12", "I drink two espressos every morning before work."),
            T("m13", "We booked a trip to Japan for October, ten days in Kyoto and Tokyo."),
            T("m14", "Tomas is thinking about getting a dog."),
            T("m15", "Can you suggest a title for a blog post about data contracts?"),
            T("m15b", "The Berlin winter is brutal this year, minus twelve this morning."),
            Q("Who do I report to?", "static", cur=("m03",), say=("jonas",)),
        ),
        S(
            "2026-03-05",
            T("m16", "Since March my manager is Priya Nair; Jonas went to the Munich office."),
            T("m17", "Priya sits in our Hamburg office, so our one-on-ones are video calls."),
            T("m18", "I moved my website over to Netlify, the builds are much faster."),
            T("m19", "The quarterly review went fine, nothing dramatic."),
            T("m19b", "Can you explain the difference between a data lake and a warehouse?"),
            Q(
                "Who's my boss these days?",
                "update",
                cur=("m16",),
                old=("m03",),
                say=("priya",),
                was=("jonas",),
            ),
            Q(
                "Which office is my manager based in?",
                "multihop",
                cur=(("m16",), ("m17",)),
                old=("m03",),
                say=("hamburg",),
                was=("jonas",),
            ),
        ),
        S(
            "2026-04-10",
            T("m20", "Big news: I accepted an offer from Zalando and I start there on May 1."),
            T("m21", "Honestly I'm going to miss the Siemens canteen."),
            T("m22", "Could you help me write a goodbye message for my team?"),
            T("m23", "I gave up coffee for Lent and I'm keeping it that way."),
            T("m23b", "Shorter, and mention the hackathon we won together."),
            Q(
                "Do I still have my morning espresso?",
                "negation",
                cur=("m23",),
                old=("m12",),
                say=("coffee+gave up",),
                was=("espresso",),
            ),
        ),
        S(
            "2026-05-04",
            T("m24", "First week at Zalando done, the onboarding was really well organised."),
            T("m25", "My team lead at Zalando is Ines Costa."),
            T("m26", "Tomas has a new job, he's working at a bank in Vienna now."),
            T("m27", "My knee has been bad, the physio says no running for a while."),
            T("m27b", "What should I read to get up to speed on fashion e-commerce?"),
            Q(
                "Which company am I working for?",
                "update",
                cur=("m20", "m24"),
                old=("m02",),
                say=("zalando",),
                was=("siemens",),
            ),
            Q(
                "What does my brother do for a living?",
                "other",
                cur=("m26",),
                old=("m07",),
                say=("bank",),
                was=("nurse",),
            ),
        ),
        S(
            "2026-06-15",
            T("m28", "We relocated to Lisbon last week! The flat is in Alfama."),
            T("m29", "The hills here are no joke, my knee is complaining."),
            T("m30", "I stopped running altogether; I swim twice a week now instead."),
            T("m31", "Please help me translate a note to my new landlord into Portuguese."),
            T("m31b", "Thanks, that reads well. Add that the boiler is leaking."),
            Q(
                "What city is home now?",
                "update",
                cur=("m28",),
                old=("m01",),
                trap=(),
                say=("lisbon",),
                was=("berlin",),
            ),
            Q(
                "Which sport do I do these days?",
                "stop",
                cur=("m30",),
                old=("m06",),
                say=("swim",),
                was=("10k",),
            ),
        ),
        S(
            "2026-07-02",
            T("m32", "We cancelled the Japan trip, the flights got too expensive after the move."),
            T("m33", "Instead we might do a long weekend in the Algarve in October."),
            T("m34", "If I had a dog I'd call it Pixel."),
            T("m35", "Tomas and his wife are expecting a baby in December."),
            T("m35b", "Could you list some beaches near Lagos that aren't too crowded?"),
            Q(
                "Am I still flying to Kyoto in the autumn?",
                "negation",
                cur=("m32",),
                old=("m13",),
                say=("cancel",),
                was=("booked",),
            ),
            Q("Is my brother about to become a dad?", "other", cur=("m35",), say=("baby",)),
        ),
        S(
            "2026-08-19",
            T("m36", "I'm learning Portuguese on Tuesday evenings at a school in Baixa."),
            T("m37", "The Zalando office here is remote-first, I only go in on Thursdays."),
            T("m38", "My website moved again, it's on Cloudflare Pages now."),
            T("m39", "Can you give me a recipe for pastel de nata?"),
            T("m39b", "Too much sugar, can you halve it?"),
            Q(
                "Where is my personal site hosted?",
                "update",
                cur=("m38",),
                old=("m11", "m18"),
                say=("cloudflare",),
                was=("github", "netlify"),
            ),
            Q(
                "Who is my manager now?",
                "update",
                cur=("m25",),
                old=("m16", "m03"),
                say=("ines",),
                was=("priya", "jonas"),
            ),
            Q("Do I have a dog?", "absent", trap=("m34", "m14"), lure=("pixel", "dog")),
            Q("Have I ever lived in Canada?", "absent", trap=("m08",), lure=("montreal",)),
            Q(
                "What did I say on 2 July about our travel plans?",
                "date",
                cur=("m32",),
                old=("m13",),
                say=("cancel",),
                was=("booked",),
            ),
        ),
        S(
            "2026-09-23",
            T("m40", "Tomas came to visit, we walked all the way to Belém."),
            T("m41", "I'm a bit worried about the Portuguese exam in November."),
            T("m42", "Can you quiz me on irregular verbs?"),
            T("m43", "The exam moved to December 2 because the school double-booked the room."),
            T(
                "m44",
                "I'm no longer on the payments team, I switched to the search team in September.",
            ),
            T("m45", "Help me plan a birthday dinner for eight people."),
            T("m46", "Can you recommend a fado bar that isn't a tourist trap?"),
            T("m47", "My Berlin friends are visiting in November, I can't wait."),
            T("m48", "Remind me to register my address at the Loja do Cidadão."),
            Q("What's my partner called?", "absent", trap=("m35",), lure=("wife",)),
            Q(
                "Which neighbourhood is my flat in?",
                "update",
                cur=("m28",),
                old=("m01",),
                say=("alfama",),
                was=("kreuzberg",),
            ),
            Q(
                "What's my morning caffeine habit?",
                "negation",
                cur=("m23",),
                old=("m12",),
                say=("coffee+gave up",),
                was=("espresso",),
            ),
            Q(
                "When is my Portuguese exam?",
                "date",
                cur=("m43",),
                old=("m41",),
                say=("december 2",),
                was=("november",),
            ),
            Q(
                "Do I still go jogging on Sundays?",
                "stop",
                cur=("m30",),
                old=("m06",),
                say=("stopped running",),
                was=("10k",),
            ),
            Q("Where does my brother live?", "other", cur=("m07", "m26"), say=("vienna",)),
        ),
    ),
)

RAVI = User(
    name="ravi",
    split="dev",
    sessions=(
        S(
            "2026-01-12",
            T("r01", "Morning. Quick context: I'm Ravi, I teach maths at a secondary school."),
            T("r02", "I'm based in Manchester, in a terrace in Levenshulme."),
            T("r03", "My partner Ellie is a vet at a small-animal clinic in Stockport."),
            T("r04", "I go to PureGym three times a week after school."),
            T("r05", "Can you make me a worksheet on simultaneous equations?"),
            T("r06", "Pitch it at year 10, not too many fractions."),
        ),
        S(
            "2026-01-30",
            T("r07", "I've been vegetarian for about eight years."),
            T("r08", "I drive a 2015 Golf, it's falling apart a bit."),
            T("r09", "If we ever had a big garden I'd keep chickens."),
            T("r10", "My friend Sam just moved to Glasgow for a new job."),
            T("r11", "What's a good vegetarian curry for a dinner party?"),
            Q("Which town do I live in?", "static", cur=("r02",), say=("manchester",)),
            Q("What do I do for work?", "static", cur=("r01",), say=("teach",)),
        ),
        S(
            "2026-02-21",
            T("r12", "Ellie's birthday is on 12 April, I need ideas."),
            T(
                "r13",
                "We're moving to Leeds at Easter, Ellie got a partner post at a practice there.",
            ),
            T("r14", "The Leeds flat lease runs until 31 August."),
            T("r15", "Could you help me draft a letter to the letting agent?"),
            T("r15b", "Say we'd like to view it on a Saturday."),
            T("r46", "Ellie wants to adopt a greyhound once we've moved."),
            T("r47", "Can you summarise the pros and cons of a fixed-rate mortgage?"),
            T("r48", "We're not buying yet, just curious."),
            Q("When is Ellie's birthday?", "other", cur=("r12",), say=("12 april",)),
        ),
        S(
            "2026-04-18",
            T("r16", "Moving day went smoothly, we're in Leeds now, near Hyde Park."),
            T(
                "r17",
                "I left teaching. As of this month I'm an analyst at a fintech called Ledgerly.",
            ),
            T("r18", "Ledgerly's office is at Leeds Dock, a twenty minute cycle."),
            T("r19", "I cancelled my gym membership, there's no PureGym near us."),
            T("r20", "Recommend a beginner's book on SQL?"),
            Q(
                "Where am I living?",
                "update",
                cur=("r16",),
                old=("r02",),
                trap=("r10",),
                say=("leeds",),
                was=("manchester",),
            ),
            Q(
                "What's my job?",
                "update",
                cur=("r17",),
                old=("r01",),
                say=("analyst",),
                was=("teach",),
            ),
            Q(
                "How far is my office from home?",
                "multihop",
                cur=(("r18",), ("r16", "r17")),
                say=("twenty minute",),
            ),
        ),
        S(
            "2026-05-09",
            T("r21", "Sold the Golf last weekend; I cycle everywhere now."),
            T("r22", "Ellie's clinic is relocating to Harrogate in the summer."),
            T("r23", "Can you explain what a reconciliation job is?"),
            T("r24", "My manager at Ledgerly is Fatima, she used to be a quant."),
            T("r25", "Sam says Glasgow is great but it never stops raining."),
            Q(
                "What car do I have?",
                "negation",
                cur=("r21",),
                old=("r08",),
                say=("sold",),
                was=("2015 golf",),
            ),
            Q(
                "Am I a member of a gym?",
                "negation",
                cur=("r19",),
                old=("r04",),
                say=("cancel",),
                was=("three times a week",),
            ),
        ),
        S(
            "2026-06-14",
            T("r26", "I started eating fish again in June, so pescatarian now I suppose."),
            T("r27", "Suppose I went back to teaching, I'd want a sixth-form college."),
            T("r28", "Let's plan a barbecue for Saturday, eight people."),
            T("r29", "Half of them don't eat meat."),
            T("r30", "Ellie's mum is coming to stay for two weeks."),
            Q(
                "Am I vegetarian?",
                "update",
                cur=("r26",),
                old=("r07",),
                say=("pescatarian",),
                was=("vegetarian for",),
            ),
            Q("Who is my line manager?", "static", cur=("r24",), say=("fatima",)),
        ),
        S(
            "2026-07-22",
            T("r31", "We extended the lease to the end of November."),
            T("r32", "Thinking of buying a road bike, budget around 900 pounds."),
            T("r33", "Fatima is moving to the London office in September."),
            T("r34", "From September I'll report to Greg instead."),
            T("r35", "Could you compare two bikes for me?"),
            Q(
                "When does our lease end?",
                "date",
                cur=("r31",),
                old=("r14",),
                say=("november",),
                was=("31 august",),
            ),
            Q("Where is my partner's clinic going?", "other", cur=("r22",), say=("harrogate",)),
        ),
        S(
            "2026-09-10",
            T(
                "r36",
                "We're no longer in Leeds: we bought a house in York and moved in on Saturday.",
            ),
            T("r37", "The commute is a train now, 25 minutes to Leeds."),
            T("r38", "I'm training for the York 10k in October."),
            T("r39", "Can you help me with a training plan?"),
            T("r40", "Three runs a week max, I still cycle on the other days."),
            T("r49", "The train was cancelled again this morning, third time this month."),
            T("r50", "Recommend a podcast about economics for the commute?"),
            Q(
                "What city do we live in now?",
                "update",
                cur=("r36",),
                old=("r16", "r02"),
                trap=("r10", "r22"),
                say=("york",),
                was=("leeds", "manchester"),
            ),
            Q(
                "How do I get to work these days?",
                "update",
                cur=("r37",),
                old=("r18", "r21"),
                say=("train",),
                was=("cycle",),
            ),
            Q(
                "Who do I report to at work?",
                "update",
                cur=("r34",),
                old=("r24",),
                say=("greg",),
                was=("fatima",),
            ),
        ),
        S(
            "2026-10-15",
            T("r41", "Ran the 10k in 52 minutes, pretty happy with that."),
            T("r42", "Ellie's sister is getting married in Bath next spring."),
            T("r43", "What's a good present for a wedding we barely know the couple for?"),
            T("r44", "Around 60 pounds."),
            T("r45", "My old school asked if I'd tutor year 11 on Saturdays; I said no."),
            Q("Do I keep chickens?", "absent", trap=("r09",), lure=("chickens",)),
            Q("Which university did I study at?", "absent", trap=("r10", "r25"), lure=("glasgow",)),
            Q(
                "Do I still teach maths?",
                "negation",
                cur=("r17", "r45"),
                old=("r01",),
                say=("analyst", "said no"),
                was=("teach maths",),
            ),
            Q("Am I getting married?", "absent", trap=("r42",), lure=("married",)),
            Q(
                "Do I eat fish?",
                "update",
                cur=("r26",),
                old=("r07",),
                say=("fish",),
                was=("vegetarian for",),
            ),
            Q(
                "What did I tell you on 14 June about my diet?",
                "date",
                cur=("r26",),
                old=("r07",),
                say=("pescatarian",),
                was=("vegetarian for",),
            ),
        ),
    ),
)

DEV: tuple[User, ...] = (MAYA, RAVI)


def check(users: tuple[User, ...]) -> None:
    """Raise ValueError where the data contradicts itself: an id used twice, a gold id not
    stated before its question, an absent question with an answer or no trap."""
    for user in users:
        said: set[str] = set()
        for session in user.sessions:
            for entry in session.entries:
                if isinstance(entry, Statement):
                    if entry.id in said:
                        raise ValueError(f"{user.name}: {entry.id} is used twice")
                    said.add(entry.id)
                    continue
                named = {i for group in entry.cur for i in group} | set(entry.old + entry.trap)
                if not named <= said:
                    raise ValueError(f"{entry.text!r}: {sorted(named - said)} not said before")
                if (entry.kind == "absent") != (not entry.cur):
                    raise ValueError(f"{entry.text!r}: an absent question has no answer")
                if entry.kind == "absent" and not (entry.trap and entry.lure):
                    raise ValueError(f"{entry.text!r}: an absent question needs its traps")
                if entry.cur and not entry.say:
                    raise ValueError(f"{entry.text!r}: `say` is empty")
                if entry.old and not entry.was:
                    raise ValueError(f"{entry.text!r}: `was` is empty")
