"""The BMv2 JSON that pyswitch's Thrift server hands out (``bm_get_config``): a description
of pyswitch's own compiled program, derived from its run-time metadata.

``simple_switch_CLI`` reads this at start to learn the names, ids, key fields, widths and
action parameters of tables, actions, counters, registers and meters. It is not a program
BMv2 could run (no parsers, no control flow: the CLI never reads those parts), only the
objects a runtime client addresses, laid out as p4c's BMv2 backend lays them out:

- a key field ``hdr.ethernet.dstAddr`` has target ``["ethernet", "dstAddr"]`` (p4c drops
  the headers parameter's name); a metadata field ``meta.x`` is in the ``scalars``
  header, as p4c puts user metadata; ``h.$valid$`` keys target ``["h", "$valid$"]``;
- a table's overall ``match_type`` is ``range`` if a key is range, else ``ternary`` if one
  is ternary or optional, else ``lpm`` if one is lpm, else ``exact`` (what the CLI uses to
  ask for a priority); optional keys are described as ternary (the CLI has no "optional");
- ids are pyswitch's own indices (actions: the metadata's ``idx``).
"""

from __future__ import annotations

import json
from typing import Any

from pyswitch import externs

JSON_VERSION = [2, 23]


def key_target(name: str, metadata_names: tuple[str, ...] = ("meta", "metadata")) -> list[str]:
    """``hdr.ethernet.dstAddr`` -> ``["ethernet", "dstAddr"]``; ``meta.a.b`` ->
    ``["scalars", "a.b"]``; ``hdr.ipv4.$valid$`` -> ``["ipv4", "$valid$"]``."""
    parts = name.split(".")
    if len(parts) == 1:
        return ["scalars", name]
    if parts[0] in metadata_names or parts[0].startswith("standard_metadata"):
        if parts[0].startswith("standard_metadata"):
            return ["standard_metadata", ".".join(parts[1:])]
        return ["scalars", ".".join(parts[1:])]
    if len(parts) == 2:
        return [parts[0], parts[1]]
    return [".".join(parts[1:-1]), parts[-1]]


def table_match_type(kinds: list[str]) -> str:
    """A table's overall match type as p4c's BMv2 backend computes it."""
    if "range" in kinds:
        return "range"
    if "ternary" in kinds or "optional" in kinds:
        return "ternary"
    if "lpm" in kinds:
        return "lpm"
    return "exact"


def describe(meta: dict[str, Any], name: str = "") -> dict[str, Any]:
    """The BMv2 JSON document (a dict) for a program's run-time metadata."""
    fields: dict[str, dict[str, int]] = {}  # header instance -> field -> width
    tables = []
    actions_by_name = {a["name"]: a for a in meta["actions"]}
    direct = {d["table"]: d for d in meta["direct_counters"]}
    for tid, t in enumerate(meta["tables"]):
        keys = []
        for k in t["keys"]:
            target = key_target(k["name"])
            if target[1] != "$valid$":
                fields.setdefault(target[0], {})[target[1]] = k["width"]
            mt = "ternary" if k["match"] == "optional" else k["match"]
            keys.append({"match_type": mt, "name": k["name"], "target": target, "mask": None})
        d = t["default"]
        tables.append({
            "name": t["name"], "id": tid, "source_info": {},
            "key": keys,
            "match_type": table_match_type([k["match"] for k in t["keys"]]),
            "type": "simple", "max_size": t["size"],
            "with_counters": t["name"] in direct,
            "support_timeout": False, "direct_meters": None,
            "action_ids": [actions_by_name[a["name"]]["idx"] for a in t["actions"]],
            "actions": [a["name"] for a in t["actions"]],
            "base_default_next": None, "next_tables": {},
            "default_entry": {"action_id": actions_by_name[d["action"]]["idx"],
                              "action_const": bool(t["default_const"]),
                              "action_data": [hex(v) for v in d["args"]],
                              "action_entry_const": bool(t["default_const"])},
        })
    header_types, headers = [], []
    for hid, (hname, fdict) in enumerate(sorted(fields.items())):
        tname = f"{hname}_t" if hname != "scalars" else "scalars_0"
        header_types.append({"name": tname, "id": hid,
                             "fields": [[f, w, False] for f, w in fdict.items()]})
        headers.append({"name": hname, "id": hid, "header_type": tname,
                        "metadata": hname in ("scalars", "standard_metadata")})
    doc: dict[str, Any] = {"meter_arrays": [], "counter_arrays": [], "register_arrays": [],
                           "extern_instances": []}
    for ext in externs.objects():  # counters, direct counters, registers, ...
        ext.bmv2_json(meta.get(ext.meta_key, []), doc)
    return {
        "__meta__": {"version": JSON_VERSION, "compiler": "pyswitch", "program": name},
        "header_types": header_types,
        "headers": headers,
        "header_stacks": [], "header_union_types": [], "header_unions": [],
        "header_union_stacks": [], "field_lists": [], "errors": [
            [e, i] for i, e in enumerate(meta["errors"])],
        "enums": [], "parsers": [], "parse_vsets": [], "deparsers": [],
        "meter_arrays": doc["meter_arrays"],
        "counter_arrays": doc["counter_arrays"],
        "register_arrays": doc["register_arrays"],
        "calculations": [], "learn_lists": [],
        "actions": [{"name": a["name"], "id": a["idx"],
                     "runtime_data": [{"name": p["name"], "bitwidth": p["width"]}
                                      for p in a["params"]],
                     "primitives": []} for a in meta["actions"]],
        "pipelines": [{"name": "ingress", "id": 0, "init_table": None, "tables": tables,
                       "action_profiles": [], "conditionals": []}],
        "checksums": [], "force_arith": [], "extern_instances": doc["extern_instances"],
        "field_aliases": [],
        "program": name,
    }


def describe_text(meta: dict[str, Any], name: str = "") -> str:
    """:func:`describe` as the exact string ``bm_get_config`` returns (its MD5 is what
    ``bm_get_config_md5`` answers)."""
    return json.dumps(describe(meta, name), indent=2)
