"""A prediction of the round, and what bound it (docs/simulate.md, "Where prediction and data
plane part"; issue 38).  Pure: every function takes figures and returns records, no I/O.

The LP predicts a *rate*, γ: every worker's gradient crosses the network at γ of a link's
capacity.  A round is more than a rate; :func:`predict_round` adds what the protocol costs
per round on top of the LP's ``T_LP = gradient frame bytes x 8 / (γ x bw)``:

* ``fill_drain_s``: the first frame has to reach the busiest link and the last RESULT has to
  come back from it: one unloaded round trip of a chunk (the store-and-forward time of a
  frame over the longest worker-PS path, both directions; 0 on links with a token bucket,
  below);
* ``bucket_s``: on links with a token bucket, the head start the busiest link's bucket
  gives the round (below);
* ``skew_s``: the round's start skew (a slot waits for its last contributor, so the
  pipeline starts with the last worker; a round's time is its first worker's);
* headers are in ``T_LP`` already (γ is measured and predicted in frame bytes) and the
  RESULT multicast is in the LP's loads when the plan has ``result_load``.

The links: a chain of ``N`` links at ``R`` bytes/s, no propagation delay, ``M`` frames of
``F`` bytes offered at once to the first (``L = M F`` bytes: the busiest link's round).

* **Served at their rate** (no bucket, ``--burst-bytes 0`` in the simulated network): a
  link sends a frame in ``F / R`` and a switch forwards it when it has all of it
  (store and forward), so frame ``k`` (1-based) leaves link ``n`` at ``(k + n - 1) F / R``
  and the last arrives at ``(M + N - 1) F / R = L / R + (N - 1) F / R``: the pipeline costs
  one frame's time per link beyond the first.  :func:`fill_drain_s` charges the round trip
  of the longest path, ``N = 2 h`` links for ``h`` hops each way, ``2 h F / R``: one frame's
  time more than the chain's (the simulated make-run round is 1.2 % above even that: the
  workers' streams merge).
* **htb's token bucket** (Mininet's TCLink, and the simulated links' default: ``B`` =
  :data:`topo.mininet_net.HTB_BUCKET_BYTES` = 1,600 bytes, filled at ``R``): a frame leaves
  as soon as the bucket is not in debt and takes its bytes from it, at no serialization
  time (a veth has none).  Full at the start, the first link lets frame ``k`` go at
  ``max(0, (k - 1) F - B) / R``; every link after it receives that stream at most at ``R``
  with its own bucket full, so it is never in debt when a frame comes and passes each at
  once.  The last frame arrives at ``max(0, L - F - B) / R`` whatever ``N``: no fill or
  drain per hop, and the busiest link finishes ``(B + F) / R`` *earlier* than ``L / R``
  (:func:`bucket_terms`; 14.4 ms at 1 Mbit/s with 196-byte frames).  So the round is
  ``max(T_LP - bucket_s, 0) + skew_s``: the simulated make-run network's fastest worker
  takes exactly (76 x 196 - 1,796) x 8 / 10^6 = 0.1048 s.  A window of chunks over the
  unloaded round trip never binds there (``window_s`` 0); it does in Mininet, whose
  processes take a frame a wake after it arrives (docs/simulate.md cross-validation), which
  the links' model has not.

:func:`link_loads` compares the LP's load of every directed link with the bytes measured on
it; :func:`attribute` names the resource that bound the run, with its figure;
:func:`jobs_analysis` does both for each job of a launch of several (``run --jobs``).

Units: the plan's γ is in Mbit/s where the links have a rate (``--bw``: the LP's capacities
are the links' Mbit/s); :func:`link_loads`, :func:`predict_round` and :func:`attribute`
take it as a share of ``bw_mbit`` (``γ / bw``), which :func:`mode_analysis` and
:func:`jobs_analysis` pass them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LinkLoad", "RoundPrediction", "Bound", "JobShape", "link_loads", "launch_link_loads",
           "predict_round", "bucket_terms", "network_burst", "attribute", "bound_text", "prediction_text", "mode_analysis",
           "jobs_analysis", "as_record", "fill_drain_s", "prediction_lines", "link_table_rows",
           "links_within", "LINK_MATCH", "SATURATED", "RETX_BIND", "SLOTS_BIND", "QUEUED", "PREDICTED"]

SATURATED = 0.9
"""A link busy at least this share of the round bound it."""
RETX_BIND = 0.05
"""Retransmissions of at least this share of the GRADs sent bound the run."""
SLOTS_BIND = 0.05
"""Fall-backs (GRADs that found no slot and went to the PS raw) of at least this share of the
GRADs sent bound the run."""
PREDICTED = 0.10
"""No resource saturated and the round within this share above the prediction: the plan's
rate plus fill, drain and start skew (the pipeline) bound the run."""
LINK_MATCH = 0.10
"""A link whose measured bytes are within this share of the LP's carries the plan's load
(issue 38's bar, :func:`links_within`)."""
QUEUED = 1.5
"""No link saturated, the round more than :data:`PREDICTED` above the prediction, and the
median round trip of a chunk at least this multiple of the unloaded one: queues (and the
slots that wait on them) bound the run."""


@dataclass(frozen=True)
class LinkLoad:
    """One directed link: the LP's load and the measured one, per round."""

    link: str  # "a->b"
    lp_load: float  # LP's load / capacity (0: the plan puts nothing there)
    lp_bytes: float  # bytes per round the plan puts there: lp_load / γ x gradient frame bytes
    bytes: float  # measured bytes per round
    utilisation: float  # measured: bytes x 8 / (bw x s per round)

    @property
    def ratio(self) -> float | None:
        """Measured bytes over the plan's (None where the plan puts none)."""
        return self.bytes / self.lp_bytes if self.lp_bytes else None


@dataclass(frozen=True)
class RoundPrediction:
    """Seconds per round: the LP's, the protocol's costs, the prediction and the run."""

    lp_s: float
    fill_drain_s: float
    skew_s: float
    predicted_s: float
    measured_s: float
    window_s: float = 0.0  # the chunks at one window per unloaded round trip
    bucket_s: float = 0.0  # the busiest link's token bucket's head start (module docstring)

    @property
    def error(self) -> float:
        """(measured - predicted) / predicted."""
        return self.measured_s / self.predicted_s - 1.0


@dataclass(frozen=True)
class Bound:
    """The resource that bound a run: ``resource`` one of ``cores``, ``retransmissions``,
    ``slots``, ``window``, ``link``, ``pipeline``, ``queues``, ``unattributed``; ``figure`` its share (a link's
    utilisation, the window's best rate over the LP's, the retransmitted or fallen-back
    share of GRADs, the busy cores' share, the median round trip over the unloaded one);
    ``text`` one line."""

    resource: str
    figure: float | None
    text: str


def link_loads(plan_loads: list[dict[str, Any]], link_bytes_total: dict[str, float],
               rounds: int, s_per_round: float, bw_mbit: float, grad_frame_bytes: float,
               gamma: float) -> list[LinkLoad]:
    """Every directed link the plan loads or the run used, busiest (measured) first.
    ``plan_loads``: the plan's ``loads`` (``from``, ``to``, ``load``, ``bw``);
    ``link_bytes_total``: the record's bytes per ``"a->b"`` over ``rounds`` rounds; ``gamma``
    the plan's γ as a share of ``bw_mbit`` (module docstring)."""
    lp = {f"{x['from']}->{x['to']}": x["load"] / (x.get("bw") or 1.0) for x in plan_loads}
    out = []
    for link in sorted(set(lp) | set(link_bytes_total)):
        b = link_bytes_total.get(link, 0) / rounds if rounds else 0.0
        load = lp.get(link, 0.0)
        out.append(LinkLoad(
            link=link, lp_load=load,
            lp_bytes=load / gamma * grad_frame_bytes if gamma > 0 else 0.0, bytes=b,
            utilisation=b * 8 / (bw_mbit * 1e6 * s_per_round) if s_per_round > 0 else 0.0))
    return sorted(out, key=lambda x: (-x.utilisation, -x.lp_load, x.link))


def predict_round(gamma: float, bw_mbit: float, grad_frame_bytes: float, fill_drain_s: float,
                  skew_s: float, measured_s: float, window_s: float = 0.0,
                  bucket_s: float = 0.0) -> RoundPrediction:
    """The round's time from the LP's γ plus the protocol's costs (module docstring):
    ``max(T_LP - bucket_s, window_s, 0) + fill_drain_s + skew_s``, ``window_s`` the time the
    chunks take at one window per unloaded round trip (a window too small for the path),
    ``bucket_s`` the head start of the links' token bucket (:func:`bucket_terms`; 0: links
    served at their rate); ``gamma`` a share of ``bw_mbit``."""
    lp_s = grad_frame_bytes * 8 / (gamma * bw_mbit * 1e6) if gamma > 0 else float("inf")
    return RoundPrediction(lp_s=lp_s, fill_drain_s=fill_drain_s, skew_s=skew_s,
                           predicted_s=max(lp_s - bucket_s, window_s, 0.0) + fill_drain_s
                           + skew_s,
                           measured_s=measured_s, window_s=window_s, bucket_s=bucket_s)


def bucket_terms(store_forward_s: float, burst_bytes: float, frame_bytes: int,
                 bw_mbit: float) -> tuple[float, float]:
    """``(fill_drain_s, bucket_s)`` of a round on links whose token bucket holds
    ``burst_bytes`` (module docstring): links served at their rate (``burst_bytes`` 0, or
    unshaped) keep the store-and-forward round trip ``store_forward_s``
    (:func:`fill_drain_s`) and no head start; with a bucket a lone frame crosses idle links
    at once (fill and drain 0) and the busiest link ends ``(burst_bytes + frame_bytes) / R``
    before ``T_LP``."""
    if burst_bytes <= 0 or not bw_mbit:
        return store_forward_s, 0.0
    return 0.0, (burst_bytes + frame_bytes) * 8 / (bw_mbit * 1e6)


def network_burst(rec: dict[str, Any]) -> float:
    """The token bucket (bytes) of the links a mode's record ran on: the simulated network's
    own (``sim.burst_bytes``), else htb's, Mininet's and the cluster's TCLink
    (:data:`topo.mininet_net.HTB_BUCKET_BYTES`)."""
    from topo.mininet_net import HTB_BUCKET_BYTES

    got = (rec.get("sim") or {}).get("burst_bytes")
    return float(HTB_BUCKET_BYTES if got is None else got)


def attribute(*, links: list[LinkLoad], grads_sent: float, retransmissions: float,
              fallbacks: float, cores_bound: bool, busy_cores: float | None = None,
              cpus: int | None = None, transport: dict[str, Any] | None = None,
              frame_bytes: int, bw_mbit: float, gamma: float, window: int | None = None,
              prediction: RoundPrediction | None = None) -> Bound:
    """The binding resource of one mode's rounds (pure; ``gamma`` a share of ``bw_mbit``),
    the first that holds of: the cores
    (``cores_bound``: the pace record's), slots (:data:`SLOTS_BIND` of the GRADs sent fell
    back to the PS raw, more than were retransmitted), retransmissions (:data:`RETX_BIND`
    of the GRADs sent), the window
    (``window`` chunks over the unloaded round trip, ``prediction.fill_drain_s``, carry
    less than the LP's rate γ x bw), a link busy :data:`SATURATED` of the round or more,
    the pipeline (the round at most :data:`PREDICTED` above the prediction: the plan's rate
    plus fill, drain and start skew), queues (where the network measured round trips,
    ``transport``: the median at least :data:`QUEUED` times the unloaded one), else
    ``unattributed``."""
    top = links[0] if links else None

    def link_part() -> str:
        if top is None:
            return "no link measured"
        lp = f"LP load {top.lp_load:.0%}" if top.lp_load else "no LP load"
        return f"busiest link {top.link} at {top.utilisation:.0%} ({lp})"

    if cores_bound:
        share = busy_cores / cpus if busy_cores is not None and cpus else None
        fig = f"{busy_cores:.2f} of {cpus}" if share is not None else "most"
        return Bound("cores", share, f"cores: {fig} cores busy; {link_part()}")
    retx = retransmissions / grads_sent if grads_sent else 0.0
    fb = fallbacks / grads_sent if grads_sent else 0.0
    # fall-backs beyond what retransmissions explain (a retransmitted copy may fall back
    # to the PS by design): the slots; else retransmissions come first
    if fb >= SLOTS_BIND and fallbacks > retransmissions:
        return Bound("slots", fb,
                     f"slots: {fb:.1%} of GRADs found no free slot and went to the PS raw "
                     f"({fallbacks:,.0f}); {link_part()}")
    if retx >= RETX_BIND:
        return Bound("retransmissions", retx,
                     f"retransmissions: {retx:.1%} of GRADs sent again ({retransmissions:,.0f}); "
                     f"{link_part()}")
    t = transport or {}
    rtt = (t.get("rtt_s") or {}).get("median")
    unloaded = prediction.fill_drain_s if prediction is not None else 0.0
    if window and unloaded > 0:
        rate = window * frame_bytes * 8 / unloaded / 1e6  # Mbit/s a window carries at best
        if rate < gamma * bw_mbit:
            blocked = t.get("blocked_share")
            full = f", full {blocked:.0%} of the time" if blocked is not None else ""
            return Bound("window", rate / (gamma * bw_mbit),
                         f"window: a window of {window} chunk(s) per worker over the {unloaded * 1e3:.1f} ms "
                         f"unloaded round trip carry at most {rate:.3g} Mbit/s, below the LP's "
                         f"{gamma * bw_mbit:.3g}{full}; {link_part()}")
    if top is not None and top.utilisation >= SATURATED:
        return Bound("link", top.utilisation, f"link: {link_part()}")
    if prediction is not None and prediction.error <= PREDICTED:
        head = (f" less the links' bucket's head start {prediction.bucket_s * 1e3:.1f} ms"
                if prediction.bucket_s else "")
        return Bound("pipeline", top.utilisation if top else None,
                     f"pipeline: the plan's rate{head} plus fill and drain "
                     f"{prediction.fill_drain_s * 1e3:.1f} ms and start skew "
                     f"{prediction.skew_s * 1e3:.1f} ms ({prediction.error:+.1%} of the "
                     f"predicted round); {link_part()}")
    slower = (f", {prediction.error:+.1%} of the predicted round"
              if prediction is not None else "")
    if rtt and unloaded and rtt > QUEUED * unloaded:
        return Bound("queues", rtt / unloaded,
                     f"queues: no link saturated ({link_part()}), but a chunk's median round "
                     f"trip is {rtt * 1e3:.1f} ms against {unloaded * 1e3:.1f} ms unloaded"
                     f"{slower}: slots wait for contributions queued on other paths")
    return Bound("unattributed", top.utilisation if top else None,
                 f"unattributed: no resource saturated{slower}; {link_part()}")


def bound_text(mode: str, b: dict[str, Any]) -> str:
    """One console/report line from a ``bound`` record."""
    return f"{mode} bound by {b['text']}"


def prediction_text(mode: str, p: dict[str, Any]) -> str:
    """One console/report line from a ``round`` prediction record."""
    bucket = p.get("bucket_s", 0.0)  # records before the bucket was modelled: none
    base = (f"LP {p['lp_s']:.4f}" if p.get("window_s", 0.0) <= p["lp_s"] - bucket
            else f"window {p['window_s']:.4f} (LP {p['lp_s']:.4f})")
    if bucket and p.get("window_s", 0.0) <= p["lp_s"] - bucket:
        base += f" - bucket {bucket:.4f}"
    return (f"{mode}: predicted {p['predicted_s']:.4f} s/round ({base} + fill/drain "
            f"{p['fill_drain_s']:.4f} + start skew {p['skew_s']:.4f}), measured "
            f"{p['measured_s']:.4f} ({p['error']:+.1%})")


def as_record(pred: RoundPrediction) -> dict[str, Any]:
    """A :class:`RoundPrediction` as results.json stores it."""
    return {**asdict(pred), "error": pred.error}


def mode_analysis(rec: dict[str, Any], *, plan_loads: list[dict[str, Any]], gamma: float,
                  bw_mbit: float, n_chunks: int, frame_bytes: int, n_workers: int,
                  fill_drain_s: float, window: int | None = None,
                  pace: dict[str, Any] | None = None,
                  max_links: int | None = None,
                  burst_bytes: float | None = None) -> dict[str, Any] | None:
    """``prediction`` of one mode's record (pure): the round predicted from ``gamma`` (the
    plan's, Mbit/s with links at ``bw_mbit``) and the protocol's costs, the bound
    (:func:`attribute`) and the links (:func:`link_loads`, the ``max_links`` busiest).
    ``fill_drain_s``: the store-and-forward round trip (:func:`fill_drain_s`), taken as the
    links' token bucket ``burst_bytes`` has it (:func:`bucket_terms`; None: the record's
    network's, :func:`network_burst`).  None without rounds or without ``bw``."""
    import numpy as np

    rounds = rec.get("rounds") or []
    if not rounds or not bw_mbit or gamma <= 0:
        return None
    share = gamma / bw_mbit  # the plan's Mbit/s as a share of the links' rate
    s_per_round = float(np.median([r["time_s"] for r in rounds]))
    links = link_loads(plan_loads, rec.get("link_bytes_total") or {}, len(rounds), s_per_round,
                       bw_mbit, n_chunks * frame_bytes, share)
    return _analysis(rec, links, share, bw_mbit=bw_mbit, n_chunks=n_chunks,
                     frame_bytes=frame_bytes, n_workers=n_workers, fill_drain_s=fill_drain_s,
                     window=window, pace=pace, max_links=max_links, burst_bytes=burst_bytes)


def _analysis(rec: dict[str, Any], links: list[LinkLoad], share: float, *, bw_mbit: float,
              n_chunks: int, frame_bytes: int, n_workers: int, fill_drain_s: float,
              window: int | None, pace: dict[str, Any] | None,
              max_links: int | None, burst_bytes: float | None = None) -> dict[str, Any]:
    """The round, the bound and the links of one record with rounds, ``share`` its γ over
    ``bw_mbit``; ``fill_drain_s`` the store-and-forward round trip, taken as the links'
    bucket has it (:func:`bucket_terms`, ``burst_bytes`` None: :func:`network_burst`)."""
    import numpy as np

    rounds = rec["rounds"]
    s_per_round = float(np.median([r["time_s"] for r in rounds]))
    skews = [r["start_skew_s"] for r in rounds if r.get("start_skew_s") is not None]
    fill_drain_s, bucket_s = bucket_terms(
        fill_drain_s, network_burst(rec) if burst_bytes is None else burst_bytes, frame_bytes,
        bw_mbit)
    pred = predict_round(share, bw_mbit, n_chunks * frame_bytes, fill_drain_s,
                         float(np.median(skews)) if skews else 0.0, s_per_round,
                         window_s=n_chunks / window * fill_drain_s if window else 0.0,
                         bucket_s=bucket_s)
    retx = sum(r.get("retransmissions", 0) for r in rounds)
    sent = n_chunks * n_workers * len(rounds) + retx
    p = pace or {}
    bound = attribute(links=links, grads_sent=sent, retransmissions=retx,
                      fallbacks=float(rec.get("collisions") or 0),
                      cores_bound=p.get("binding") == "cores", busy_cores=p.get("busy_cores"),
                      cpus=p.get("cpus"), transport=(rec.get("sim") or {}).get("transport"),
                      frame_bytes=frame_bytes, bw_mbit=bw_mbit, gamma=share, window=window,
                      prediction=pred)
    shown = links if max_links is None else links[:max_links]
    return {"round": as_record(pred), "bound": asdict(bound),
            "links": [{**asdict(x), "ratio": x.ratio} for x in shown]}


@dataclass(frozen=True)
class JobShape:
    """One job of a launch of several, as :func:`jobs_analysis` needs it."""

    name: str
    gamma: float  # the joint plan's γ of the job: Mbit/s with links at bw (as one job's)
    n_chunks: int
    n_workers: int
    fill_drain_s: float  # its farthest worker's store-and-forward round trip (:func:`fill_drain_s`)


def launch_link_loads(plan_loads: list[dict[str, Any]], link_bytes_total: dict[str, float],
                      span_s: float, bw_mbit: float) -> list[LinkLoad]:
    """Every directed link of a launch of several jobs, busiest first: the jobs share the
    launch's links (each job's record holds the same counters) and finish at different
    times, so a link is compared over the launch -- ``bytes`` measured in its ``span_s``
    seconds, ``lp_bytes`` what the plan's joint load (Σ_j of the jobs' loads) puts there in
    that time, ``utilisation`` the measured share of it."""
    lp = {f"{x['from']}->{x['to']}": x["load"] / (x.get("bw") or 1.0) for x in plan_loads}
    cap = bw_mbit * 1e6 * span_s / 8  # bytes a link carries in the span at its rate
    out = [LinkLoad(link=link, lp_load=lp.get(link, 0.0), lp_bytes=lp.get(link, 0.0) * cap,
                    bytes=float(link_bytes_total.get(link, 0)),
                    utilisation=link_bytes_total.get(link, 0) / cap if cap > 0 else 0.0)
           for link in sorted(set(lp) | set(link_bytes_total))]
    return sorted(out, key=lambda x: (-x.utilisation, -x.lp_load, x.link))


def jobs_analysis(modes: dict[str, dict[str, Any]], jobs: list[JobShape], *,
                  plan_loads: list[dict[str, Any]], bw_mbit: float, frame_bytes: int,
                  mode: str = "ina", window: int | None = None,
                  pace: dict[str, dict[str, Any]] | None = None,
                  max_links: int | None = None,
                  burst_bytes: float | None = None) -> dict[str, Any]:
    """``prediction`` of a launch of several jobs (pure), per ``<job>/<mode>`` record of the
    INA mode ``mode``: each job's round from its γ in the joint plan and its own fill,
    drain and start skew (:func:`predict_round`), and what bound it (:func:`attribute`,
    over the launch's links, :func:`launch_link_loads`: the link named may carry the other
    jobs' traffic too).  The links are the launch's, stored once, with its first job.  The
    launch's span is the simulated network's virtual time until its last worker finished
    where it has one (``sim.done_s``; ``sim.virtual_s`` in records before it: that also
    holds the tail in which the PS serves what is still in flight, which made links busy
    91 % of the rounds read 28 % at k=16, 4 jobs x 64, docs/results.md "Defaults at
    scale"), else its longest job's rounds.  ``window``: the jobs' window where a record
    does not hold its own (``window``); ``burst_bytes`` the links' token bucket
    (None: each record's network's, :func:`network_burst`).  PS-only, ToR-only and the jobs run alone
    have no per-job γ in the joint plan: not predicted.  Empty without ``bw``."""
    if not bw_mbit:
        return {}
    mine = [(j, modes.get(f"{j.name}/{mode}")) for j in jobs]
    mine = [(j, rec) for j, rec in mine if isinstance(rec, dict) and rec.get("rounds")
            and j.gamma > 0]
    if not mine:
        return {}
    first = mine[0][1]
    sim = first.get("sim") or {}
    span = sim.get("done_s") or sim.get("virtual_s") or max(
        sum(r["time_s"] for r in rec["rounds"]) for _, rec in mine)
    links = launch_link_loads(plan_loads, first.get("link_bytes_total") or {}, span, bw_mbit)
    out = {}
    for i, (j, rec) in enumerate(mine):
        label = f"{j.name}/{mode}"
        out[label] = _analysis(rec, links, j.gamma / bw_mbit, bw_mbit=bw_mbit,
                               n_chunks=j.n_chunks, frame_bytes=frame_bytes,
                               n_workers=j.n_workers, fill_drain_s=j.fill_drain_s,
                               window=rec.get("window") or window,  # the job's own
                               pace=(pace or {}).get(label),
                               max_links=max_links if i == 0 else 0,
                               burst_bytes=burst_bytes)
        out[label]["links_over"] = "launch"
    return out


def fill_drain_s(graph: Any, workers: list[str], ps: str, bw_mbit: float,
                 frame_bytes: int) -> float:
    """One unloaded round trip of a frame between the PS and its farthest worker,
    store-and-forward at ``bw_mbit`` on every link (no propagation delay: Mininet's and the
    simulation's default): ``2 h F / R`` for ``h`` hops.  Links with a token bucket let a
    lone frame through at once: :func:`bucket_terms` takes this to 0 there."""
    import networkx as nx

    hops = max((nx.shortest_path_length(graph, w, ps) for w in workers), default=0)
    return 2 * hops * frame_bytes * 8 / (bw_mbit * 1e6) if bw_mbit else 0.0


def prediction_lines(results: dict[str, Any]) -> list[str]:
    """The console's and report's lines for a results document's ``prediction``: per mode
    the round predicted against the run, then what bound it (none without a prediction)."""
    out = []
    for mode, p in (results.get("prediction") or {}).items():
        if isinstance(p, dict) and p.get("round") and p.get("bound"):
            out += [prediction_text(mode, p["round"]), bound_text(mode, p["bound"])]
    return out


def links_within(links: list[dict[str, Any]], tolerance: float = LINK_MATCH) -> tuple[int, int]:
    """``(loaded, within)``: of a prediction's ``links`` records, those the LP loads, and of
    them those whose measured bytes are within ``tolerance`` of the LP's."""
    loaded = [x for x in links if x.get("lp_load", 0) > 0 and x.get("ratio") is not None]
    return len(loaded), sum(abs(x["ratio"] - 1) <= tolerance for x in loaded)


def link_table_rows(results: dict[str, Any], limit: int = 12) -> list[list[Any]]:
    """Rows ``link, LP load, LP bytes/round, measured bytes/round, measured/LP,
    utilisation`` of the busiest links of each mode's ``prediction``."""
    rows = []
    for mode, p in (results.get("prediction") or {}).items():
        for x in (p or {}).get("links", [])[:limit]:
            planned = x["lp_load"] > 0  # else the plan puts nothing there (or has no loads)
            rows.append([mode, x["link"], round(x["lp_load"], 3) if planned else None,
                         round(x["lp_bytes"]) if planned else None, round(x["bytes"]),
                         None if x["ratio"] is None else round(x["ratio"], 3),
                         round(x["utilisation"], 3)])
    return rows
