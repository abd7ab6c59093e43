/* -*- P4_16 -*- */
/* INSync in-network aggregation (INA) switch, v1model (BMv2 simple_switch / pyswitch).
 *
 * One program for every switch of the network: a switch whose switch_config says
 * agg_enabled = 0 is a plain forwarder (IPv4 LPM + INA routing by agg_id, same ECMP),
 * which is how the testbed models a non-programmable switch.
 *
 * Ingress is one control per mechanism (docs/protocol.md has the full state machine and
 * loss recovery):
 *  - include/admission.p4, InaAdmission: validation and membership; malformed packets
 *    and contributions from unregistered workers/ports are counted and dropped;
 *  - include/aggregation.p4, InaAggregation: the aggregator slots (they own their
 *    registers): a GRAD/PARTIAL addressed to this switch is aggregated in slot
 *    crc32(job_id ++ round ++ chunk_id) mod INA_NUM_SLOTS (claim / join / duplicate /
 *    re-emit / collision fallback / completion); a RESULT releases the slot holding its
 *    key; the sums live in the generated InaValues control (include/values_regs.p4);
 *  - include/routing.p4, InaRouting: IPv4 LPM; a RESULT is multicast to the job's group;
 *    a GRAD/PARTIAL goes toward its agg_id (another switch, or 0 = the PS) over the
 *    controller's equal-cost group, its members in turn (register ecmp_turn).
 * Egress marks INA packets whose egress queue is over the controller's threshold
 * (include/congestion.p4, InaCongestion: INA_FLAG_ECN from standard_metadata.enq_qdepth),
 * keeps RESULT copies from going back where they came from (counted in
 * MyEgress.dropped_echo) and optionally rewrites their destination per port. Every drop
 * of the program counts its reason (docs/protocol.md §4).
 *
 * Types of the quantities: include/types.p4. Every control-plane name (tables, actions,
 * counters, registers) stays under MyIngress./MyEgress. via @name(".MyIngress.x"), so
 * the controller (controller/dataplane/deploy.py) and docs/protocol.md do not depend on this
 * layout. Valid for p4c's BMv2 backend: no run-time division, shift amounts of 8 bits.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/constants.p4"
#include "include/types.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/admission.p4"
#include "include/aggregation.p4"
#include "include/routing.p4"
#include "include/congestion.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    InaAdmission() admission;
    InaAggregation() aggregation;
    InaRouting() routing;

    apply {
        /* Drops (and ends ingress for) what is not accepted. */
        admission.apply(hdr, meta, standard_metadata);
        /* Every RESULT (slot release) and what is addressed to this switch. */
        if (hdr.ina.isValid()
                && (hdr.ina.msg_type == INA_TYPE_RESULT
                    || (meta.switch_id != 0 && hdr.ina.agg_id == meta.switch_id))) {
            aggregation.apply(hdr, meta, standard_metadata);
        }
        routing.apply(hdr, meta, standard_metadata);
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    /* RESULT multicast copies not sent back out of the port they came in on. */
    counter(1, CounterType.packets_and_bytes) dropped_echo;

    action drop_echo() {
        dropped_echo.count(0);
        mark_to_drop(standard_metadata);
    }

    action set_result_dst(macAddr_t dstAddr, ip4Addr_t ip) {
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.dstAddr = ip;
    }

    /* Optional per-port destination rewrite of RESULT copies (e.g. so that a worker's
     * kernel UDP socket accepts them); no entry = copy sent unchanged. */
    table result_rewrite {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_result_dst; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    InaCongestion() congestion;

    apply {
        congestion.apply(hdr, meta, standard_metadata);
        if (hdr.ina.isValid() && hdr.ina.msg_type == INA_TYPE_RESULT) {
            /* Never send a multicast copy back where it came from; but a point's NACK
             * goes to its workers behind the port of the retransmission that made it
             * too (its own tree, whose root has no parent port). */
            if (standard_metadata.egress_port == standard_metadata.ingress_port
                    && (hdr.ina.flags & INA_FLAG_INCOMPLETE) == 0) {
                drop_echo();
            } else {
                result_rewrite.apply();
            }
        }
    }
}

V1Switch(
    MyParser(),
    MyVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    MyComputeChecksum(),
    MyDeparser()
) main;
