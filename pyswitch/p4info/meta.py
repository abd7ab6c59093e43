"""What P4Info needs from a compilation beyond the run-time metadata (issue 17).

`collect` runs at the end of a compilation (called from the compiler's ``finish``) and
returns a JSON-able dict that `pyswitch.p4info.build_p4info` reads: annotations as p4c
prints them, the annotations written on each action reference of a table, which actions
a control calls directly, which tables are applied, initial default-action arguments and
whether a table has initial entries. It only reads the compiler's state, so the P4Info
rules stay in the P4Info modules.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token, Tree

from pyswitch import externs
from pyswitch.frontend import annot_string
from pyswitch.ir import ActionCall, CopyOutCall, Function, TableApply, walk
from pyswitch.p4info.ids import IdError, P, SymbolTable

# p4c leaves these out of P4Info annotations: @name and @id are represented by the name
# and the id, @brief / @description by the `doc` field
_SKIP = {"name", "id", "brief", "description"}


def data_width(ty: Any) -> int:
    """The width of action data of type `ty` as the control plane writes it (P4Info's
    ``bitwidth``): bit<N> and int<N> N, a serializable enum its underlying type's (p4c),
    bool 1."""
    under = getattr(ty, "underlying", None)
    if under is not None:
        return under.width
    return getattr(ty, "width", 1)


def _text(src: str, node: Any) -> str:
    if isinstance(node, Token):
        return str(node)
    meta = getattr(node, "meta", None)
    if meta is None or getattr(meta, "empty", True):
        return ""
    return " ".join(src[meta.start_pos:meta.end_pos].split())


def annotation_texts(src: str, children: list) -> list[str]:
    """The unstructured annotations among `children`, as p4c's ToP4 prints them
    (``@name`` or ``@name(arg, ...)``; string arguments keep their quotes)."""
    out = []
    for ch in children:
        if not (isinstance(ch, Tree) and ch.data == "annotation"):
            continue
        nm_node = ch.children[0]
        nm = _text(src, nm_node) if isinstance(nm_node, Tree) else str(nm_node)
        if isinstance(nm_node, Tree) and nm_node.children:
            nm = str(nm_node.children[0])
        if nm in _SKIP:
            continue
        args = [a for a in ch.children[1:] if a is not None]
        if not args:
            # `@x()` and `@x` print alike
            out.append(f"@{nm}")
            continue
        parts = []
        for a in args:
            if (text := annot_string(a)) is not None:
                parts.append(text)
            else:
                parts.append(_text(src, a))
        out.append(f"@{nm}({', '.join(parts)})")
    return out


def _strip(children: list) -> list:
    return [c for c in children if not (isinstance(c, Tree) and c.data == "annotation")]


def _table_parts(src: str, node: Tree) -> dict[str, Any]:
    """Annotations of a table, of its key elements and of its action references."""
    ch = _strip(node.children)
    out: dict[str, Any] = {"annotations": annotation_texts(src, node.children),
                           "key_annotations": [], "ref_annotations": [],
                           "support_timeout": False}
    for prop in ch[1:]:
        if not isinstance(prop, Tree):
            continue
        if prop.data == "tp_other":
            pc = _strip(prop.children)
            # v1model's `support_timeout = true`: P4Info's idle_timeout_behavior
            if str(pc[0]) == "support_timeout" and _text(src, pc[1]) == "true":
                out["support_timeout"] = True
        if prop.data == "tp_key":
            for ke in _strip(prop.children):
                out["key_annotations"].append(annotation_texts(src, ke.children))
        elif prop.data == "tp_actions":
            for ar in _strip(prop.children):
                out["ref_annotations"].append(annotation_texts(src, ar.children))
    return out


def _params(comp: Any, node: Tree) -> list[dict[str, Any]]:
    """Annotations and control-plane name (its ``@name``, if any) of each directionless
    parameter of an action: the ones P4Info lists."""
    ch = _strip(node.children)
    plist = ch[1] if len(ch) > 1 else None
    out: list[dict[str, Any]] = []
    if isinstance(plist, Tree):
        for p in plist.children:
            if isinstance(p, Tree):
                pc = _strip(p.children)
                direction = pc[0] if pc else None
                if direction is None:
                    name = comp.annotations(p.children).get("name") or [None]
                    out.append({"annotations": annotation_texts(comp.src.text, p.children),
                                "name": name[0] if isinstance(name[0], str) else None})
    return out


def collect(comp: Any, meta: dict | None = None) -> dict[str, Any]:
    """P4Info extras of compiler `comp` (see module docstring). An action parameter with a
    ``@name`` is renamed to it in `meta` too, so that the switch API, STF and P4Runtime
    all use the one control-plane name (as BMv2 does).

    Which tables are applied and which actions a control calls directly is read from the
    compiler's output, its intermediate form (`pyswitch.ir`): the compiler leaves out code
    that p4c's constant folding removes (the dead branch of ``if (true)`` or
    ``false ? a : b``), and p4c then drops what only that code used.  The applied tables
    are the `TableApply` nodes, the actions called directly the `ActionCall` and
    `CopyOutCall` nodes of every function but the tables' actions' own.
    """
    src = comp.src.text
    action_fns = {a.fn for a in comp.actions}
    stmts = [st for m in comp.module if isinstance(m, Function) for st in walk(m.body)]
    called = {st.fn for m in comp.module
              if isinstance(m, Function) and m.name not in action_fns
              for st in walk(m.body) if isinstance(st, (ActionCall, CopyOutCall))}
    applied = {st.table for st in stmts if isinstance(st, TableApply)}
    _check_duplicate_names(comp, called, applied)
    actions = {}
    for a in comp.actions:
        node = a.node
        actions[a.name] = {
            "annotations": annotation_texts(src, node.children) if node is not None else [],
            "params": _params(comp, node) if node is not None else [],
            "called": a.fn in called,
            "user_id": _user_id(comp, a.annotations),
        }
    if meta is not None:
        for ma in meta["actions"]:
            px = actions.get(ma["name"], {}).get("params", [])
            for mp, x in zip(ma["params"], px, strict=False):
                if x["name"]:
                    mp["name"] = x["name"]
    tables = {}
    for t in comp.tables:
        parts = _table_parts(src, t.node) if t.node is not None else {
            "annotations": [], "key_annotations": [], "ref_annotations": [],
            "support_timeout": False}
        refs = parts["ref_annotations"]
        # p4c's CreateBuiltins appends `@defaultonly NoAction` to a table without a
        # default action; pyswitch appends the same action after the written ones
        ref_ann = [refs[i] if i < len(refs) else ["@defaultonly"]
                   for i in range(len(t.actions))]
        tables[t.name] = {
            "annotations": parts["annotations"],
            "key_annotations": parts["key_annotations"],
            "support_timeout": parts.get("support_timeout", False),
            "ref_annotations": ref_ann,
            "applied": t.var in applied,
            "user_id": _user_id(comp, comp.annotations(t.node.children))
            if t.node is not None else None,
            "has_initial_entries": bool(t.const_entries),
            # p4c: `const entries` make a const table; plain `entries` only initial ones
            "is_const_table": t.node is not None and any(
                isinstance(x, Tree) and x.data == "tp_const_entries" for x in t.node.children),
            "default_widths": [data_width(p[2]) for p in t.default[0].params if p[0] == ""],
        }
    headers = {}
    for h in comp.controller_headers:
        ty = h["ty"]
        headers[h["name"]] = {"type_name": ty.name, "annotations": [
            f"@{k}" + (f"({', '.join(_ann_arg(src, x) for x in v)})" if v else "")
            for k, v in ty.annotations.items() if k not in _SKIP]}
    # p4c's TypeSpecConverter records every serializable enum a match key uses
    enums: dict[str, Any] = {}
    enum_fields = _enum_fields(comp)
    roots = [loc.ty for loc in (getattr(comp, "hdr", None), getattr(comp, "meta", None))
             if loc is not None]
    for t in comp.tables:
        if t.var not in applied:
            continue
        for k in t.keys:
            ty = k.get("ty")
            if getattr(ty, "underlying", None) is None:
                ty = _key_enum(k["name"], roots, enum_fields)
            underlying = getattr(ty, "underlying", None)
            if underlying is not None and ty.name not in enums:
                enums[ty.name] = {"width": underlying.width,
                                  "members": [[m, v] for m, v in ty.members.items()]}
        # and every one an action parameter of the table's actions is declared with (the
        # parameter itself gets the underlying bitwidth and no type_name)
        for a, _ in t.actions:
            for d, _pn, ty in a.params:
                if d == "" and getattr(ty, "underlying", None) is not None \
                        and ty.name not in enums:
                    enums[ty.name] = {"width": ty.underlying.width,
                                      "members": [[m, v] for m, v in ty.members.items()]}
    instances = {}
    for inst in _instances(comp):
        node = getattr(inst, "node", None)
        instances[inst.name] = {
            "annotations": annotation_texts(src, node.children) if node is not None else [],
            "user_id": _user_id(comp, comp.annotations(node.children))
            if node is not None else None}
    _check_user_ids(comp, actions, tables, instances)
    return {"actions": actions, "tables": tables, "controller_headers": headers,
            "instances": instances,
            "serializable_enums": enums,
            "extern_fn_called": bool(getattr(comp, "p4info_extern_fn", False))}


def _instances(comp: Any) -> list:
    """The program's extern instances in P4Info's symbol order (`pyswitch.externs`)."""
    return [i for ext in externs.objects() for i in comp.extern_insts.get(ext.meta_key, [])]


def _check_user_ids(comp: Any, actions: dict, tables: dict, instances: dict) -> None:
    """An ``@id`` with another kind's prefix, or given twice, is p4c's error; found here
    so that it is reported with its location instead of failing P4Info generation."""
    sym = SymbolTable()
    nodes = {a.name: (P.ACTION, a.node) for a in comp.actions}
    nodes.update({t.name: (P.TABLE, t.node) for t in comp.tables})
    for inst in _instances(comp):
        ext = externs.obj(inst.kind)
        kind = getattr(P, ext.p4info_kind) if ext is not None and ext.p4info_kind else P.COUNTER
        nodes[inst.name] = (kind, getattr(inst, "node", None))
    for group in (actions, tables, instances):
        for name, x in group.items():
            uid = x.get("user_id")
            if uid is None or name not in nodes:
                continue
            kind, node = nodes[name]
            try:
                sym.add(kind, name, uid)
            except IdError as e:
                raise comp.err(node, str(e)) from None


def _node_pos(node: Any) -> tuple[int, int]:
    meta = getattr(node, "meta", None)
    if meta is None or getattr(meta, "empty", True):
        return (0, 0)
    return (meta.line, meta.column)


def _check_duplicate_names(comp: Any, called: set[str], applied: set[str]) -> None:
    """Two actions or tables with one control-plane name (e.g. the same ``@name(".x")`` on
    two declarations, or on one declaration in a control instantiated twice) would share
    one P4Info entry and id; p4c rejects them (DuplicateActionControlPlaneNameCheck, and
    "Name 'x' is used for multiple table objects in the P4Info message")."""
    used_actions = {a.name for t in comp.tables if t.var in applied for a, _ in t.actions}
    kinds = (("action", [a for a in comp.actions
                         if a.name in used_actions or a.fn in called]),
             ("table", [t for t in comp.tables if t.var in applied]))
    for what, objs in kinds:
        by_name: dict[str, list] = {}
        for o in objs:
            if o.node is not None:
                by_name.setdefault(o.name, []).append(o)
        for name, group in by_name.items():
            if len(group) < 2:
                continue
            first, second = sorted(group[:2], key=lambda o: _node_pos(o.node))
            if first.node is second.node:
                raise comp.err(_name_node(first.node),
                               f"Name '{name}' is used for multiple {what} objects in the "
                               f"P4Info message (one declaration, two instances)")
            loc = comp.err(_name_node(first.node), "")
            raise comp.err(_name_node(second.node),
                           f"{name}: conflicting control plane name for two {what}s "
                           f"(the other at {loc.file}:{loc.line}:{loc.col})")


def _name_node(decl: Tree) -> Any:
    ch = _strip(decl.children)
    return ch[0] if ch else decl


def _enum_fields(comp: Any) -> dict[tuple[str, str], Any]:
    """(struct or header type, field) -> serializable enum type, for fields declared with
    one (the compiler keeps only the underlying bit<N> in field types)."""
    out: dict[tuple[str, str], Any] = {}
    for d in comp.tree.children:
        if not (isinstance(d, Tree) and d.data in ("header_decl", "struct_decl")):
            continue
        ch = _strip(d.children)
        tname = comp.name_of(ch[0])
        for f in ch[1:]:
            fc = _strip(f.children)
            tref = fc[0]
            ref = _text(comp.src.text, tref)
            ety = comp.types.get(ref)
            if getattr(ety, "underlying", None) is not None and hasattr(ety, "members"):
                out[(tname, comp.name_of(fc[1]))] = ety
    return out


def _key_enum(key: str, roots: list, enum_fields: dict) -> Any:
    """The serializable enum type of a key written as a field path (``h.h.f1``)."""
    parts = re.sub(r"\[[^]]*\]", "", key).split(".")[1:]
    for ty in roots:
        cur, owner = ty, None
        for p in parts:
            fields = dict(getattr(cur, "fields", []) or [])
            if p not in fields:
                cur = None
                break
            owner, cur = cur, fields[p]
            cur = getattr(cur, "elem", cur)  # a header stack: its element type
        if cur is not None and owner is not None:
            e = enum_fields.get((getattr(owner, "name", ""), parts[-1]))
            if e is not None:
                return e
    return None


def _user_id(comp: Any, ann: dict[str, list]) -> int | None:
    """The value of an ``@id(N)`` annotation (p4c: the P4Runtime id, prefix added)."""
    args = ann.get("id")
    if not args:
        return None
    return int(comp.const_int(args[0]))


def _ann_arg(src: str, x: Any) -> str:
    if isinstance(x, str):
        return f'"{x}"'
    return _text(src, x)


def _field_names(comp: Any) -> dict[tuple[str, str], str]:
    """(struct or header type, field) -> the field's ``@name``, where it has one."""
    cached = comp.__dict__.get("_p4info_field_names")
    if cached is not None:
        return cached
    out: dict[tuple[str, str], str] = {}
    for d in comp.tree.children:
        if not (isinstance(d, Tree) and d.data in ("header_decl", "struct_decl")):
            continue
        ch = _strip(d.children)
        tname = comp.name_of(ch[0])
        for f in ch[1:]:
            ann = comp.annotations(f.children).get("name")
            if ann and isinstance(ann[0], str):
                out[(tname, comp.name_of(_strip(f.children)[1]))] = ann[0]
    comp.__dict__["_p4info_field_names"] = out
    return out


