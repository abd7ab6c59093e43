"""A Mininet switch node that is an NDN router (docs/design.md §6): :class:`NdnRouterSwitch`.

Why a switch class and not hosts used as routers  [decision]
    docs/design.md §6 puts the NDN forwarders "on the Mininet switch nodes".  As a switch class the
    router sits exactly where the other methods' switches sit: same graph, same port numbering
    (:func:`topo.mininet_net.plan_network`), same TCLink shaping, and its interfaces are in the
    root namespace, where :func:`controller.experiment.network.interface_counters` and the byte tap
    read them, so bytes are measured on the same interfaces for NDN and for the baselines.
    Hosts-as-routers would need IP-less multi-interface hosts, a different topology mapping and
    namespace-aware counters for no gain: the router speaks raw Ethernet (ethertype 0x8624),
    not IP, so nothing of a host's stack is used.

The process is :mod:`workers.ndn.router_node` (the project venv's interpreter), one per switch,
in the root namespace like pyswitch's; its configuration (ports, FIB, CS size, impairment,
counters file) is a JSON file the controller writes before the network starts.  Process
management is :class:`topo.mininet_switch.P4RuntimeSwitch`'s (start, log file, SIGTERM then
SIGKILL on stop); only the command and the readiness test differ: the router prints ``ready``
once its ports are open and its FIB installed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from topo.mininet_switch import P4RuntimeSwitch, SwitchStartError


class NdnRouterSwitch(P4RuntimeSwitch):
    """``python -m workers.ndn.router_node CONFIG`` as a Mininet switch.

    Options: ``ndn_config`` -- the config dict *without* ``ports`` (filled in here from the
    node's Mininet ports) and ``config_path`` -- where to write it."""

    binary_name = "ndn-router"

    def __init__(self, name: str, ndn_config: dict[str, Any] | None = None,
                 config_path: str | None = None, python: str | None = None,
                 **params: Any) -> None:
        super().__init__(name, **params)
        self.ndn_config = dict(ndn_config or {})
        self.config_path = config_path or f"/tmp/{name}-ndn.json"
        self.python = python or sys.executable

    def command(self) -> list[str]:
        cfg = {"name": self.name, "fib": {}, **self.ndn_config,
               "ports": {str(p): ifname for p, ifname in sorted(self.port_interfaces().items())}}
        Path(self.config_path).write_text(json.dumps(cfg, indent=1))
        return [self.python, "-m", "workers.ndn.router_node", self.config_path]

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the log says ``ready`` (at most ``timeout`` s, default
        ``start_timeout``); raise with the log tail if the process died."""
        limit = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise SwitchStartError(f"{self.name}: the NDN router exited with status "
                                       f"{self.proc.returncode}: {self._log_tail()}")
            try:
                if Path(self.log_path or "").read_text(errors="replace").rstrip() \
                        .endswith("ready"):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self._terminate()
                raise SwitchStartError(f"{self.name}: the NDN router did not start within "
                                       f"{limit:g} s")
            time.sleep(0.05)
