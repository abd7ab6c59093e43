"""P4Info (p4.config.v1) for a compiled program, message for message as p4c writes it.

Ids and aliases follow p4c's symbol table (see `pyswitch.p4info.ids`). What p4c lists is
what survives its front end: every table that is applied, every action that such a table
lists or that a control calls directly (an action only called from other actions is
inlined into them and disappears; `NoAction` appears when used), and every extern
instance. A table without a default action gets ``@defaultonly NoAction`` (p4c's
CreateBuiltins), so the action ref carries that annotation; annotations are kept as written
except ``@name``, ``@id``, ``@brief`` and ``@description``. ``type_info`` is present (empty
for the types pyswitch supports) as soon as p4c converts any type: a table, an action
parameter, an extern instance or a controller header.
"""

from __future__ import annotations

from typing import Any

from p4.config.v1 import p4info_pb2

from pyswitch import externs
from pyswitch.p4info.ids import P, SymbolTable, jenkins_one_at_a_time

__all__ = ["build_p4info", "jenkins_one_at_a_time"]

_MT = {"exact": p4info_pb2.MatchField.EXACT, "lpm": p4info_pb2.MatchField.LPM,
       "ternary": p4info_pb2.MatchField.TERNARY, "range": p4info_pb2.MatchField.RANGE,
       "optional": p4info_pb2.MatchField.OPTIONAL}
_SCOPE = {"TABLE_AND_DEFAULT": p4info_pb2.ActionRef.TABLE_AND_DEFAULT,
          "TABLE_ONLY": p4info_pb2.ActionRef.TABLE_ONLY,
          "DEFAULT_ONLY": p4info_pb2.ActionRef.DEFAULT_ONLY}


def _bytes(value: int, width: int) -> bytes:
    # p4c pads to the width in whole bytes (the reference P4Runtime server needs it)
    n = (width + 7) // 8
    return (value & ((1 << (8 * n)) - 1)).to_bytes(n, "big")


def preamble(pre: p4info_pb2.Preamble, sym: SymbolTable, kind: int, name: str,
              annotations: list[str], alias: str | None = None) -> None:
    pre.id = sym.id(kind, name)
    pre.name = name
    pre.alias = alias if alias is not None else sym.alias(name)
    pre.annotations.extend(annotations)


def user_id(entry: dict) -> int | None:
    v = entry.get("user_id")
    return int(v) if v is not None else None


