"""The part of MLflow's run-search language that sparkctl writes, parsed without MLflow.

sparkctl's readers that skip ``import mlflow`` (sqlite_reader) need the filter strings and
order-by clauses that services/runs builds: clauses joined by AND, each
``<entity>.<key> <comparator> <value>``; ``start_time DESC`` or
``metrics.decode_tps_median DESC``. Anything outside that part (OR, IN, IS NULL,
parentheses, datasets, an attribute not listed here, a value of the wrong type) raises
``Unsupported``: the caller then asks MLflow's own client, which either answers or
raises MLflow's error. So this parser may refuse what MLflow accepts, never the reverse
of accepting something MLflow would read differently.

The entity names, attribute aliases and comparators per entity follow MLflow's
``mlflow/utils/search_utils.py`` (SearchUtils).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class Unsupported(Exception):
    """This reader does not answer that: ask MLflow's client."""


METRIC, PARAM, TAG, ATTRIBUTE = "metric", "param", "tag", "attribute"

_ENTITIES = {
    "metric": METRIC, "metrics": METRIC,
    "parameter": PARAM, "parameters": PARAM, "param": PARAM, "params": PARAM,
    "tag": TAG, "tags": TAG,
    "attribute": ATTRIBUTE, "attributes": ATTRIBUTE, "attr": ATTRIBUTE, "run": ATTRIBUTE,
}
# attribute -> runs table column; the numeric ones compare with numbers
STRING_ATTRIBUTES = {"run_id": "run_uuid", "status": "status"}
NUMERIC_ATTRIBUTES = {"start_time": "start_time", "end_time": "end_time", "created": "start_time",
                      "Created": "start_time"}
NUMERIC_COMPARATORS = ("=", "!=", "<", "<=", ">", ">=")
STRING_COMPARATORS = ("=", "!=", "LIKE", "ILIKE")


@dataclass(frozen=True)
class Clause:
    entity: str  # METRIC, PARAM, TAG or ATTRIBUTE
    key: str  # the metric/param/tag key, or the runs table column of an attribute
    comparator: str  # "=", "!=", "<", "<=", ">", ">=", "LIKE", "ILIKE"
    value: str | float | int


@dataclass(frozen=True)
class OrderKey:
    entity: str
    key: str
    ascending: bool


# an identifier: entity '.' key, the key in backticks, double quotes, or bare
_IDENT = r"(?P<entity>[a-z]+)\.(?:`(?P<bq>[^`]+)`|\"(?P<dq>[^\"]+)\"|(?P<bare>[A-Za-z0-9_.\-/]+))"
_VALUE = r"(?:'(?P<sq>[^']*)'|\"(?P<dqv>[^\"]*)\"|(?P<num>\d+(?:\.\d+)?)(?![\w.]))"
_CLAUSE = re.compile(
    r"\s*" + _IDENT + r"\s*(?P<cmp>!=|>=|<=|=|<|>|(?i:\bI?LIKE\b))\s*" + _VALUE + r"\s*"
)
_AND = re.compile(r"(?i:AND)(?=\s)")


def parse_filter(text: str | None) -> list[Clause]:
    """The clauses of ``text`` (empty: every run). Raises Unsupported."""
    clauses: list[Clause] = []
    pos, text = 0, text or ""
    if not text.strip():
        return clauses
    while True:
        m = _CLAUSE.match(text, pos)
        if m is None:
            raise Unsupported(f"filter {text!r}")
        clauses.append(_clause(m))
        pos = m.end()
        if pos == len(text):
            return clauses
        a = _AND.match(text, pos)
        if a is None:
            raise Unsupported(f"filter {text!r}")
        pos = a.end()


def _clause(m: re.Match) -> Clause:
    entity = _ENTITIES.get(m["entity"])
    key = m["bq"] or m["dq"] or m["bare"]
    cmp = m["cmp"].upper()
    string = m["sq"] if m["sq"] is not None else m["dqv"]
    number = m["num"]
    if entity is None:
        raise Unsupported(f"entity {m['entity']!r}")
    if entity == METRIC:
        if number is None or cmp not in NUMERIC_COMPARATORS:
            raise Unsupported(f"metric clause {m.group(0)!r}")
        return Clause(METRIC, key, cmp, float(number))
    if entity in (PARAM, TAG):
        if string is None or cmp not in STRING_COMPARATORS:
            raise Unsupported(f"{entity} clause {m.group(0)!r}")
        return Clause(entity, key, cmp, string)
    if key in NUMERIC_ATTRIBUTES:
        if number is None or cmp not in NUMERIC_COMPARATORS:
            raise Unsupported(f"attribute clause {m.group(0)!r}")
        return Clause(ATTRIBUTE, NUMERIC_ATTRIBUTES[key], cmp, int(number) if "." not in number else float(number))
    if key in STRING_ATTRIBUTES:
        if string is None or cmp not in STRING_COMPARATORS:
            raise Unsupported(f"attribute clause {m.group(0)!r}")
        return Clause(ATTRIBUTE, STRING_ATTRIBUTES[key], cmp, string)
    raise Unsupported(f"attribute {key!r}")


_ORDER = re.compile(
    r"\s*(?:(?P<entity>[a-z]+)\.)?(?:`(?P<bq>[^`]+)`|\"(?P<dq>[^\"]+)\"|(?P<bare>[A-Za-z0-9_.\-/]+?))"
    r"(?:\s+(?P<dir>(?i:ASC|DESC)))?\s*"
)


def parse_order_by(clauses: list[str] | None) -> list[OrderKey]:
    """MLflow order_by clauses: ``start_time DESC``, ``metrics.`decode_tps_median` ASC``.
    A key named twice is MLflow's error to raise. Raises Unsupported."""
    out: list[OrderKey] = []
    for text in clauses or []:
        m = _ORDER.fullmatch(text)
        if m is None:
            raise Unsupported(f"order_by {text!r}")
        key = m["bq"] or m["dq"] or m["bare"]
        entity = _ENTITIES.get(m["entity"]) if m["entity"] else ATTRIBUTE
        if entity is None:
            raise Unsupported(f"order_by {text!r}")
        if entity == ATTRIBUTE:
            column = NUMERIC_ATTRIBUTES.get(key) or STRING_ATTRIBUTES.get(key)
            if column is None:
                raise Unsupported(f"order_by attribute {key!r}")
            key = column
        if any((o.entity, o.key) == (entity, key) for o in out):
            raise Unsupported(f"order_by names {key!r} twice")
        out.append(OrderKey(entity, key, (m["dir"] or "ASC").upper() == "ASC"))
    return out
