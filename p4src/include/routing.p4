/* Routing: where an accepted packet leaves the switch.
 *  - plain IPv4: longest-prefix match (ipv4_lpm);
 *  - RESULT: multicast down the job's tree (the job's group at this switch; the egress
 *    control keeps copies from going back where they came from); a NACK of an
 *    aggregation point (a RESULT flagged INCOMPLETE, agg_id = the point) down that point's
 *    own tree to its workers instead (ask_group);
 *  - GRAD/PARTIAL: toward agg_id over the controller's equal-cost group for it (ina_route;
 *    agg_id 0 = the job's own PS, ps_route by job_id, so that every job has its PS),
 *    the group's members in turn (round robin: register ecmp_turn, one turn per group),
 *    from member switch_id mod group size.
 * A packet with nowhere to go is counted and dropped: an INA packet in dropped_noroute,
 * plain IPv4 that misses ipv4_lpm (or hits a drop entry) in dropped_ipv4_noroute, so that
 * INA's own routing faults stay apart from stray host traffic. Control-plane names keep
 * the MyIngress. prefix. */
#ifndef _INA_ROUTING_P4_
#define _INA_ROUTING_P4_

#include "headers.p4"

control InaRouting(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    @name(".MyIngress.dropped_noroute")
    counter(1, CounterType.packets_and_bytes) dropped_noroute;
    @name(".MyIngress.dropped_ipv4_noroute")
    counter(1, CounterType.packets_and_bytes) dropped_ipv4_noroute;

    /* ipv4_lpm's default (a miss) and the action of drop entries: the name stays
     * MyIngress.drop (the controller installs it); it counts why. */
    @name(".MyIngress.drop")
    action drop() {
        dropped_ipv4_noroute.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_noroute() {
        dropped_noroute.count(0);
        mark_to_drop(standard_metadata);
    }

    @name(".MyIngress.ipv4_forward")
    action ipv4_forward(macAddr_t dstAddr, egressSpec_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".MyIngress.set_group")
    action set_group(memberIndex_t base, bit<16> size) {
        meta.group_base = base;
        meta.group_size = size;
    }

    @name(".MyIngress.set_port")
    action set_port(egressSpec_t port) {
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".MyIngress.ipv4_lpm")
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        default_action = drop();
        size = 1024;
    }

    /* Toward the job's PS instead (a switch id retired after the switch died). */
    @name(".MyIngress.route_to_ps")
    action route_to_ps() {
        meta.to_ps = 1;
    }

    /* agg_id -> equal-cost next-hop group, for every aggregation point; ids of retired
     * switches are routed to the job's PS (route_to_ps). */
    @name(".MyIngress.ina_route")
    table ina_route {
        key = { hdr.ina.agg_id: exact; }
        actions = { set_group; route_to_ps; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    @name(".MyIngress.set_ask_group")
    action set_ask_group(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }

    /* (job, aggregation point) -> the multicast group toward that point's workers at this
     * switch: a point's NACK (aggregation, ask_children) goes down the point's own tree,
     * which the job's RESULT tree need not hold (controller: deploy.ask_trees). */
    @name(".MyIngress.ask_group")
    table ask_group {
        key = {
            hdr.ina.job_id: exact;
            hdr.ina.agg_id: exact;
        }
        actions = { set_ask_group; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    /* job_id -> equal-cost group toward that job's PS (agg_id 0): each job has its own. */
    @name(".MyIngress.ps_route")
    table ps_route {
        key = { hdr.ina.job_id: exact; }
        actions = { set_group; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    /* The next member of each group (indexed by its base): the group's members in turn, so
     * that every switch splits what it forwards toward a destination evenly over the
     * equal-cost next hops, to one packet, whichever packets reach it -- the LP's
     * "ecmp-per-hop-even" split (docs/design.md §3.2).  A hash of the chunk id cannot:
     * crc32 is linear, so the hops of a path pick correlated members, and a few dozen
     * chunks split unevenly even with an independent hash (docs/simulate.md, cause 2). */
    @name(".MyIngress.ecmp_turn")
    register<bit<16>>(4096) ecmp_turn;

    @name(".MyIngress.ina_nexthop")
    table ina_nexthop {
        key = { meta.member_index: exact; }
        actions = { set_port; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        if (!hdr.ina.isValid()) {
            ipv4_lpm.apply();
            return;
        }
        if (hdr.ina.msg_type == INA_TYPE_RESULT
                && (hdr.ina.flags & INA_FLAG_INCOMPLETE) != 0) {
            if (!ask_group.apply().hit) {
                drop_noroute();
            }
            return;
        }
        if (hdr.ina.msg_type == INA_TYPE_RESULT) {
            if (meta.mcast_grp == 0) {
                /* no group: v1model would otherwise send it to port 0 */
                drop_noroute();
                return;
            }
            standard_metadata.mcast_grp = meta.mcast_grp;
            return;
        }
        /* the group [base, base + size) of ina_nexthop toward agg_id */
        bool found = false;
        bit<16> turn = 0;
        bit<16> shifted;
        if (hdr.ina.agg_id == INA_AGG_ID_PS) {
            meta.to_ps = 1;
        } else {
            found = ina_route.apply().hit;
        }
        if (meta.to_ps == 1) {
            found = ps_route.apply().hit;
        }
        if (found && meta.group_size != 0) {
            ecmp_turn.read(turn, (bit<32>)meta.group_base);
            if (turn >= meta.group_size) {
                turn = 0;  /* the group shrank since (re-planned) */
            }
            /* the turn shifted by the switch id: switches that receive the same packets at
             * once (a pod's edges, sent in the same order) do not pick the same members */
            shifted = turn + meta.switch_id;
            hash(meta.member_index, HashAlgorithm.identity, meta.group_base,
                 { shifted }, meta.group_size);
            if (turn + 1 == meta.group_size) {
                ecmp_turn.write((bit<32>)meta.group_base, 0);
            } else {
                ecmp_turn.write((bit<32>)meta.group_base, turn + 1);
            }
            if (ina_nexthop.apply().hit) {
                return;
            }
        }
        drop_noroute();
    }
}

#endif
