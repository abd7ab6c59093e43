"""BMv2's packet replication engine over Thrift (``simple_pre_lag`` / ``simple_pre``):
multicast groups made of nodes (a replication id and a port map).

Requests are checked as BMv2 checks them (``bm_sim/simple_pre.cpp``), with its error codes:
an unknown node is ``INVALID_L1_HANDLE``, an unknown group ``INVALID_MGRP_HANDLE``, a node
already associated (with any group) or not associated with the group it is dissociated from
``ERROR``.  Where BMv2 fails with an internal error (a port map of characters other than
``0``/``1``, which ``std::bitset`` throws on) or silently keeps part of the input (a map
longer than its 512 ports), pyswitch answers ``ERROR`` and changes nothing; a replication id
outside 0..65535 is ``ERROR`` too.  As BMv2, at most 4096 groups and 4096 nodes
(``TABLE_FULL``), and creating a group that exists keeps it as it is.  Every change is applied to the switch first and recorded
here only when the switch took it: nothing is half-applied.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

from pyswitch.errors import EntryNotFound, SwitchError

log = logging.getLogger("pyswitch.thrift")
PORT_MAP_SIZE = 512  # BMv2's McSimplePre::PORT_MAP_SIZE (and LAG_MAP_SIZE)
MAX_RID = 65535
MAX_GROUPS = MAX_NODES = 4096  # BMv2's DEFAULT_MGID_TABLE_SIZE, DEFAULT_L1_MAX_ENTRIES


def port_map(text: str, what: str = "port map") -> list[int]:
    """The CLI's port map (a string of '0'/'1', port 0 the last character) as its ports;
    ValueError for other characters or a port beyond BMv2's 512."""
    if not isinstance(text, str) or text.strip("01"):
        raise ValueError(f"{what} {text!r:.60}: only '0' and '1' characters")
    ports = [i for i, c in enumerate(reversed(text)) if c == "1"]
    if ports and ports[-1] >= PORT_MAP_SIZE:
        raise ValueError(f"{what}: port {ports[-1]} (at most {PORT_MAP_SIZE - 1})")
    return ports


