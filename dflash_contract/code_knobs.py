"""Settings a program passes in its own code: keyword arguments (and configuration-dict keys) of common libraries
that decide which code runs and how much of it, each with the library's default.

``sources.outside`` records where the program's files on disk pass one (``KnobUse``: the line, the call, the value
where it is a literal, the configuration key it is read from otherwise); ``analysis.mechanisms`` ties each to the
code it decides (``Mechanism.arguments``), and ``setting-slows-code`` names it where that code takes a measured share
of a thread whose speed is the program's. Only names in this catalogue are recorded: a program's other arguments,
and their values, are never read out of its files.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CodeKnob:
    name: str  # the keyword (or configuration key) as the library spells it
    default: str  # the library's default, as Python writes it
    # The callables that take it, by their last dotted name; () where the name alone is the library's (a
    # configuration dict's key such as pydantic's ``regex_engine``). A name starting "PRAGMA " is SQL text: the
    # callables' first argument, ``PRAGMA name = value``.
    calls: tuple[str, ...]
    effect: str  # what a value away from the default makes the library do
    # The call's positional argument that is the setting (``sys.set_coroutine_origin_tracking_depth(64)``: 0); None
    # where it is passed by keyword only. A knob with a position is named as its callable is.
    position: int | None = None


CODE_KNOBS: tuple[CodeKnob, ...] = (
    CodeKnob("cached_statements", "128", ("connect",),
             "sqlite3 keeps this many compiled statements per connection; an execute whose SQL is not among them "
             "compiles it again (0: every execute)"),
    CodeKnob("regex_engine", "'rust-regex'", (),
             "pydantic checks string patterns with this engine: 'python-re' calls Python's re module, with the GIL "
             "held, for every value checked"),
    CodeKnob("revalidate_instances", "'never'", (),
             "pydantic validates every model instance passed into a model again, and copies it, where 'always' "
             "(or 'subclass-instances' for subclasses)"),
    CodeKnob("indent", "None", ("dumps",),
             "json.dumps with an indent encodes in Python, not with the C encoder"),
    CodeKnob("engine", "'c'", ("read_csv", "read_table", "read_fwf"),
             "pandas parses with its pure-Python parser where engine='python'"),
    CodeKnob("compresslevel", "9", ("open", "GzipFile", "BZ2File", "compress"),
             "gzip and bz2 compress at this level (9: the slowest, the default of gzip.open)"),
    # SQLite's settings passed as SQL text (``con.execute("PRAGMA foreign_keys = ON")``): the name is the statement's.
    CodeKnob("PRAGMA foreign_keys", "OFF", ("execute", "executescript"),
             "SQLite checks the child tables on every change of a parent row where ON: each DELETE or UPDATE of a "
             "parent row looks up its children, a scan of the child table where its key column has no index"),
    CodeKnob("PRAGMA automatic_index", "ON", ("execute", "executescript"),
             "SQLite builds a temporary index for a join or lookup on a column without one where ON; OFF: the query "
             "scans the inner table once for every row of the outer one"),
    CodeKnob("PRAGMA synchronous", "FULL", ("execute", "executescript"),
             "SQLite syncs its files to storage at each commit (FULL, EXTRA) or not (OFF, NORMAL in WAL mode)"),
    CodeKnob("PRAGMA cache_size", "-2000", ("execute", "executescript"),
             "SQLite keeps this many pages (a negative value: KiB) of the database in its cache per connection"),
    CodeKnob("cache_capacity", "10000", ("BPE", "from_file"),
             "tokenizers' BPE model keeps this many words' merges in its cache: a word not in it is merged again from "
             "its characters, pair by pair (0: no cache, every word every time)"),
    CodeKnob("use_fast", "True", ("from_pretrained",),
             "transformers' tokenizers run in Python where use_fast=False, not in the Rust tokenizers library"),
    CodeKnob("optimize", "False", ("einsum",),
             "np.einsum plans the contraction and hands its pairwise products to BLAS (tensordot) where optimize is "
             "True, 'greedy' or 'optimal'; False, its default, evaluates every contraction in NumPy's own nested "
             "loops"),
    # Settings passed as a call's positional argument: per thread or per process, set once, paid on every use.
    CodeKnob("set_coroutine_origin_tracking_depth", "0", ("set_coroutine_origin_tracking_depth",),
             "every coroutine the calling thread creates records the stack it was created from, this many frames "
             "deep (its cr_origin): the interpreter walks the frames and builds a tuple per frame at each creation",
             position=0),
    CodeKnob("setbufsize", "8192", ("setbufsize",),
             "NumPy's ufuncs copy and cast buffered operands in chunks of this many elements: a small buffer "
             "makes many more, shorter passes", position=0),
)
KNOB_BY_NAME: dict[str, CodeKnob] = {k.name: k for k in CODE_KNOBS}
# The knobs passed positionally, by the callable's last dotted name.
KNOB_BY_CALL: dict[str, CodeKnob] = {c: k for k in CODE_KNOBS if k.position is not None for c in k.calls}
SQL_PREFIX = "PRAGMA "
# A pragma statement whose name the program computes (``f"PRAGMA {name} = {value}"``): the catalogued pragmas are
# then looked up by name in its configuration files.
SQL_ANY = "PRAGMA *"
