"""P4Info (p4.config.v1) for a compiled program, named as p4c names things.

Ids: top byte is the `P4Ids` prefix of the resource kind (action 0x01, table 0x02,
controller header 0x04, counter 0x12, direct counter 0x13, register 0x16), low 24 bits the
Jenkins one-at-a-time hash of the fully qualified name (probing upwards on collision).
Aliases are the shortest dotted suffix of the name unique among all resources.
"""

from __future__ import annotations

from p4.config.v1 import p4info_pb2

P = p4info_pb2.P4Ids


def jenkins_one_at_a_time(s: str) -> int:
    h = 0
    for b in s.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class _Ids:
    def __init__(self) -> None:
        self.used: set[int] = set()

    def get(self, prefix: int, name: str) -> int:
        low = jenkins_one_at_a_time(name) & 0xFFFFFF
        while True:
            i = (prefix << 24) | low
            if i not in self.used and low != 0:
                self.used.add(i)
                return i
            low = (low + 1) & 0xFFFFFF


def _aliases(names: list[str]) -> dict[str, str]:
    out = {}
    for n in names:
        parts = n.split(".")
        for k in range(1, len(parts) + 1):
            suf = ".".join(parts[-k:])
            if sum(1 for m in names if m == suf or m.endswith("." + suf)) == 1:
                out[n] = suf
                break
        else:
            out[n] = n
    return out


_MT = {"exact": p4info_pb2.MatchField.EXACT, "lpm": p4info_pb2.MatchField.LPM,
       "ternary": p4info_pb2.MatchField.TERNARY, "range": p4info_pb2.MatchField.RANGE,
       "optional": p4info_pb2.MatchField.OPTIONAL}
_UNIT = {"packets": p4info_pb2.CounterSpec.PACKETS, "bytes": p4info_pb2.CounterSpec.BYTES,
         "packets_and_bytes": p4info_pb2.CounterSpec.BOTH}


def build_p4info(meta: dict) -> p4info_pb2.P4Info:
    """P4Info of a program from the compiler's metadata (see module docstring)."""
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    ids = _Ids()
    tables = meta["tables"]
    used_actions: list[str] = []
    for t in tables:
        for a in t["actions"]:
            if a["name"] not in used_actions:
                used_actions.append(a["name"])
    actions = {a["name"]: a for a in meta["actions"]}
    all_names = ([t["name"] for t in tables] + used_actions
                 + [r["name"] for r in meta["registers"]] + [c["name"] for c in meta["counters"]]
                 + [d["name"] for d in meta["direct_counters"]])
    alias = _aliases(list(dict.fromkeys(all_names)))
    aid: dict[str, int] = {}
    for n in sorted(used_actions):
        aid[n] = ids.get(P.ACTION, n)
    tid = {t["name"]: ids.get(P.TABLE, t["name"]) for t in sorted(tables, key=lambda t: t["name"])}
    dcid = {d["name"]: ids.get(P.DIRECT_COUNTER, d["name"]) for d in meta["direct_counters"]}
    for t in tables:
        pt = info.tables.add()
        pt.preamble.id = tid[t["name"]]
        pt.preamble.name = t["name"]
        pt.preamble.alias = alias[t["name"]]
        for i, k in enumerate(t["keys"], 1):
            mf = pt.match_fields.add()
            mf.id = i
            mf.name = k["name"]
            mf.bitwidth = k["width"]
            mf.match_type = _MT[k["match"]]
        for a in t["actions"]:
            ar = pt.action_refs.add()
            ar.id = aid[a["name"]]
            ar.scope = getattr(p4info_pb2.ActionRef, a["scope"])
        if t["default_const"]:
            pt.const_default_action_id = aid[t["default"]["action"]]
        if t["direct_counter"]:
            pt.direct_resource_ids.append(dcid[t["direct_counter"]])
        pt.size = t["size"]
        if t["const_entries"] is not None:
            pt.is_const_table = True
    for n in used_actions:
        a = actions[n]
        pa = info.actions.add()
        pa.preamble.id = aid[n]
        pa.preamble.name = n
        pa.preamble.alias = alias[n]
        for i, p in enumerate(a["params"], 1):
            pp = pa.params.add()
            pp.id = i
            pp.name = p["name"]
            pp.bitwidth = p["width"]
    for c in meta["counters"]:
        pc = info.counters.add()
        pc.preamble.id = ids.get(P.COUNTER, c["name"])
        pc.preamble.name = c["name"]
        pc.preamble.alias = alias[c["name"]]
        pc.spec.unit = _UNIT[c["type"]]
        pc.size = c["size"]
    for d in meta["direct_counters"]:
        pd = info.direct_counters.add()
        pd.preamble.id = dcid[d["name"]]
        pd.preamble.name = d["name"]
        pd.preamble.alias = alias[d["name"]]
        pd.spec.unit = _UNIT[d["type"]]
        if d["table"]:
            pd.direct_table_id = tid[d["table"]]
    for r in meta["registers"]:
        pr = info.registers.add()
        pr.preamble.id = ids.get(P.REGISTER, r["name"])
        pr.preamble.name = r["name"]
        pr.preamble.alias = alias[r["name"]]
        pr.type_spec.bitstring.bit.bitwidth = r["width"]
        pr.size = r["size"]
    for h in meta["controller_headers"]:
        ph = info.controller_packet_metadata.add()
        ph.preamble.id = ids.get(P.CONTROLLER_HEADER, h["name"])
        ph.preamble.name = h["name"]
        ph.preamble.alias = h["name"]
        ph.preamble.annotations.append(f'@controller_header("{h["name"]}")')
        for i, f in enumerate(h["fields"], 1):
            m = ph.metadata.add()
            m.id = i
            m.name = f["name"]
            m.bitwidth = f["width"]
    return info
