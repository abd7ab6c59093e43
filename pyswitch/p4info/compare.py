"""Compare two P4Info messages the way a P4Runtime client sees them (issue 17).

Both sides are parsed with protobuf's text_format and normalised only where the order of
a repeated field carries no meaning: the top-level resource lists (a client finds an
entity by id or name, never by position) and a table's action refs and direct resources
(a set of ids). Everything else — match fields, params, annotations, metadata — keeps
its order, because ids and positions there are part of the contract.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import Message
from p4.config.v1 import p4info_pb2

_TOP_LISTS = ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
              "direct_meters", "controller_packet_metadata", "value_sets", "registers",
              "digests", "externs")


def parse_text(text: str) -> p4info_pb2.P4Info:
    return text_format.Parse(text, p4info_pb2.P4Info())


def load(path: str | Path) -> p4info_pb2.P4Info:
    return parse_text(Path(path).read_text())


def normalise(info: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """A copy of `info` with the order-free repeated fields sorted."""
    out = p4info_pb2.P4Info()
    out.CopyFrom(info)
    for name in _TOP_LISTS:
        items = sorted(getattr(out, name), key=lambda m: (m.preamble.id, m.preamble.name))
        _replace(getattr(out, name), items)
    for t in out.tables:
        _replace(t.action_refs, sorted(t.action_refs, key=lambda r: r.id))
        ids = sorted(t.direct_resource_ids)
        del t.direct_resource_ids[:]
        t.direct_resource_ids.extend(ids)
    return out


def _replace(field: object, items: list[Message]) -> None:
    copies = []
    for m in items:
        c = type(m)()
        c.CopyFrom(m)
        copies.append(c)
    del field[:]  # type: ignore[attr-defined]
    field.extend(copies)  # type: ignore[attr-defined]


def first_difference(ours: p4info_pb2.P4Info, theirs: p4info_pb2.P4Info) -> str | None:
    """None when equal after `normalise`, else a one-line description of the first
    difference (``path: ours ... != p4c ...``)."""
    a, b = normalise(ours), normalise(theirs)
    if a == b:
        return None
    return _diff(a, b, "") or "differ (unknown field)"


def _label(m: Message) -> str:
    pre = getattr(m, "preamble", None)
    if pre is not None and pre.name:
        return pre.name
    name = getattr(m, "name", "")
    return name if isinstance(name, str) and name else ""


def _short(v: object) -> str:
    if isinstance(v, Message):
        s = text_format.MessageToString(v, as_one_line=True)
    else:
        s = repr(v)
    return s if len(s) <= 160 else s[:157] + "..."


def _diff(a: Message, b: Message, path: str) -> str | None:
    for fd in a.DESCRIPTOR.fields:
        va, vb = getattr(a, fd.name), getattr(b, fd.name)
        p = f"{path}.{fd.name}" if path else fd.name
        if fd.label == fd.LABEL_REPEATED:
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                if dict(va) == dict(vb):
                    continue
                keys = sorted(set(va) | set(vb))
                for k in keys:
                    if k not in va:
                        return f"{p}[{k!r}]: missing in ours"
                    if k not in vb:
                        return f"{p}[{k!r}]: extra in ours"
                    if va[k] != vb[k]:
                        if isinstance(va[k], Message):
                            d = _diff(va[k], vb[k], f"{p}[{k!r}]")
                            if d:
                                return d
                        return f"{p}[{k!r}]: ours {_short(va[k])} != p4c {_short(vb[k])}"
                continue
            la, lb = list(va), list(vb)
            if la == lb:
                continue
            for i, (x, y) in enumerate(zip(la, lb, strict=False)):
                if x != y:
                    if isinstance(x, Message):
                        lab = _label(x) if _label(x) == _label(y) else ""
                        sub = f"{p}[{lab or i}]"
                        if lab or not _label(x):
                            d = _diff(x, y, sub)
                            if d:
                                return d
                        return f"{sub}: ours {_label(x) or _short(x)} != p4c " \
                               f"{_label(y) or _short(y)}"
                    return f"{p}[{i}]: ours {_short(x)} != p4c {_short(y)}"
            if len(la) > len(lb):
                return f"{p}: extra in ours: {_label(la[len(lb)]) or _short(la[len(lb)])}"
            return f"{p}: missing in ours: {_label(lb[len(la)]) or _short(lb[len(la)])}"
        if fd.message_type is not None:
            if a.HasField(fd.name) != b.HasField(fd.name):
                side = "ours" if a.HasField(fd.name) else "p4c"
                return f"{p}: only in {side}: {_short(va if a.HasField(fd.name) else vb)}"
            if va != vb:
                d = _diff(va, vb, p)
                if d:
                    return d
                return f"{p}: ours {_short(va)} != p4c {_short(vb)}"
            continue
        if va != vb:
            return f"{p}: ours {_short(va)} != p4c {_short(vb)}"
    return None


def diff_kind(desc: str) -> str:
    """The field path of a difference with indices/names removed (for counts by kind)."""
    head = desc.split(":", 1)[0]
    out, depth = [], 0
    for ch in head:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def reference_for(p4: Path) -> Path | None:
    """p4c's own P4Info of a corpus program: ``<corpus>_outputs/<prog>.p4info.txtpb``
    beside the corpus directory (p4c's testdata layout)."""
    ref = p4.parent.with_name(p4.parent.name + "_outputs") / (p4.name + ".p4info.txtpb")
    return ref if ref.is_file() else None


def check_against_p4c(p4: Path, ours: p4info_pb2.P4Info) -> tuple[str, str]:
    """("equal" | "differs" | "no reference", first difference) for a corpus program."""
    ref = reference_for(p4)
    if ref is None:
        return "no reference", ""
    try:
        theirs = load(ref)
    except (OSError, text_format.ParseError) as e:
        return "no reference", f"unreadable {ref.name}: {e}"
    d = first_difference(ours, theirs)
    return ("equal", "") if d is None else ("differs", d)


def main(argv: list[str] | None = None) -> int:
    """``python -m pyswitch.p4info.compare OURS.txtpb P4C.txtpb``: 0 and "equal" when the
    two P4Info files are equal (see module docstring), else 1 and the first difference."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m pyswitch.p4info.compare",
                                 description="compare two P4Info text files as P4Runtime "
                                 "clients see them (order of resource lists ignored)")
    ap.add_argument("ours")
    ap.add_argument("theirs")
    args = ap.parse_args(argv)
    try:
        d = first_difference(load(args.ours), load(args.theirs))
    except (OSError, text_format.ParseError) as e:
        print(f"p4info_compare: {e}")
        return 2
    print("equal" if d is None else d)
    return 0 if d is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
