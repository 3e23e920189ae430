"""Vectorized expansion of Slurm hostlists (``gpu[001-004,010],login1``).

A 4M-record history has far too many rows for a per-row Python call, so the common shapes
(a plain host, or ``prefix[ranges]``) are expanded with polars; anything else (several bracket
groups in one name, suffixes after brackets) goes to python-hostlist, once per distinct string.
Equivalence with python-hostlist is property-tested.
"""

from __future__ import annotations

import re
import threading

import hostlist
import polars as pl

from aegis_slurm.accounting.errors import AccountingInputError

# One top-level host group: text outside brackets, optionally with bracket groups.
_GROUP = r"[^,\[\]]+(?:\[[^\]]*\][^,\[\]]*)*"
_SIMPLE_BRACKET = r"^([^\[\]]*)\[([^\]]*)\]$"
_RANGE_ITEM = r"^(\d+)(?:-(\d+))?$"
_NO_NODES = ("", "None assigned", "None", "(null)")
#: Refuse absurd lists ("node[0-99999999]", or forty ranges of 25,000) instead of exhausting
#: memory: the bound is on the whole expanded list, not on each range.  No Slurm cluster has
#: this many nodes.
MAX_NODES_PER_LIST = 100_000


class HostlistError(AccountingInputError):
    """A node list that is not valid hostlist syntax."""


def expand_one(node_list: str | None) -> list[str]:
    """Expand a single hostlist with python-hostlist (the reference implementation here)."""
    if node_list is None or node_list.strip() in _NO_NODES:
        return []
    try:
        return hostlist.expand_hostlist(node_list)
    except hostlist.BadHostlist as exc:
        raise HostlistError(f"bad hostlist {node_list!r}: {exc}") from exc


def expand_series(
    node_lists: pl.Series, cache: HostlistCache | None = None
) -> tuple[pl.Series, pl.Series]:
    """Expand every hostlist in ``node_lists``.

    Returns ``(nodes, bad)``: a ``list[str]`` series aligned with the input and a boolean series
    marking values that are not valid hostlists (their ``nodes`` is an empty list).  With a
    ``cache``, only hostlists it has not seen yet are expanded.
    """
    keys = pl.DataFrame({"node_list": node_lists.fill_null("")})
    if cache is None:
        table = expansion_table(keys.get_column("node_list").unique())
    else:
        table = cache.table_for(keys.get_column("node_list"))
    joined = keys.join(table, on="node_list", how="left", maintain_order="left")
    return joined.get_column("nodes"), joined.get_column("bad")


class HostlistCache:
    """Expansions already made, shared by the pieces of one ingest (thread-safe).

    A cluster's history repeats the same node lists millions of times (every single-node job on
    one of a few thousand nodes), so expanding each distinct list once per ingest instead of once
    per piece removes most of the expansion work.  Bounded: past ``max_entries`` distinct lists
    or ``max_names`` names in all, new ones are still expanded, just no longer kept.
    """

    def __init__(self, max_entries: int = 200_000, max_names: int = 10_000_000) -> None:
        self.max_entries = max_entries
        # Also bounded by names: 200,000 lists of a big cluster's 4,096 nodes would be 800M.
        self.max_names = max_names
        self._names = 0
        self._table = expansion_table(pl.Series("node_list", [], pl.String))
        self._lock = threading.Lock()

    def table_for(self, node_lists: pl.Series) -> pl.DataFrame:
        """An expansion table (node_list, nodes, bad) covering every value of ``node_lists``."""
        known = self._table  # replaced, never mutated: safe to read without the lock
        seen = node_lists.is_in(known.get_column("node_list").implode())
        if seen.all():
            return known
        fresh = expansion_table(node_lists.filter(~seen).unique())
        fresh_names = int(fresh.get_column("nodes").list.len().sum())
        with self._lock:
            if (
                self._table.height + fresh.height <= self.max_entries
                and self._names + fresh_names <= self.max_names
            ):
                self._names += fresh_names
                self._table = pl.concat([self._table, fresh]).unique(
                    "node_list", keep="first", maintain_order=True
                )
        return pl.concat([known, fresh])


#: Names expanded in one pass: the intermediate frames cost ~200 bytes a name, so 3,000 distinct
#: 4,096-node lists (a big cluster's month) took 2.4 GB in one pass; in batches, a few hundred MB.
_BATCH_NAMES = 1_000_000