def key_name(comp: Any, written: str) -> str:
    """p4c's TableKeyNames for a key written as a field path: a field with an ``@name``
    is named by it (a leading '.' makes it absolute). The path is resolved from every
    struct and header type; it is renamed only when all resolutions agree."""
    names = _field_names(comp)
    if not names:
        return written
    m = re.fullmatch(r"([A-Za-z_]\w*)((?:\.[A-Za-z_$]\w*\$?(?:\[\d+\])?)+)", written)
    if m is None:
        return written
    parts = re.findall(r"\.([A-Za-z_$]\w*\$?)(\[\d+\])?", m.group(2))
    results = set()
    for root in comp.types.values():
        if not hasattr(root, "fields") or not isinstance(root.fields, list):
            continue
        cur, out, ok = root, m.group(1), True
        for i, (field, idx) in enumerate(parts):
            fields = dict(cur.fields) if isinstance(getattr(cur, "fields", None), list) \
                else {}
            if field not in fields:
                # only `$valid$` (from `isValid()`) may end a path without being a field
                ok = field == "$valid$" and i == len(parts) - 1
                out += f".{field}{idx}"
                break
            rename = names.get((getattr(cur, "name", ""), field))
            if rename is not None and rename.startswith("."):
                out = rename[1:] + idx
            else:
                out += f".{rename or field}{idx}"
            cur = fields[field]
            cur = getattr(cur, "elem", cur)  # a header stack: its element type
        if ok:
            results.add(out)
    return results.pop() if len(results) == 1 else written
