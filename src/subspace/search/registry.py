"""The searchable kinds, declared once: where each is stored, how it is ranked, when it is
hidden and why, what row it hydrates to and how a ref names it.

A kind's rows (a page's title, a bullet, a file chunk, a mail) belong to an item (a page, a
file, a mail): the item carries the knowledge base, the tags and the user's exclusions, and
its reasons hide every row in it. A kind stored in its item's own table (a page title, a
mail) reads them from its own row; the others reach their item through `item_key`.

The legs, hydration, grep, read, explain and the lexical index read these declarations:
for them, adding a kind is one `register(...)` call (and the migration for its table, its
generated tsvector and its BM25 statistics triggers, as migration 0005 writes them). A kind
of a new item also needs what writes it: its commands, its outbox events
(outbox/events.py), its embeddings' chunks (indexer/desired.py, indexer/chunking.py), its
states (commands/states.py), and, to be grouped or debounced as pages are,
search/grouping.py and indexer/embeddings.py (ARCHITECTURE.md, "Still kind by
kind"). A kind is declared so:

    register(KindSpec("note", NOTE_ITEM, table="app.notes", alias="t", key="id",
                      item_key="id", text="body", tsv="body_tsv", length="body_len",
                      source="note", row_type="note"))

SQL conditions are functions of the alias they are written over, so one declaration serves
every query that names the table under another alias. They may use %(ws)s, %(user)s and
%(kbs)s, which every search binds (filters.Scope).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

Condition = Callable[[str], str]  # SQL over the row at the given alias
EmbeddingLink = Callable[[str, str], str]  # SQL joining the row at the first alias to the
# search.embeddings row at the second

_NAME = re.compile(r"[a-z][a-z_]*")  # kind, item and source names are quoted into SQL
_CURSOR_LETTER = re.compile(r"[a-z]")  # cursors.py reads a target as one letter and 32 hex
_QUALIFIED = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?")  # a table or a column


@dataclass(frozen=True)
class Reason:
    """One named reason a row is hidden from every search (and from grep and read).

    `visible` is the SQL condition that holds while the reason does not apply; `label` is
    what explain tells the user when it does ("filtered: archived").
    """

    name: str  # archived, deleted, excluded, disabled, processing, chunk_disabled
    label: str
    visible: Condition
    # For a reason that depends on who searches (the user's own exclusions): SQL listing the
    # ids of the items it hides from %(user)s in %(ws)s. The lexical engine's documents hold
    # the other reasons; these it is told at each search.
    hidden_items: str | None = None

    def hidden(self, alias: str) -> str:
        """SQL that is true when the row at `alias` is hidden for this reason (a condition
        that is null hides the row, as it does in a where clause)."""
        return f"not coalesce({self.visible(alias)}, false)"


ARCHIVED = Reason("archived", "archived", lambda a: f"{a}.archived_at is null")
DELETED = Reason("deleted", "soft-deleted", lambda a: f"{a}.deleted_at is null")
DISABLED = Reason("disabled", "the file is disabled", lambda a: f"{a}.enabled")
PROCESSING = Reason(
    "processing", "the file is not extracted yet", lambda a: f"{a}.status = 'ready'"
)
CHUNK_DISABLED = Reason("chunk_disabled", "this chunk is disabled", lambda a: f"{a}.enabled")


def excluded_by_user(item: str, key: str = "id") -> Reason:
    """The acting user (%(user)s) excluded the `item` (a name as kb.exclusions stores it)."""
    if not _NAME.fullmatch(item):
        raise ValueError(f"expected an item name of lowercase letters, got {item!r}")
    return Reason(
        "excluded",
        "excluded by you",
        lambda a: (
            f"not exists (select 1 from kb.exclusions x where x.workspace_id = {a}.workspace_id "
            f"and x.user_id = %(user)s and x.target_kind = '{item}' and x.target_id = {a}.{key})"
        ),
        hidden_items=(
            "select x.target_id from kb.exclusions x where x.workspace_id = %(ws)s "
            f"and x.user_id = %(user)s and x.target_kind = '{item}'"
        ),
    )


def joined(reasons: tuple[Reason, ...], alias: str) -> str:
    """SQL: none of `reasons` hides the row at `alias` ("true" when there are none)."""
    return " and ".join(reason.visible(alias) for reason in reasons) or "true"


@dataclass(frozen=True)
class ItemSpec:
    """What rows of a kind belong to: its table, key, knowledge base, title and reasons.

    `name` is how kb.exclusions and kb.tag_values name it (their target_kind). `row_id` is
    the field of a hydrated row (hydrate.Row) its id fills (page_id), and `row_columns` its
    columns that fill the row's fields of the same names (a mail's sender and sent_at).
    Its table has `updated_at`: browsing lists the most recently changed items first.
    The outbox events about such an item are declared in outbox/events.py under its name.
    """

    name: str  # page, file or mail
    table: str
    alias: str
    title: str  # the column shown as a row's title
    reasons: tuple[Reason, ...]
    key: str = "id"
    kb: str = "kb_id"  # its knowledge base
    row_id: str = ""
    row_columns: tuple[str, ...] = ()

    def visible(self, alias: str | None = None) -> str:
        """SQL: the item at `alias` (its own alias by default) is hidden for no reason."""
        return joined(self.reasons, alias or self.alias)


@dataclass(frozen=True)
class KindSpec:
    """One searchable kind: a table of texts with a generated tsvector, ranked by BM25.

    `target` is the kind a hit counts as (a memory is a node), `key` the column naming the
    target (a chunk's file: a file is one result however many chunks match), `item_key` the
    column naming the item. `only` picks this kind's rows of a table it shares with other
    kinds of the same BM25 `source`. `row_reasons` hide a single row (a disabled chunk);
    `asked_by_run` is true for a row an answer run asked with or wrote (searches that want
    sources only leave those out). `embedding` joins a row to its search.embeddings rows
    (by default the target id). `cursor_key` is the letter a cursor lists the kind's targets
    by before their id ("n<32 hex>"; its target's initial when empty): one letter per target
    kind, kept for good, since cursors users hold name targets by it. `grep` is false for a
    kind kb.grep leaves out (page titles: kb.read shows them, grep looks in what is written).
    `weight` scales the BM25 scores of the kind's source when the sources' hits are put in
    one order: a title counts for more than a passing mention of the same words. A kind
    whose rows are titles (`is_title`) goes first among the rows holding every word of a
    short lookup, as a quick switcher lists the page called what was typed.

    A kind `part_of` another is one of its fields, searched as a unit of its own with its own
    statistics (a file's name beside its chunks, a mail's subject beside its whole text): a
    filter on the other kind takes it too, and it is never a filter's name itself. Such a
    field has no embeddings of its own (`embedded`): the vector leg reads its item's.
    """

    name: str
    item: ItemSpec
    table: str
    alias: str
    key: str
    item_key: str
    text: str  # the column holding the searched text
    tsv: str  # its generated tsvector
    length: str  # its length in lexemes (migration 0005)
    source: str  # its BM25 statistics, as search.source_stats.source names them
    row_type: str  # hydrate.Row.type
    ref: tuple[str, ...] = ("id",)  # the columns after "<prefix>:" in a ref
    ref_prefix: str = ""  # "<target>" when empty
    target: str = ""  # the name when empty
    only: Condition | None = None
    row_reasons: tuple[Reason, ...] = ()
    asked_by_run: Condition | None = None
    embedding: EmbeddingLink | None = None
    cursor_key: str = ""
    grep: bool = True
    weight: float = 1.0
    is_title: bool = False
    part_of: str = ""
    crumbs: str = ""  # a text[] column of headings a row sits under, shown as its breadcrumb
    # The text holds inline Markdown (a bullet's): its passage is read through
    # search.passage_text (migration 0032), links as their text, code marks dropped.
    markdown: bool = False

    @property
    def target_kind(self) -> str:
        return self.target or self.name

    @property
    def filter_kind(self) -> str:
        """The kind a search filters this one by: the kind it is part of, else its own."""
        return self.part_of or self.name

    @property
    def embedded(self) -> bool:
        """Whether the indexer embeds rows of this kind (a field of another kind: no)."""
        return not self.part_of

    @property
    def cursor_letter(self) -> str:
        """The letter cursors list this kind's targets by: "n" for a node and a memory."""
        return self.cursor_key or self.target_kind[0]

    @property
    def prefix(self) -> str:
        return self.ref_prefix or self.target_kind

    @property
    def in_item_table(self) -> bool:
        """Whether the kind's rows are its items' rows (a page title, a mail)."""
        return self.table == self.item.table

    @property
    def ref_format(self) -> str:
        """How a ref names a row, e.g. `file:<file_id>:<n>`."""
        return ":".join([self.prefix, *(f"<{column}>" for column in self.ref)])

    def ref_of(self, *values: object) -> str:
        """The ref of a row from the values of its `ref` columns: ref_of(id) -> "page:<id>"."""
        if len(values) != len(self.ref):
            raise ValueError(f"expected {len(self.ref)} ref values, got {len(values)}")
        return ":".join([self.prefix, *map(str, values)])

    def ref_sql(self, alias: str | None = None) -> str:
        """SQL for the ref of the row at `alias`: `'file:' || c.file_id || ':' || c.n`."""
        a = alias or self.alias
        return f"'{self.prefix}:' || " + " || ':' || ".join(f"{a}.{c}" for c in self.ref)

    def item_link(self, alias: str | None = None, item_alias: str | None = None) -> str:
        """SQL joining the row at `alias` to its item at `item_alias`."""
        a, i = alias or self.alias, item_alias or self.item.alias
        return f"{i}.workspace_id = {a}.workspace_id and {i}.{self.item.key} = {a}.{self.item_key}"

    def embedding_link(self, alias: str | None = None, embedding: str = "e") -> str:
        """SQL joining the row at `alias` to the search.embeddings row at `embedding`."""
        a = alias or self.alias
        if self.embedding is not None:
            return self.embedding(a, embedding)
        return f"{a}.{self.key} = {embedding}.target_id"

    def row_visible(self, alias: str | None = None) -> str:
        """SQL: no row reason hides the row at `alias` ("true" when it has none)."""
        return joined(self.row_reasons, alias or self.alias)

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """Every reason that can hide a row of this kind: its item's, then its own."""
        return (*self.item.reasons, *self.row_reasons)


def is_memory(alias: str) -> str:
    """SQL: the node at `alias` is a memory. A memory is a node whose props say
    memory = true; everything else about it (table, page, BM25 source, ref) is a node's."""
    return f"{alias}.props->'memory' = 'true'::jsonb"


PAGE_ITEM = ItemSpec(
    "page", "kb.pages", "p", "title", (ARCHIVED, DELETED, excluded_by_user("page")),
    row_id="page_id",
)  # fmt: skip
# A file's row is titled by its label: the document's own title, else its name (0029).
FILE_ITEM = ItemSpec(
    "file", "kb.files", "f", "label",
    (DISABLED, PROCESSING, ARCHIVED, DELETED, excluded_by_user("file")), row_id="file_id",
)  # fmt: skip
MAIL_ITEM = ItemSpec(
    "mail", "kb.mail", "m", "subject", (ARCHIVED, DELETED, excluded_by_user("mail")),
    row_id="mail_id", row_columns=("sender", "sent_at"),
)  # fmt: skip

# A title's BM25 score beside its bullets': `subspace eval --titled` on SciFact (titles as page
# titles) measured nDCG@10 0.676 at 1, 0.652 at 1.5, 0.606 at 2 (docs/benchmarks.md, "Titles").
# What puts a title first is its rank among the rows holding every word (`is_title`).
TITLE_WEIGHT = 1.0
PAGE = KindSpec(
    "page", PAGE_ITEM, "kb.pages", "p", key="id", item_key="id", text="title",
    tsv="title_tsv", length="title_len", source="page", row_type="page", grep=False,
    cursor_key="p", weight=TITLE_WEIGHT, is_title=True,
)  # fmt: skip
NODE = KindSpec(
    "node", PAGE_ITEM, "kb.nodes", "n", key="id", item_key="page_id", text="text",
    tsv="text_tsv", length="text_len", source="node", row_type="node", cursor_key="n",
    markdown=True,
    only=lambda a: f"not coalesce({is_memory(a)}, false)",
    asked_by_run=lambda a: f"{a}.props ? 'run'",
)  # fmt: skip
MEMORY = replace(NODE, name="memory", row_type="mem", target="node", only=is_memory)
FILE = KindSpec(
    "file", FILE_ITEM, "search.file_chunks", "c", key="file_id", item_key="file_id",
    text="text", tsv="text_tsv", length="text_len", source="file", row_type="file",
    ref=("file_id", "n"), row_reasons=(CHUNK_DISABLED,), cursor_key="f", crumbs="headings",
    embedding=lambda a, e: (
        f"{a}.file_id = {e}.item_id and {a}.n = nullif(split_part({e}.ref, ':', 3), '')::int"
    ),
)  # fmt: skip
MAIL = KindSpec(
    "mail", MAIL_ITEM, "kb.mail", "m", key="id", item_key="id", text="body_text",
    tsv="mail_tsv", length="mail_len", source="mail", row_type="mail", cursor_key="m",
)  # fmt: skip
# A file's name and a mail's subject are titles of their own (migration 0020): a file called
# what was typed comes first, as a page does, however little of its text repeats its name.
# They weigh less than a page's title, which the workspace wrote for itself: on the product set
# (tests/relevance/product) lexical nDCG@10 was 0.9078 at 1, 0.9128 at 0.25, 0.5 and 0.75, the
# page titled "Team offsite Lisbon" then leading the mail "Lisbon offsite: flights booked".
FIELD_TITLE_WEIGHT = 0.75
FILE_NAME = KindSpec(
    "file_name", FILE_ITEM, "kb.files", "f", key="id", item_key="id", text="name",
    tsv="name_tsv", length="name_len", source="file_name", row_type="file", target="file",
    cursor_key="f", grep=False, weight=FIELD_TITLE_WEIGHT, is_title=True, part_of="file",
)  # fmt: skip
MAIL_SUBJECT = KindSpec(
    "mail_subject", MAIL_ITEM, "kb.mail", "m", key="id", item_key="id", text="subject",
    tsv="subject_tsv", length="subject_len", source="mail_subject", row_type="mail",
    target="mail", cursor_key="m", grep=False, weight=FIELD_TITLE_WEIGHT, is_title=True,
    part_of="mail",
)  # fmt: skip

_REGISTRY: dict[str, KindSpec] = {}


def register(spec: KindSpec) -> KindSpec:
    """Make `spec` searchable: the legs, hydration, explain, grep and read see it from now on.

    Kinds of one BM25 source share its table and columns (node and memory). A name taken is
    refused; `unregister` first to replace a kind.
    """
    if spec.name in _REGISTRY:
        raise ValueError(f"kind {spec.name!r} is already registered")
    for name in (spec.name, spec.item.name, spec.source, spec.target_kind, spec.prefix):
        if not _NAME.fullmatch(name):
            raise ValueError(f"expected a name of lowercase letters and _, got {name!r}")
    columns = (spec.table, spec.item.table, spec.key, spec.item_key, spec.text, spec.tsv,
               spec.length, spec.item.key, spec.item.kb, spec.item.title, *spec.ref,
               *spec.item.row_columns)  # fmt: skip
    for column in columns:
        if not _QUALIFIED.fullmatch(column):
            raise ValueError(f"expected a table or column name, got {column!r}")
    if spec.part_of:
        whole = _REGISTRY.get(spec.part_of)
        if whole is None or whole.part_of or whole.target_kind != spec.target_kind:
            raise ValueError(
                f"kind {spec.name!r} is part of {spec.part_of!r}, which must be a registered "
                "kind of the same target that is part of no other"
            )
    if not _CURSOR_LETTER.fullmatch(spec.cursor_letter):
        raise ValueError(f"expected a cursor key of one lowercase letter, got {spec.cursor_key!r}")
    for other in _REGISTRY.values():
        same_letter = other.cursor_letter == spec.cursor_letter
        if same_letter and other.target_kind != spec.target_kind:
            raise ValueError(
                f"kind {spec.name!r} would list its targets in cursors by "
                f"{spec.cursor_letter!r}, which {other.name!r} uses; declare another cursor_key"
            )
        if not same_letter and other.target_kind == spec.target_kind:
            raise ValueError(
                f"kind {spec.name!r} must list its targets in cursors by "
                f"{other.cursor_letter!r}, as {other.name!r} does: they are the same targets"
            )
        if other.row_type == spec.row_type and other.target_kind != spec.target_kind:
            raise ValueError(
                f"kind {spec.name!r} declares row type {spec.row_type!r}, which {other.name!r} "
                "uses for other targets"
            )
        if other.source == spec.source and (other.table, other.alias) != (spec.table, spec.alias):
            raise ValueError(
                f"kind {spec.name!r} shares source {spec.source!r} with {other.name!r} "
                "but not its table and alias"
            )
    _REGISTRY[spec.name] = spec
    return spec


@contextmanager
def replaced(spec: KindSpec) -> Iterator[None]:
    """`spec` in the place of the registered kind of its name while the block runs (the
    evaluation tries a title's other weights with it)."""
    old = _REGISTRY[spec.name]
    _REGISTRY[spec.name] = spec
    try:
        yield
    finally:
        _REGISTRY[spec.name] = old


def unregister(name: str) -> None:
    """Forget the kind `name` (safe to call twice)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> KindSpec:
    """The kind called `name`; KeyError when none is registered."""
    return _REGISTRY[name]


def registered() -> tuple[KindSpec, ...]:
    """Every kind, in the order registered (the built-in ones first)."""
    return tuple(_REGISTRY.values())


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def filter_names() -> tuple[str, ...]:
    """The kinds a search can be filtered by: every kind but the fields of another."""
    return tuple(name for name, spec in _REGISTRY.items() if not spec.part_of)


def with_parts(kinds: frozenset[str]) -> frozenset[str]:
    """`kinds` and every kind that is part of one of them: {"file"} -> {"file", "file_name"}."""
    return kinds | {spec.name for spec in _REGISTRY.values() if spec.part_of in kinds}


def target_of(name: str) -> str:
    """The kind a hit of kind `name` counts as: target_of("memory") == "node"."""
    return _REGISTRY[name].target_kind


def target_of_row(row_type: str) -> str:
    """The kind a hydrated row of type `row_type` counts as: target_of_row("mem") == "node"
    (the type itself when no kind declares it)."""
    return next(
        (spec.target_kind for spec in _REGISTRY.values() if spec.row_type == row_type), row_type
    )


def row_types() -> dict[str, str]:
    """The hydrated row type of each kind: {"memory": "mem", ...}."""
    return {spec.name: spec.row_type for spec in _REGISTRY.values()}


def sources() -> tuple[str, ...]:
    """The BM25 statistics sources, in the order of their first kinds."""
    return tuple(dict.fromkeys(spec.source for spec in _REGISTRY.values()))


def of_source(source: str) -> tuple[KindSpec, ...]:
    """The kinds ranked with the statistics of `source`, in the order registered."""
    return tuple(spec for spec in _REGISTRY.values() if spec.source == source)


def items() -> tuple[ItemSpec, ...]:
    """Every item the kinds belong to, in the order of their first kinds."""
    return tuple({spec.item.name: spec.item for spec in _REGISTRY.values()}.values())


def of_item(item: str) -> tuple[KindSpec, ...]:
    """The kinds whose rows belong to the item called `item`."""
    return tuple(spec for spec in _REGISTRY.values() if spec.item.name == item)


for _spec in (PAGE, NODE, MEMORY, FILE, MAIL, FILE_NAME, MAIL_SUBJECT):
    register(_spec)
