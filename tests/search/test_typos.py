"""Typo tolerance against the words documents hold: misspellings of long words are corrected to
real words, a word the workspace holds never is, and the words follow every write."""

from __future__ import annotations

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.worker import extract_pending, store_file_chunks
from subspace.splitting import Piece
from tests.search_helpers import ids, run

# Misspellings people make of long words -> the word a bullet holds. Several land outside the
# stem the stemmer keeps (hydrat|ion, irrig|ation, separ|ate), where the typed word and the
# stem are three or more edits apart.
MISSPELLINGS = {
    "hydratoin": "hydration",  # letters swapped in the ending
    "irrigaton": "irrigation",  # a letter left out of the ending
    "recieve": "receive",  # ie for ei
    "seperate": "separate",  # a vowel for another
    "acommodation": "accommodation",  # a double letter typed once
    "occurence": "occurrence",
    "neccessary": "necessary",  # a letter doubled
    "embarassment": "embarrassment",
    "enviroment": "environment",
    "goverment": "government",
    "maintainance": "maintenance",  # two edits
    "tommorow": "tomorrow",  # two edits
    "recomend": "recommend",
    "concious": "conscious",
    "threshhold": "threshold",
    "millenium": "millennium",
    "questionaire": "questionnaire",
    "arguement": "argument",
    "wierd": "weird",  # five letters: one edit at most
    "beleive": "believe",
    "calender": "calendar",
    "mitochondiral": "mitochondrial",
    "diabetse": "diabetes",
    "expresison": "expression",
}
SENTENCES = [
    "Hydration before the long ride",
    "Drip irrigation for the orchard",
    "You will receive the parcel on Monday",
    "Keep the samples separate",
    "Accommodation near the venue",
    "The occurrence of the rash",
    "Only the necessary files",
    "An embarrassment of riches",
    "See you tomorrow",
    "I recommend the soup",
    "A conscious choice",
    "Above the threshold",
    "The new millennium",
    "Fill in the questionnaire",
    "A strong argument",
    "A weird noise",
    "Environment variables for the build",
    "Government grants for farms",
    "Maintenance window on Sunday",
    "I believe the results",
    "The calendar for spring",
    "Mitochondrial DNA sequencing",
    "Diabetes screening at the clinic",
    "Expression of the protein",
    # Close to the stems of the misspellings, not to the words meant: "seper" is one edit
    # from "sever", "expresison" two from "expressor".
    "Severe weather closed the pass",
    "Expressor cells",
]


def test_misspellings_of_long_words_are_corrected_to_the_words_documents_hold(
    database: Database,
    cx: Context,
) -> None:
    page = commands.create_page(cx, "Notes")
    holder = {
        word: commands.add_node(cx, page.id, text).id
        for text in SENTENCES
        for word in MISSPELLINGS.values()
        if word in text.lower().split()
    }
    assert set(holder) == set(MISSPELLINGS.values())  # every word meant is in a bullet
    found = {}
    for typed in MISSPELLINGS:
        response = run(database, cx, typed, mode="lexical")
        found[typed] = (response.corrections.get(typed), ids(response))
    assert found == {typed: (word, [holder[word]]) for typed, word in MISSPELLINGS.items()}


