/* Delivery in p4src/switchml.p4: where an accepted packet leaves the switch.
 *  - a RESULT: its addresses swapped (it comes from the address the UPDATE was sent to
 *    and goes back to the sender), then multicast to the job's group when it completed its
 *    copy -- one replica per worker, rid = worker_id + 1, whose destination the egress
 *    control rewrites (result_dst), so that several workers may sit behind one port -- or
 *    unicast back out of the sender's port when a shadow copy answers a retransmission
 *    (meta.deliver, set by SmPool);
 *  - plain IPv4: longest-prefix match (ipv4_lpm); a miss is counted in
 *    dropped_ipv4_noroute.
 * Every UPDATE that does not become a RESULT ended ingress in SmPool. */
#ifndef _SWITCHML_DELIVERY_P4_
#define _SWITCHML_DELIVERY_P4_

#include "switchml_headers.p4"

control SmDelivery(inout sm_headers_t hdr,
                   inout sm_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    @name(".MyIngress.dropped_ipv4_noroute")
    counter(1, CounterType.packets_and_bytes) dropped_ipv4_noroute;

    @name(".MyIngress.drop")
    action drop() {
        dropped_ipv4_noroute.count(0);
        mark_to_drop(standard_metadata);
    }

    @name(".MyIngress.ipv4_forward")
    action ipv4_forward(macAddr_t dstAddr, egressSpec_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".MyIngress.ipv4_lpm")
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        default_action = drop();
        size = 1024;
    }

    action reply_addresses() {
        macAddr_t mac = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = mac;
        ip4Addr_t ip = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = ip;
    }

    apply {
        if (!hdr.sm.isValid()) {
            ipv4_lpm.apply();
            return;
        }
        reply_addresses();
        if (meta.deliver == SM_DELIVER_MULTICAST) {
            standard_metadata.mcast_grp = meta.mcast_grp;  /* != 0: admission */
        } else {
            standard_metadata.egress_spec = standard_metadata.ingress_port;
        }
    }
}

#endif
