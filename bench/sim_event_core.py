"""Cost per event of the simulator's discrete-event core: SimPy vs a small heap loop.

``python bench/sim_event_core.py --events 200000 --links 64``

The workload is the simulator's own: ``--links`` FIFO links, each a stream of frames that
arrive, wait for the link and are delivered after a serialization time; every delivery
schedules the next frame on a (seeded) random link.  Two implementations do exactly the same
work and must deliver the same frames at the same virtual times (checked):

* ``heap``: :class:`controller.experiment.simulate.events.EventLoop` -- one ``heapq`` of
  ``(time, seq, callback, arg)``, a callback per event;
* ``simpy``: SimPy 4 -- one process per link pulling frames from a ``Store`` and holding the
  link with ``env.timeout``, the idiomatic way to write a link in SimPy.

It prints microseconds per event (events = frame deliveries) of each, with the settings.
SimPy is optional: without it only the heap loop is measured.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.experiment.simulate.events import EventLoop  # noqa: E402

TX = 0.001568  # one 196-byte frame at 1 Mbit/s


def run_heap(n_events: int, n_links: int, seed: int) -> list[float]:
    loop = EventLoop()
    rng = random.Random(seed)
    free_at = [0.0] * n_links
    out: list[float] = []

    def offer(link: int) -> None:
        start = max(loop.now, free_at[link])
        free_at[link] = start + TX
        loop.at(start + TX, deliver, link)

    def deliver(link: int) -> None:
        out.append(loop.now)
        if len(out) + n_links <= n_events:
            offer(rng.randrange(n_links))

    for link in range(n_links):
        offer(link)
    loop.run()
    return out


def run_simpy(n_events: int, n_links: int, seed: int) -> list[float]:
    import simpy

    env = simpy.Environment()
    rng = random.Random(seed)
    stores = [simpy.Store(env) for _ in range(n_links)]
    out: list[float] = []

    def link(i: int):  # type: ignore[no-untyped-def]
        while True:
            yield stores[i].get()
            yield env.timeout(TX)
            out.append(env.now)
            if len(out) + n_links <= n_events:
                stores[rng.randrange(n_links)].put(1)

    for i in range(n_links):
        env.process(link(i))
        stores[i].put(1)
    env.run()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--links", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true",
                   help="a reduced run (5,000 deliveries, 8 links) that only shows it works")
    a = p.parse_args(argv)
    if a.smoke:
        a.events, a.links = 5_000, 8
    print(f"settings: {a.events:,} deliveries, {a.links} links, seed {a.seed}, "
          f"Python {sys.version.split()[0]}")
    impls = {"heap": run_heap, "simpy": run_simpy}
    results = {}
    for name, fn in impls.items():
        try:
            t0 = time.perf_counter()
            res = fn(a.events, a.links, a.seed)
            dt = time.perf_counter() - t0
        except ImportError:
            print(f"{name:>6}: not installed")
            continue
        results[name] = res
        print(f"{name:>6}: {dt / len(res) * 1e6:6.2f} µs/event  ({len(res):,} events, "
              f"{dt:.2f} s)")
    if len(results) == 2:
        same = len(results["heap"]) == len(results["simpy"]) and all(
            abs(x - y) < 1e-9 for x, y in zip(sorted(results["heap"]),
                                              sorted(results["simpy"]), strict=True))
        print(f"same deliveries at the same times: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