def test_a_word_the_workspace_holds_is_never_corrected(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Notes")
    misspelt = commands.add_node(cx, page.id, "Please recieve the parcel")  # as written
    commands.add_node(cx, page.id, "You will receive the parcel")
    hydrated = commands.add_node(cx, page.id, "Hydrated soils")
    hydrating = commands.add_node(cx, page.id, "Hydrating drinks")
    bioreactors = commands.add_node(cx, page.id, "Bioreactors in tissue work")
    commands.add_node(cx, page.id, "Biomaterials for bone repair")
    independent = commands.add_node(cx, page.id, "An independent review")
    # Held as written, held as another form of its lexeme, one edit from another word held.
    for typed, holders in {
        "recieve": [misspelt.id],
        "Recieve": [misspelt.id],
        "hydrate": [hydrated.id, hydrating.id],
        "bioreactor": [bioreactors.id],
        # Misspelt with the word's own lexeme (independ): found, nothing to correct.
        "independant": [independent.id],
    }.items():
        response = run(database, cx, typed, mode="lexical")
        assert (response.corrections, sorted(ids(response))) == ({}, sorted(holders))
    # Not held, a word as close is corrected: the test can fail.
    assert run(database, cx, "bioreactros", mode="lexical").corrections == {
        "bioreactros": "bioreactors"
    }


def kept_words(database: Database) -> dict[str, str]:
    with database.pool.connection() as conn:
        return {r["word"]: r["lexeme"] for r in conn.execute("select * from search.words")}


SPELLED = """
select distinct w as word from (
    select left(title, 100000) as t from kb.pages
    union all select left(text, 100000) from kb.nodes
    union all select left(text, 100000) from search.file_chunks
    union all select left(concat_ws(' ', subject, sender, body_text), 100000) from kb.mail
) d cross join lateral search.spelled_words(d.t) w
where (ts_lexize('english_stem', w))[1] is not null
"""
HELD = "select distinct lexeme from search.term_stats where ndoc > 0"


def assert_words_match(database: Database) -> dict[str, str]:
    """Every word the tables spell is kept, and every word kept stems to a lexeme held."""
    kept = kept_words(database)
    with database.pool.connection() as conn:
        spelled = {r["word"] for r in conn.execute(SPELLED)}
        held = {r["lexeme"] for r in conn.execute(HELD)}
    assert spelled <= set(kept)
    assert set(kept.values()) <= held
    return kept


def test_the_words_follow_every_kind_of_write(database: Database, cx: Context) -> None:
    ws = cx.actor.workspace_id
    page = commands.create_page(cx, "Ferry timetable")
    station = commands.add_node(cx, page.id, "Hydration stations on the ferry")
    travellers = commands.add_node(cx, page.id, "Hydrated travellers")
    commands.add_node(cx, page.id, "Pier cafe", position=0)  # moves the others, not their words
    upload = commands.upload_file(cx, "notes.txt", b"Irrigation notes")
    commands.add_mail(cx, message_id="<w@x>", subject="Tamarind", body_text="Crates")
    extract_pending(database, cx.settings)
    with database.pool.connection() as conn, conn.transaction():
        store_file_chunks(conn, ws, upload.id, [Piece("Irrigation notes"), Piece("Sluice gates")])
    kept = assert_words_match(database)
    assert {w: kept.get(w) for w in ("hydration", "hydrated", "sluice", "tamarind", "ferry")} == {
        "hydration": "hydrat",
        "hydrated": "hydrat",
        "sluice": "sluic",
        "tamarind": "tamarind",
        "ferry": "ferri",
    }
    assert "the" not in kept
    assert "on" not in kept
    assert run(database, cx, "hydratoin", mode="lexical").corrections == {"hydratoin": "hydration"}

    commands.edit_node(cx, travellers.id, "Tickets sold out")
    commands.rename_page(cx, page.id, "Boat timetable")
    with database.pool.connection() as conn, conn.transaction():
        store_file_chunks(
            conn, ws, upload.id, [Piece("Drainage notes")]
        )  # extracted again, shorter
    kept = assert_words_match(database)
    # A word goes with the last document holding its lexeme; "hydrated" stays while
    # "hydration" holds its lexeme: still a word the workspace wrote.
    assert {"tickets", "boat", "drainage", "hydrated", "hydration", "ferry"} <= set(kept)
    assert not {"travellers", "irrigation", "sluice"} & set(kept)

    commands.delete_node(cx, station.id)
    kept = assert_words_match(database)
    assert not {"hydration", "hydrated", "stations", "ferry"} & set(kept)
    assert run(database, cx, "hydratoin", mode="lexical").corrections == {}
