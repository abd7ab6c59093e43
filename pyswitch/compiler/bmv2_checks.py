"""Whole-program checks of p4c (front end and BMv2 back end) that need the compiled program:
what p4c rejects must not run here with some meaning of its own (issue 17, item 7).

`check` runs at the end of a compilation (the compiler's ``finish``), when it is known
which actions survive p4c's removal of unused declarations.
"""

from __future__ import annotations

from typing import Any

from lark import Tree


def _strip(children: list) -> list:
    return [c for c in children if not (isinstance(c, Tree) and c.data == "annotation")]


def _parser_graph(comp: Any, node: Tree) -> dict[str, set[str]]:
    """state -> states it may go to (p4c's ParserCallGraph)."""
    graph: dict[str, set[str]] = {}
    for st in _strip(node.children):
        if not (isinstance(st, Tree) and st.data == "parser_state"):
            continue
        ch = _strip(st.children)
        name = comp.name_of(ch[0])
        tr = ch[-1]
        nexts: set[str] = set()
        if isinstance(tr, Tree) and tr.data == "transition_direct":
            nexts.add(comp.name_of(tr.children[0]))
        elif isinstance(tr, Tree) and tr.data == "transition_select":
            for case in tr.children:
                if isinstance(case, Tree) and case.data == "select_case":
                    nexts.add(comp.name_of(case.children[-1]))
        graph[name] = nexts
    return graph


def check_parser_terminates(comp: Any, node: Tree) -> None:
    """p4c's SimplifyParsers: "Parser never reaches accept or reject state"."""
    graph = _parser_graph(comp, node)
    if "start" not in graph:
        return  # reported by the parser compiler
    seen, todo = {"start"}, ["start"]
    while todo:
        for n in graph.get(todo.pop(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    if "accept" not in seen and "reject" not in seen:
        name = comp.name_of(_strip(node.children)[0])
        raise comp.err(node, f"parser {name}: Parser never reaches accept or reject state")


def check(comp: Any, main_parser: str, meta: dict) -> None:
    """Raise the first p4c rejection found (see module docstring); `meta` is the compile
    output with its P4Info extras (``meta["p4info"]``: which tables are applied, which
    actions are called)."""
    used = [main_parser]
    for t in comp.tree.iter_subtrees_topdown():
        if t.data == "instantiation":
            ty = _strip(t.children)[0]
            nm = comp.src.text[ty.meta.start_pos:ty.meta.end_pos].strip() \
                if not ty.meta.empty else ""
            if nm in comp.parsers and nm not in used:
                used.append(nm)
    for name in used:
        node = comp.parsers.get(name)
        if node is not None:
            check_parser_terminates(comp, node)
    extra = meta.get("p4info", {})
    xt, xa = extra.get("tables", {}), extra.get("actions", {})
    used_actions = {a["name"] for t in meta["tables"] if xt.get(t["name"], {}).get("applied")
                    for a in t["actions"]}
    used_actions |= {n for n, x in xa.items() if x.get("called")}
    # recorded while compiling action bodies; only actions that p4c keeps count
    for a in comp.actions:
        err = getattr(a, "bmv2_error", None)
        if err is not None and a.name in used_actions:
            raise err
