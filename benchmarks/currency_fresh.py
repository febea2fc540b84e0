"""Two more held-out users of the currency evaluation (format: ``currency_data.py``).

Written after memseal's currency rule, by someone who had not read the rule's code
or phrasing lists, so they measure its behaviour on phrasings it was not fitted to.
Like ``currency_held.py`` they are for checking a change (``currency_eval.py --split
held``), not for tuning to.
"""

from __future__ import annotations

# A sibling module: run as a script, this folder is on sys.path.
from currency_data import Q, S, T, User

__all__ = ["FRESH"]

SIPHO = User(
    name="sipho",
    split="held",
    sessions=(
        S(
            "2026-01-09",
            T("s01", "Hey, I'm Sipho. I'm an auditor at Deloitte in Johannesburg, nine years now."),
            T("s02", "Home is Melville, with my wife Naledi and our two boys."),
            T("s03", "Lwazi is nine and Ayanda is six, and between them they never stop talking."),
            T(
                "s04",
                "I've entered the Comrades Marathon in June, my first ultra, so I'm training.",
            ),
            T("s05", "Can you put together a 20-week training block for it?"),
            T("s06", "Only early mornings, before the school run."),
        ),
        S(
            "2026-01-27",
            T("s07", "Naledi teaches Grade 4 at a primary school in Parkhurst."),
            T("s08", "Our old dog Biscuit is a Jack Russell, fourteen and grey around the muzzle."),
            T("s09", "My audit partner is Thandi Mokoena, she signs off everything I touch."),
            T("s10", "I drive a 2012 VW Polo that's done 250,000 km and sounds like it."),
            T(
                "s11",
                "Had I stayed in Durban I'd probably be running my dad's hardware shop by now.",
            ),
            T("s12", "What are good snacks to carry on a long run?"),
            Q("Which suburb is our house in?", "static", cur=("s02",), say=("melville",)),
            Q("Who is the partner on my audits?", "static", cur=("s09",), say=("thandi",)),
        ),
        S(
            "2026-02-18",
            T("s13", "Busy season is brutal, three audits close in March."),
            T("s14", "Ayanda's first parents' evening is on March 12."),
            T(
                "s15",
                "My brother Bongani is an airline pilot, based in Cape Town, flying for FlySafair.",
            ),
            T("s16", "Can you explain IFRS 16 lease accounting in plain words?"),
            T("s17", "Use a coffee shop renting its premises as the example."),
            T("s18", "I drink too much Coke Zero, four cans a day at least."),
            Q(
                "What date do I meet Ayanda's teacher?",
                "date",
                cur=("s14",),
                say=("march 12",),
            ),
        ),
        S(
            "2026-03-11",
            T(
                "s19",
                "The school pushed Ayanda's parents' evening back a week, to March 19; the hall "
                "flooded.",
            ),
            T("s20", "I tore my calf on a 30k on Saturday, couldn't even walk home."),
            T("s21", "Physio's verdict: no Comrades for me this year. I've pulled out."),
            T("s22", "While it heals I'll do spinning classes at the Virgin Active."),
            T("s23", "Can you help me email the Comrades office to ask about deferring my entry?"),
            Q(
                "When's the parents' evening for my younger son?",
                "date",
                cur=("s19",),
                old=("s14",),
                say=("march 19",),
                was=("march 12",),
            ),
            Q(
                "Am I still doing the big ultra in June?",
                "negation",
                cur=("s21",),
                old=("s04",),
                say=("pulled out", "no comrades"),
                was=("entered+comrades",),
            ),
        ),
        S(
            "2026-04-08",
            T(
                "s24",
                "I resigned from Deloitte. From 1 May I'm a financial controller at Discovery in "
                "Sandton.",
            ),
            T("s25", "I'll report to Pieter van Wyk, the deputy CFO there."),
            T("s26", "Thandi threw me a farewell braai on Friday, I'm going to miss her."),
            T("s27", "Can you help me plan my first 90 days as a financial controller?"),
            T("s28", "Bongani got engaged to Zanele, they've been together six years."),
            T("s29", "Naledi says I must stop bringing work home, and she's right."),
            Q("Who is my brother marrying?", "other", cur=("s28",), say=("zanele",)),
        ),
        S(
            "2026-05-14",
            T("s30", "Two weeks in at Discovery; the Sandton campus is enormous."),
            T(
                "s31",
                "We traded in the Polo for a used Toyota Fortuner, the boys finally fit with "
                "their kit.",
            ),
            T("s32", "Biscuit died in his sleep on Sunday. The boys are heartbroken."),
            T("s33", "How do I explain to a six-year-old that our dog has died?"),
            T("s34", "Keep it gentle, he keeps asking when Biscuit is coming home."),
            Q(
                "Which company pays my salary?",
                "update",
                cur=("s24", "s30"),
                old=("s01",),
                say=("discovery",),
                was=("deloitte",),
            ),
            Q(
                "What am I driving these days?",
                "update",
                cur=("s31",),
                old=("s10",),
                say=("fortuner",),
                was=("polo",),
            ),
            Q(
                "Is our Jack Russell still with us?",
                "negation",
                cur=("s32",),
                old=("s08",),
                say=("biscuit+died",),
                was=("jack russell",),
            ),
        ),
        S(
            "2026-06-17",
            T("s35", "No more Coke Zero since the end of May, only water and rooibos."),
            T(
                "s36",
                "Pieter transferred to the Cape Town office, so since June I report directly to "
                "the CFO, Lindiwe Dube.",
            ),
            T("s37", "Lwazi made the under-11 A side for cricket!"),
            T(
                "s38",
                "Should we ever move to Cape Town, Naledi would want to live near Bongani in "
                "Muizenberg.",
            ),
            T("s39", "Lwazi turns ten in July; can you suggest a cricket-themed party?"),
            T("s40", "Budget is R3,000 and about fifteen kids."),
            Q(
                "How many cans of fizzy drink do I get through a day?",
                "stop",
                cur=("s35",),
                old=("s18",),
                say=("no more coke",),
                was=("four cans",),
            ),
            Q(
                "Who's my line manager at the moment?",
                "update",
                cur=("s36",),
                old=("s25",),
                say=("lindiwe",),
                was=("pieter",),
            ),
        ),
        S(
            "2026-07-29",
            T("s41", "Naledi started this term as deputy principal at her school, a big step up."),
            T("s42", "We've put in an offer on a house in Fourways, much closer to Sandton."),
            T("s43", "The transfer should go through on 1 September."),
            T(
                "s44",
                "My calf is healed: I'm running again, 5k three mornings a week, and I've quit "
                "spinning.",
            ),
            T(
                "s45",
                "Can you compare bond repayments at 11.75% over 20 and 30 years on R2.4 million?",
            ),
            T("s46", "Bongani has moved to flying the new Cape Town to Mauritius route."),
            T("s64", "Load-shedding went to stage 4 again last night, the whole street was dark."),
            Q(
                "What is my wife's position at the school?",
                "other",
                cur=("s41",),
                old=("s07",),
                say=("deputy principal",),
                was=("grade 4",),
            ),
            Q(
                "What do I do for exercise now?",
                "update",
                cur=("s44",),
                old=("s22",),
                say=("5k",),
                was=("spinning",),
            ),
        ),
        S(
            "2026-08-26",
            T("s47", "The bank's dragging its feet; the transfer is now 15 September."),
            T("s48", "Can you make a moving checklist for a family of four?"),
            T("s49", "Ayanda starts piano lessons in October, his own idea."),
            T("s50", "Thandi made partner at Deloitte, well deserved."),
            T("s51", "I booked the removal truck for the 16th."),
            T("s65", "Can you explain how a solar inverter and battery work together?"),
            Q(
                "When does the new house become ours?",
                "date",
                cur=("s47",),
                old=("s43",),
                say=("15 september",),
                was=("1 september",),
            ),
            Q("Do I have a pilot's licence?", "absent", trap=("s15", "s46"), lure=("pilot",)),
            Q(
                "Where does my brother fly to now?",
                "multihop",
                cur=(("s15",), ("s46",)),
                say=("mauritius",),
            ),
        ),
        S(
            "2026-10-06",
            T("s52", "We're in Fourways now, properly unpacked, and the boys love the garden."),
            T("s53", "The drive to Sandton is twenty minutes if the N1 behaves."),
            T("s54", "We adopted a rescue puppy, a brindle mix; the boys named him Mfana."),
            T("s55", "Can you help me write a thank-you note to our old neighbours in Melville?"),
            T("s56", "Mention the lemon tree they watered for us every December."),
            T(
                "s57",
                "I've signed up for the Soweto Marathon in November, a gentler goal than Comrades.",
            ),
            Q(
                "What part of Joburg do we live in?",
                "update",
                cur=("s52",),
                old=("s02",),
                trap=("s38",),
                say=("fourways",),
                was=("melville",),
            ),
            Q(
                "Do we have a dog?",
                "update",
                cur=("s54",),
                old=("s08", "s32"),
                say=("mfana",),
                was=("jack russell", "biscuit+died"),
            ),
            Q(
                "Which race am I preparing for?",
                "update",
                cur=("s57",),
                old=("s04",),
                say=("soweto",),
                was=("entered+comrades",),
            ),
        ),
        S(
            "2026-11-17",
            T("s58", "Finished Soweto in 4:05 and the calf held up fine."),
            T("s59", "Lindiwe asked me to lead the year-end close project."),
            T("s60", "Naledi's parents are coming up from Polokwane for Christmas."),
            T("s61", "Can you plan a Christmas braai menu for ten?"),
            T("s62", "No pork, Naledi's dad doesn't eat it."),
            T("s63", "Mfana chewed through the hosepipe, so that's my Saturday sorted."),
            Q("Where are my in-laws from?", "other", cur=("s60",), say=("polokwane",)),
            Q("Do I play cricket?", "absent", trap=("s37", "s39"), lure=("cricket",)),
            Q("Have I ever run a shop?", "absent", trap=("s11",), lure=("hardware",)),
            Q(
                "Do we own a home in Cape Town?",
                "absent",
                trap=("s38", "s15"),
                lure=("muizenberg",),
            ),
            Q(
                "How long is my drive to the office?",
                "multihop",
                cur=(("s53",), ("s24", "s30")),
                say=("twenty minutes",),
            ),
            Q(
                "Am I still on the Coke Zero?",
                "stop",
                cur=("s35",),
                old=("s18",),
                say=("no more coke",),
                was=("four cans",),
            ),
        ),
    ),
)

