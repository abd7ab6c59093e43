/* -*- P4_16 -*- */
/* SwitchML-style in-network aggregation, v1model (BMv2 simple_switch / pyswitch).
 *
 * One switch sums the job's vectors and sends every result back to the workers itself: no
 * parameter server in the data path (docs/switchml.md). The workers drive everything: each
 * keeps a window of S pool slots busy, one chunk of K values per slot, and retransmits a
 * chunk whose RESULT it has not seen after a timeout; the switch keeps every slot in two
 * shadow copies (version 0 and 1, alternating on each reuse) so that the previous result
 * of a slot can still be sent to a worker that lost it.
 *
 * Ingress is one control per mechanism:
 *  - include/switchml_admission.p4, SmAdmission: validation, the job, membership and the
 *    slot range; what is not accepted is counted and dropped;
 *  - include/switchml_pool.p4, SmPool: the two copies of every slot (they own their
 *    registers): claim, join, duplicate, shadow reply, stale; completion turns the packet
 *    into the RESULT;
 *  - include/switchml_delivery.p4, SmDelivery: RESULT multicast (one replica per worker)
 *    or unicast back to the sender, IPv4 LPM.
 * Egress addresses each multicast replica to its worker (result_dst).
 *
 * Shared with ina.p4 (include/constants.p4, types.p4, headers.p4): K, the worker-set width,
 * Ethernet / IPv4 / UDP and the values header. Valid for p4c's BMv2 backend: no run-time
 * multiplication or division, shift amounts of 8 bits. Control-plane names stay under
 * MyIngress./MyEgress. (workers/switchml/rules.py writes the entries).
 */
#include <core.p4>
#include <v1model.p4>

#include "include/switchml_constants.p4"
#include "include/switchml_headers.p4"
#include "include/switchml_parser.p4"
#include "include/switchml_admission.p4"
#include "include/switchml_pool.p4"
#include "include/switchml_delivery.p4"

control MyIngress(inout sm_headers_t hdr,
                  inout sm_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    SmAdmission() admission;
    SmPool() pool;
    SmDelivery() delivery;

    apply {
        admission.apply(hdr, meta, standard_metadata);  /* exits on a drop */
        if (hdr.sm.isValid()) {
            pool.apply(hdr, meta, standard_metadata);   /* exits unless a RESULT */
        }
        delivery.apply(hdr, meta, standard_metadata);
    }
}

control MyEgress(inout sm_headers_t hdr,
                 inout sm_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    action set_result_dst(macAddr_t dstAddr, ip4Addr_t ip) {
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.dstAddr = ip;
    }

    /* Each multicast replica (rid = worker_id + 1 of the job's group) addressed to its
     * worker, so that its kernel accepts the RESULT; no entry (a unicast reply, rid 0) = the
     * copy leaves as delivery addressed it. */
    table result_dst {
        key = {
            hdr.sm.job_id: exact;
            standard_metadata.egress_rid: exact;
        }
        actions = { set_result_dst; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        if (hdr.sm.isValid() && hdr.sm.msg_type == SWITCHML_TYPE_RESULT) {
            result_dst.apply();
        }
    }
}

V1Switch(
    SmParser(),
    SmVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    SmComputeChecksum(),
    SmDeparser()
) main;