def expansion_table(distinct: pl.Series) -> pl.DataFrame:
    """``node_list -> (nodes, bad)`` for distinct hostlist strings (in batches of bounded size)."""
    sizes = _estimated_sizes(distinct)
    if distinct.len() <= 1 or sizes.sum() <= _BATCH_NAMES:
        return _expansion_table(distinct)
    batch = (sizes.cum_sum() // _BATCH_NAMES).alias("batch")
    parts = pl.DataFrame({"node_list": distinct, "batch": batch}).partition_by(
        "batch", maintain_order=True, include_key=False
    )
    return pl.concat([_expansion_table(part.get_column("node_list")) for part in parts])


def _estimated_sizes(distinct: pl.Series) -> pl.Series:
    """About how many names each hostlist expands to (ranges summed; for batching only)."""
    text = distinct.fill_null("")
    bounds = pl.element().str.split("-")
    span = (
        bounds.list.get(1).cast(pl.Int64, strict=False)
        - bounds.list.get(0).cast(pl.Int64, strict=False)
        + 1
    )
    ranges = (
        text.str.extract_all(r"\d+-\d+")
        .list.eval(span.clip(1, MAX_NODES_PER_LIST).fill_null(0))
        .list.sum()
        .fill_null(0)
    )
    return ranges + text.str.count_matches(",", literal=True) + 1


def _expansion_table(distinct: pl.Series) -> pl.DataFrame:
    """``node_list -> (nodes, bad)`` for distinct hostlist strings, in one pass."""
    uniq = pl.DataFrame({"node_list": distinct}).with_row_index("u")
    groups = (
        uniq.filter(~pl.col("node_list").is_in(_NO_NODES))
        .with_columns(pl.col("node_list").str.extract_all(_GROUP).alias("group"))
        .explode("group")
        .with_columns(pl.int_range(pl.len()).over("u").alias("g"))
    )
    plain = groups.filter(~pl.col("group").str.contains(r"[\[\]]", literal=False)).select(
        "u", "g", pl.lit(0, pl.Int64).alias("i"), pl.col("group").alias("name")
    )
    bracket = groups.with_columns(
        pl.col("group").str.extract(_SIMPLE_BRACKET, 1).alias("prefix"),
        pl.col("group").str.extract(_SIMPLE_BRACKET, 2).alias("body"),
    )
    simple = bracket.filter(pl.col("body").is_not_null())
    complex_groups = bracket.filter(
        pl.col("body").is_null() & pl.col("group").str.contains(r"[\[\]]")
    )
    items = (
        simple.with_columns(pl.col("body").str.split(",").alias("item"))
        .explode("item")
        .with_columns(
            pl.col("item").str.extract(_RANGE_ITEM, 1).alias("lo_s"),
            pl.col("item").str.extract(_RANGE_ITEM, 2).alias("hi_s"),
        )
        .with_columns(
            pl.col("lo_s").cast(pl.Int64, strict=False).alias("lo"),
            pl.coalesce(pl.col("hi_s"), pl.col("lo_s")).cast(pl.Int64, strict=False).alias("hi"),
            pl.col("lo_s").str.len_chars().alias("width"),
        )
    )
    oversized = (
        items.group_by("u")
        .agg((pl.col("hi") - pl.col("lo") + 1).clip(lower_bound=0).sum().alias("total"))
        .filter(pl.col("total") > MAX_NODES_PER_LIST)
        .select("u")
    )
    bad_items = pl.concat(
        [
            items.filter(
                pl.col("lo").is_null()
                | pl.col("hi").is_null()
                | (pl.col("hi") < pl.col("lo"))
                | ((pl.col("hi") - pl.col("lo")) >= MAX_NODES_PER_LIST)
            ).select("u"),
            oversized,
        ]
    )
    good_items = items.join(bad_items.select("u").unique(), on="u", how="anti")
    ranged = (
        good_items.with_columns(pl.int_ranges(pl.col("lo"), pl.col("hi") + 1).alias("n"))
        .explode("n")
        # explode keeps item and range order, so a global row number orders names in a group
        .with_row_index("i")
        .select(
            "u",
            "g",
            "i",
            (pl.col("prefix") + pl.col("n").cast(pl.String).str.zfill(pl.col("width"))).alias(
                "name"
            ),
        )
    )
    # Rare shapes: python-hostlist, once per distinct group string.
    slow_rows: list[tuple[int, int, int, str]] = []
    slow_bad: set[int] = set()
    for u, g, group in complex_groups.select("u", "g", "group").iter_rows():
        if _expanded_size(group) > MAX_NODES_PER_LIST:
            slow_bad.add(u)
            continue
        try:
            for i, name in enumerate(hostlist.expand_hostlist(group)):
                slow_rows.append((u, g, i, name))
        except hostlist.BadHostlist:
            slow_bad.add(u)
    slow = pl.DataFrame(
        slow_rows,
        schema={"u": pl.UInt32, "g": pl.Int64, "i": pl.Int64, "name": pl.String},
        orient="row",
    )
    # Text the group pattern cannot account for (unbalanced brackets, stray commas) is invalid.
    rebuilt = groups.group_by("u").agg(pl.col("group").str.join(",").alias("rebuilt"))
    malformed = (
        uniq.filter(~pl.col("node_list").is_in(_NO_NODES))
        .join(rebuilt, on="u", how="left")
        .filter(pl.col("rebuilt").fill_null("") != pl.col("node_list"))
    )
    bad_u = (
        set(bad_items.get_column("u").to_list())
        | set(malformed.get_column("u").to_list())
        | slow_bad
    )
    names = (
        pl.concat(
            [
                plain.with_columns(pl.col("g").cast(pl.Int64)),
                ranged.with_columns(pl.col("g").cast(pl.Int64), pl.col("i").cast(pl.Int64)),
                slow,
            ],
            how="vertical_relaxed",
        )
        .filter(~pl.col("u").is_in(list(bad_u)))
        .sort("u", "g", "i")
        .group_by("u", maintain_order=True)
        # python-hostlist (and Slurm) never lists a host twice.
        .agg(pl.col("name").unique(maintain_order=True).alias("nodes"))
    )
    return uniq.join(names, on="u", how="left").select(
        "node_list",
        pl.col("nodes").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.col("u").is_in(list(bad_u)).alias("bad"),
    )


def _expanded_size(group: str) -> int:
    """How many names one host group expands to (the product of its bracket sizes), or more."""
    size = 1
    for body in re.findall(r"\[([^\]]*)\]", group):
        count = 0
        for item in body.split(","):
            lo, _, hi = item.partition("-")
            if lo.isdigit() and (not hi or hi.isdigit()):
                count += max(int(hi or lo) - int(lo) + 1, 0)
            else:
                count += 1
        size *= max(count, 1)
        if size > MAX_NODES_PER_LIST:
            break
    return size