HELEN = User(
    name="helen",
    split="held",
    sessions=(
        S(
            "2026-01-06",
            T("h01", "Good morning. I'm Helen, retired now after thirty years as a librarian."),
            T(
                "h02",
                "My husband Ian and I have a flat in Morningside, Edinburgh, up three flights of "
                "stairs.",
            ),
            T("h03", "I sing alto with the Morningside community choir on Thursday evenings."),
            T("h04", "Could you help me write to the council about the potholes on our street?"),
            T("h05", "Firm but polite, please, I don't want to sound like a crank."),
        ),
        S(
            "2026-01-22",
            T("h06", "My daughter Fiona lives in Toronto and works as a paediatrician."),
            T("h07", "Our son Callum is in Aberdeen, an engineer on the offshore wind farms."),
            T("h08", "My GP is Dr Anand at the Bruntsfield practice."),
            T("h09", "I still drive, a little blue Honda Jazz, mostly to the big Tesco."),
            T("h10", "What's a good crossword for someone who finds the Times too hard?"),
            Q("Which evening do I have choir practice?", "static", cur=("h03",), say=("thursday",)),
            Q("Which doctor do I see?", "static", cur=("h08",), say=("anand",)),
        ),
        S(
            "2026-02-12",
            T("h11", "My knee replacement is booked for April 14 at the Royal Infirmary."),
            T("h12", "Fiona is expecting her second, due in August."),
            T(
                "h13",
                "If I were thirty years younger I'd go and live in Italy without a second thought.",
            ),
            T("h14", "I'm learning Italian on Duolingo, two hundred days in a row now."),
            T("h15", "Can you suggest some easy Italian novels for learners?"),
            Q("When is my operation?", "date", cur=("h11",), say=("april 14",)),
            Q("What does my daughter do for work?", "other", cur=("h06",), say=("paediatrician",)),
        ),
        S(
            "2026-03-09",
            T(
                "h16",
                "The hospital rang: the knee is now being done on May 5, the surgeon is off sick.",
            ),
            T(
                "h17",
                "The choir has shifted rehearsals to Tuesdays, the church hall was double-booked.",
            ),
            T("h18", "Callum has a new girlfriend, Morag, a marine biologist."),
            T("h19", "Could you make me a list of exercises to do before knee surgery?"),
            T("h20", "Nothing on the floor, I can't get back up easily."),
            Q(
                "What's the date of my knee surgery?",
                "date",
                cur=("h16",),
                old=("h11",),
                say=("may 5",),
                was=("april 14",),
            ),
            Q(
                "What night do I go to choir?",
                "update",
                cur=("h17",),
                old=("h03",),
                say=("tuesday",),
                was=("thursday",),
            ),
        ),
        S(
            "2026-04-02",
            T(
                "h21",
                "Ian and I have decided the stairs have beaten us: the flat goes up for sale.",
            ),
            T("h22", "We've seen a lovely bungalow in Musselburgh, near the harbour."),
            T(
                "h23",
                "My sister Jean is in North Berwick, so Musselburgh would put us halfway to her.",
            ),
            T("h24", "Can you explain what a home report is in Scotland?"),
            T("h25", "I've dropped Italian; the app was nagging me more than it was teaching me."),
            Q(
                "Am I keeping up my Italian lessons on the app?",
                "stop",
                cur=("h25",),
                old=("h14",),
                say=("dropped italian",),
                was=("duolingo",),
            ),
        ),
        S(
            "2026-05-20",
            T("h26", "The knee is done! Two weeks of physio so far, walking with one stick."),
            T(
                "h27",
                "Dr Anand retired at Easter, so I'm now seeing Dr Kowalski at the same practice.",
            ),
            T(
                "h28",
                "Ian is doing all the cooking while I'm laid up, we're eating a lot of omelettes.",
            ),
            T("h29", "Can you suggest some gentle recipes he could manage?"),
            T("h30", "He can't stand coriander."),
            T("h31", "Fiona says the baby is a girl; they're thinking of calling her Isla."),
            Q(
                "Who's my GP these days?",
                "update",
                cur=("h27",),
                old=("h08",),
                say=("kowalski",),
                was=("anand",),
            ),
            Q(
                "Where is my current GP based?",
                "multihop",
                cur=(("h27",), ("h08",)),
                say=("bruntsfield",),
            ),
        ),
        S(
            "2026-06-18",
            T("h32", "We got the keys to the bungalow in Musselburgh on Friday. No more stairs!"),
            T("h33", "The Morningside flat went to a young couple from Glasgow."),
            T(
                "h34",
                "I've given up driving. The surgeon said six weeks off anyway and I found I didn't "
                "miss it, so the Jazz went to a neighbour's grandson.",
            ),
            T("h35", "The 26 bus goes straight into town from the end of our road."),
            T("h36", "Could you help me write a change-of-address card for friends?"),
            T("h37", "I'll have to leave the Morningside choir, it's too far now."),
            T("h64", "The new neighbours brought round shortbread, which was kind."),
            Q(
                "Which town is our home in?",
                "update",
                cur=("h32",),
                old=("h02",),
                trap=("h23",),
                say=("musselburgh",),
                was=("morningside",),
            ),
            Q(
                "Do I still have the car?",
                "negation",
                cur=("h34",),
                old=("h09",),
                say=("given up driving",),
                was=("still drive",),
            ),
        ),
        S(
            "2026-07-29",
            T(
                "h38",
                "I've joined the Musselburgh Singers; they rehearse on Monday afternoons, "
                "perfect for me.",
            ),
            T("h39", "Callum has left Aberdeen; he and Morag have taken a cottage in Stonehaven."),
            T("h40", "Can you recommend some audiobooks for the bus?"),
            T("h41", "Something cosy, a detective series maybe."),
            T("h42", "I've started volunteering at the Musselburgh library on Wednesday mornings."),
            T(
                "h43",
                "If Ian and I ever got a dog it would have to be a small one, a Border terrier "
                "maybe.",
            ),
            Q(
                "When do I sing with my choir?",
                "update",
                cur=("h38",),
                old=("h17", "h03"),
                say=("monday",),
                was=("tuesday", "thursday"),
            ),
            Q(
                "Where is my son living?",
                "other",
                cur=("h39",),
                old=("h07",),
                say=("stonehaven",),
                was=("aberdeen",),
            ),
            Q(
                "What does my son's girlfriend do?",
                "multihop",
                cur=(("h07",), ("h18",)),
                say=("marine biologist",),
            ),
        ),
        S(
            "2026-08-27",
            T("h44", "Isla arrived on August 20, seven pounds two, Fiona and the baby both fine."),
            T("h45", "I'm flying to Toronto on September 10 to help out for a month."),
            T("h46", "Can you make me a packing list for a month in Canada in the autumn?"),
            T("h47", "I'll need to bring my knee exercise band."),
            T("h48", "Ian is staying home to keep an eye on the bungalow."),
            Q("When do I leave for Toronto?", "date", cur=("h45",), say=("september 10",)),
            Q(
                "What's my newest grandchild called?",
                "other",
                cur=("h44", "h31"),
                say=("isla",),
            ),
        ),
        S(
            "2026-09-03",
            T("h49", "Air Canada moved me onto a later flight, I now fly out on September 12."),
            T(
                "h50",
                "Fiona's husband Marc is taking paternity leave, so I'll only stay three weeks.",
            ),
            T("h51", "Could you check what I need to do for an eTA for Canada?"),
            T("h52", "I've got a British passport, valid until 2031."),
            T("h65", "It's poured for three days straight, the Forth looks like pewter."),
            Q(
                "What day is my flight to Canada?",
                "date",
                cur=("h49",),
                old=("h45",),
                say=("september 12",),
                was=("september 10",),
            ),
            Q(
                "How long will I be away in Canada?",
                "update",
                cur=("h50",),
                old=("h45",),
                say=("three weeks",),
                was=("for a month",),
            ),
        ),
        S(
            "2026-10-21",
            T("h53", "Back from Toronto. Isla is gorgeous and her big brother Noah is besotted."),
            T(
                "h54",
                "I'm back at Italian, an evening class at the Musselburgh library on Tuesdays.",
            ),
            T("h55", "My knee is brilliant now, I walked the whole promenade to Portobello."),
            T("h56", "Jean had a fall last week and broke her wrist."),
            T("h57", "Could you draft a get-well card for her?"),
            T(
                "h58",
                "Ian turns seventy on December 2 and I'm planning a surprise lunch for him that "
                "day.",
            ),
            T("h59", "I've booked the Italian place on the High Street, a table for twelve."),
            Q(
                "Am I studying any languages?",
                "update",
                cur=("h54",),
                old=("h25", "h14"),
                say=("evening class",),
                was=("dropped italian", "duolingo"),
            ),
            Q("Have I ever broken a bone?", "absent", trap=("h56",), lure=("wrist",)),
            Q("Do we have a dog?", "absent", trap=("h43",), lure=("terrier",)),
            Q("Have I ever lived in Italy?", "absent", trap=("h13",), lure=("italy",)),
        ),
        S(
            "2026-11-12",
            T(
                "h60",
                "The Italian on the High Street has shut for a refit, so Ian's surprise lunch is "
                "now at the golf club, on Sunday November 30.",
            ),
            T("h61", "Could you write the invitation? It must stay a secret from Ian!"),
            T("h62", "Fiona and the children might come over for Christmas, nothing's fixed."),
            T("h63", "Where's a good winter walk near Musselburgh?"),
            Q(
                "When is the surprise lunch for my husband?",
                "date",
                cur=("h60",),
                old=("h58",),
                say=("november 30",),
                was=("lunch+december 2",),
            ),
            Q(
                "Where are we holding Ian's lunch?",
                "update",
                cur=("h60",),
                old=("h59",),
                say=("golf club",),
                was=("italian place",),
            ),
            Q("When is my husband's birthday?", "other", cur=("h58",), say=("december 2",)),
        ),
    ),
)

FRESH: tuple[User, ...] = (SIPHO, HELEN)
