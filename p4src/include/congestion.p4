/* Congestion marks (docs/protocol.md section 6, "Congestion marks"; issue 39), in egress:
 * an INA packet that found its egress queue at or above the threshold the controller sets
 * (table MyEgress.ecn_config, one default action; no entry = never marks) leaves with
 * INA_FLAG_ECN set, as ATP (NSDI'21) and the p4lang tutorials' ecn exercise mark from
 * standard_metadata.enq_qdepth.  BMv2 fills it from its egress queues (set_queue_rate /
 * set_queue_depth), pyswitch from pyswitch/queues.py, the simulated network from its
 * link's queue.  The PS ORs the marks of what it merges into the chunk's RESULT
 * (workers/ina/ps.py), so a mark reaches every worker of the job; the workers' congestion
 * control reads it (workers/ina/cc.py, on_mark).  A switch that aggregates writes a
 * PARTIAL's whole flags byte (make_partial), so a mark on a packet it absorbs ends
 * there: marks count the queues a chunk's PARTIALs, fall-backs and RESULTs cross. */
#ifndef INA_CONGESTION_P4
#define INA_CONGESTION_P4

control InaCongestion(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    @name(".MyEgress.ecn_marked")
    counter(1, CounterType.packets_and_bytes) ecn_marked;  /* INA packets marked here */

    bit<19> threshold = 0;  /* packets; 0: no mark */

    /* the controller's threshold, in packets of the egress queue */
    @name(".MyEgress.set_ecn_threshold")
    action set_ecn_threshold(bit<19> qdepth) {
        threshold = qdepth;
    }

    @name(".MyEgress.ecn_config")
    table ecn_config {
        actions = { set_ecn_threshold; NoAction; }
        default_action = NoAction();
        size = 1;
    }

    apply {
        if (hdr.ina.isValid()) {
            ecn_config.apply();
            if (threshold != 0 && standard_metadata.enq_qdepth >= threshold) {
                hdr.ina.flags = hdr.ina.flags | INA_FLAG_ECN;
                ecn_marked.count(0);
            }
        }
    }
}

#endif
