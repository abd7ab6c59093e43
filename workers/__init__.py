"""The host side of INSync: one package per synchronization method, plus what they share.

Packages: :mod:`workers.ina` (in-network aggregation), :mod:`workers.collective` (BCube, ring
and PS schedules), :mod:`workers.async_ps` (staleness-aware asynchronous PS), :mod:`workers.ndn`
(NDN transport and its routers), :mod:`workers.cluster` (clustered temporary PSs) and
:mod:`workers.common` (model, data, quantization, framing, files).

One word per role, in every method: **worker** (a training participant), **ps** (a parameter
server, central or temporary), **router** (an NDN forwarder on a switch), **switch** (a P4
switch).  Module suffixes: ``wire`` (bytes <-> message objects), ``ps`` / ``worker`` /
``router`` (that role's state machine, no I/O), ``*_node`` (a process started with
``python -m``), ``job`` (the job file).  Packages here import ``topo`` and ``pyswitch``, never
``controller``.
"""