def build_p4info(meta: dict) -> p4info_pb2.P4Info:
    """P4Info of a program from the compiler's metadata (see module docstring)."""
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    extra: dict[str, Any] = meta.get("p4info") or {"actions": {}, "tables": {},
                                                   "controller_headers": {}}
    xa, xt, xh = extra["actions"], extra["tables"], extra["controller_headers"]
    xi: dict[str, dict] = extra.get("instances", {})
    tables = [t for t in meta["tables"] if xt.get(t["name"], {}).get("applied", True)]
    actions = {a["name"]: a for a in meta["actions"]}
    used: list[str] = []
    for t in tables:
        for a in t["actions"]:
            used.append(a["name"])
    in_table = set(used)
    used += [a["name"] for a in meta["actions"] if xa.get(a["name"], {}).get("called")]
    used = list(dict.fromkeys(used))

    # symbols in p4c's collection order (the order matters only for @id clashes)
    sym = SymbolTable()
    for n in used:
        sym.add(P.ACTION, n, user_id(xa.get(n, {})))
    for t in tables:
        sym.add(P.TABLE, t["name"], user_id(xt.get(t["name"], {})))
    for ext in externs.objects():  # counters, direct counters, registers, ...
        ext.p4info_symbols(sym, meta.get(ext.meta_key, []), xi)
    for h in meta["controller_headers"]:
        tn = xh.get(h["name"], {}).get("type_name", h["name"])
        sym.add(P.CONTROLLER_HEADER, tn)
    sym.assign()

    touched_types = False
    for t in tables:
        x = xt.get(t["name"], {})
        touched_types = True
        pt = info.tables.add()
        preamble(pt.preamble, sym, P.TABLE, t["name"], x.get("annotations", []))
        kann = x.get("key_annotations", [])
        for i, k in enumerate(t["keys"], 1):
            mf = pt.match_fields.add()
            mf.id = i
            mf.name = k["name"]
            if i - 1 < len(kann):
                mf.annotations.extend(kann[i - 1])
            mf.bitwidth = k["width"]
            mf.match_type = _MT[k["match"]]
        rann = x.get("ref_annotations", [])
        for i, a in enumerate(t["actions"]):
            ar = pt.action_refs.add()
            ar.id = sym.id(P.ACTION, a["name"])
            if i < len(rann):
                ar.annotations.extend(rann[i])
            ar.scope = _SCOPE[a["scope"]]
        dflt = t["default"]
        did = sym.id(P.ACTION, dflt["action"])
        if t["default_const"]:
            pt.const_default_action_id = did
        pt.initial_default_action.action_id = did
        widths = x.get("default_widths") or [
            p["width"] for p in actions[dflt["action"]]["params"]]
        for i, (v, w) in enumerate(zip(dflt["args"], widths, strict=False), 1):
            arg = pt.initial_default_action.arguments.add()
            arg.param_id = i
            arg.value = _bytes(int(v), w)
        if t["direct_counter"]:
            pt.direct_resource_ids.append(sym.id(P.DIRECT_COUNTER, t["direct_counter"]))
        pt.size = t["size"] if t["size"] else 1024
        if x.get("support_timeout"):
            pt.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL
        if x.get("is_const_table", t["const_entries"] is not None):
            pt.is_const_table = True
        if x.get("has_initial_entries", bool(t["const_entries"])):
            pt.has_initial_entries = True
    for n in used:
        a = actions[n]
        x = xa.get(n, {})
        pa = info.actions.add()
        preamble(pa.preamble, sym, P.ACTION, n, x.get("annotations", []))
        px = x.get("params", [])
        # p4c's RemoveActionParameters turns every parameter of an action that is only
        # called directly into a local variable
        params = a["params"] if n in in_table else []
        for i, p in enumerate(params, 1):
            touched_types = True
            pp = pa.params.add()
            pp.id = i
            # a parameter's control-plane name is its @name, if it has one
            pp.name = (px[i - 1]["name"] if i - 1 < len(px) else None) or p["name"]
            if i - 1 < len(px):
                pp.annotations.extend(px[i - 1]["annotations"])
            pp.bitwidth = p["width"]
    applied = {t["name"] for t in tables}
    for ext in externs.objects():
        if ext.p4info(info, sym, meta.get(ext.meta_key, []), xi, applied):
            touched_types = True
    for h in meta["controller_headers"]:
        x = xh.get(h["name"], {})
        tn = x.get("type_name", h["name"])
        ph = info.controller_packet_metadata.add()
        # p4c: the id is the header type's, name and alias are the annotation's
        preamble(ph.preamble, sym, P.CONTROLLER_HEADER, tn,
                  x.get("annotations", [f'@controller_header("{h["name"]}")']),
                  alias=h["name"])
        ph.preamble.name = h["name"]
        for i, f in enumerate(h["fields"], 1):
            touched_types = True
            m = ph.metadata.add()
            m.id = i
            m.name = f["name"]
            m.bitwidth = f["width"]
    if touched_types or extra.get("extern_fn_called"):
        info.type_info.SetInParent()
    for name, e in sorted(extra.get("serializable_enums", {}).items()):
        se = info.type_info.serializable_enums[name]
        se.underlying_type.bitwidth = e["width"]
        for m, v in e["members"]:
            mm = se.members.add()
            mm.name = m
            mm.value = _bytes(int(v), e["width"])
    return info