class PreHandler:
    """``simple_pre_lag`` / ``simple_pre``: multicast groups made of nodes (rid + ports).

    Groups are the switch's multicast groups (``Switch.set_multicast_group``), so P4Runtime
    reads them; the node structure (handles, association) lives here. A group's handle is
    its id, as in BMv2; node handles count from 0."""

    def __init__(self, device: Any, types: Any) -> None:
        self.dev = device
        self.t = types
        self.groups: dict[int, list[int]] = {}  # mgid -> node handles
        self.nodes: dict[int, tuple[int, list[int], list[int]]] = {}  # handle -> rid, ports
        self.handles = itertools.count()
        self.state: dict[str, Any] = {"switch": device.switch}

    def _err(self, code: int, why: str) -> Any:
        log.info("thrift: %s (%s)", why, self.t.McOperationErrorCode._VALUES_TO_NAMES.get(
            code, code))
        return self.t.InvalidMcOperation(code)

    def _fresh(self) -> None:
        """A new pipeline (SetForwardingPipelineConfig) starts with no groups: forget the
        node structure of the old one (lock held)."""
        if self.state.get("switch") is not self.dev.switch:
            self.groups.clear()
            self.nodes.clear()
            self.state["switch"] = self.dev.switch

    def _node_value(self, rid: int, pmap: str, lmap: str) -> tuple[int, list[int], list[int]]:
        codes = self.t.McOperationErrorCode
        if not isinstance(rid, int) or not 0 <= rid <= MAX_RID:
            raise self._err(codes.ERROR, f"replication id {rid} (0..{MAX_RID})")
        try:
            return rid, port_map(pmap), port_map(lmap or "", "lag map")
        except ValueError as exc:
            raise self._err(codes.ERROR, str(exc)) from None

    def _apply(self, mgid: int, handles: list[int],
               nodes: dict[int, tuple[int, list[int], list[int]]] | None = None) -> None:
        """Set group `mgid` on the switch to the replicas of `handles`; raises (ERROR) when
        the switch refuses them, before anything here changes."""
        nodes = self.nodes if nodes is None else nodes
        reps = [(p, nodes[h][0]) for h in handles for p in nodes[h][1]]
        try:
            self.dev.switch.set_multicast_group(mgid, reps)
        except SwitchError as exc:
            raise self._err(self.t.McOperationErrorCode.ERROR, str(exc)) from None

    def bm_mc_mgrp_create(self, cxt_id: int, mgrp: int) -> int:
        with self.dev.lock:
            self._fresh()
            if not 0 < mgrp < 65536 or self.dev.switch is None:
                raise self._err(self.t.McOperationErrorCode.INVALID_MGID, f"group id {mgrp}")
            if mgrp in self.groups:  # BMv2 keeps the group (map insert)
                return mgrp
            if len(self.groups) >= MAX_GROUPS:
                raise self._err(self.t.McOperationErrorCode.TABLE_FULL, "4096 groups")
            self._apply(mgrp, [])
            self.groups[mgrp] = []
            return mgrp

    def bm_mc_mgrp_destroy(self, cxt_id: int, mgrp_handle: int) -> None:
        with self.dev.lock:
            self._fresh()
            if mgrp_handle not in self.groups:
                raise self._err(self.t.McOperationErrorCode.INVALID_MGRP_HANDLE,
                                f"no group {mgrp_handle}")
            del self.groups[mgrp_handle]
            try:
                self.dev.switch.delete_multicast_group(mgrp_handle)
            except EntryNotFound:
                pass

    def bm_mc_node_create(self, cxt_id: int, rid: int, port_map: str,
                          lag_map: str = "") -> int:
        with self.dev.lock:
            self._fresh()
            if len(self.nodes) >= MAX_NODES:
                raise self._err(self.t.McOperationErrorCode.TABLE_FULL, "4096 nodes")
            value = self._node_value(rid, port_map, lag_map)
            h = next(self.handles)
            self.nodes[h] = value
            return h

    def _node(self, h: int) -> Any:
        if h not in self.nodes:
            raise self._err(self.t.McOperationErrorCode.INVALID_L1_HANDLE, f"no node {h}")
        return self.nodes[h]

    def _group_of(self, h: int) -> int | None:
        return next((g for g, hs in self.groups.items() if h in hs), None)

    def bm_mc_node_associate(self, cxt_id: int, mgrp_handle: int, l1_handle: int) -> None:
        with self.dev.lock:
            self._fresh()
            self._node(l1_handle)
            if mgrp_handle not in self.groups:
                raise self._err(self.t.McOperationErrorCode.INVALID_MGRP_HANDLE,
                                f"no group {mgrp_handle}")
            if self._group_of(l1_handle) is not None:  # BMv2: one group per node
                raise self._err(self.t.McOperationErrorCode.ERROR,
                                f"node {l1_handle} is already associated")
            handles = [*self.groups[mgrp_handle], l1_handle]
            self._apply(mgrp_handle, handles)
            self.groups[mgrp_handle] = handles

    def bm_mc_node_dissociate(self, cxt_id: int, mgrp_handle: int, l1_handle: int) -> None:
        with self.dev.lock:
            self._fresh()
            self._node(l1_handle)
            if mgrp_handle not in self.groups:
                raise self._err(self.t.McOperationErrorCode.INVALID_MGRP_HANDLE,
                                f"no group {mgrp_handle}")
            if l1_handle not in self.groups[mgrp_handle]:
                raise self._err(self.t.McOperationErrorCode.ERROR,
                                f"node {l1_handle} is not associated with {mgrp_handle}")
            handles = [h for h in self.groups[mgrp_handle] if h != l1_handle]
            self._apply(mgrp_handle, handles)
            self.groups[mgrp_handle] = handles

    def bm_mc_node_destroy(self, cxt_id: int, l1_handle: int) -> None:
        with self.dev.lock:
            self._fresh()
            self._node(l1_handle)
            g = self._group_of(l1_handle)
            if g is not None:
                handles = [h for h in self.groups[g] if h != l1_handle]
                self._apply(g, handles)
                self.groups[g] = handles
            del self.nodes[l1_handle]

    def bm_mc_node_update(self, cxt_id: int, l1_handle: int, port_map: str,
                          lag_map: str = "") -> None:
        with self.dev.lock:
            self._fresh()
            rid, _, _ = self._node(l1_handle)
            value = self._node_value(rid, port_map, lag_map)
            g = self._group_of(l1_handle)
            if g is not None:
                self._apply(g, self.groups[g], {**self.nodes, l1_handle: value})
            self.nodes[l1_handle] = value

    def bm_mc_set_lag_membership(self, cxt_id: int, lag_index: int, port_map: str) -> None:
        raise self._err(self.t.McOperationErrorCode.ERROR, "no LAGs in pyswitch")

    def bm_mc_get_entries(self, cxt_id: int) -> str:
        with self.dev.lock:
            self._fresh()
            l1, l2 = [], []
            for h, (rid, ports, lags) in sorted(self.nodes.items()):
                l1.append({"handle": h, "rid": rid, "l2_handle": h})
                l2.append({"handle": h, "ports": ports, "lags": lags})
            mgrps = [{"id": g, "l1_handles": hs} for g, hs in sorted(self.groups.items())]
            return json.dumps({"mgrps": mgrps, "l1_handles": l1, "l2_handles": l2,
                               "lags": []})
