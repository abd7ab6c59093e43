/* STF runner test program: multicast groups built with mc_* commands, replicas told
 * apart by egress_rid, and an ingress-to-egress clone to a mirroring session. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  kind;
    bit<8>  rid;
    bit<8>  inst;
    bit<8>  port;
}

struct headers { h_t h; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.h.kind == 1) {
            sm.mcast_grp = 5;
        } else if (hdr.h.kind == 2) {
            clone(CloneType.I2E, 7);
            sm.egress_spec = 1;
        } else {
            sm.egress_spec = 2;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.rid = (bit<8>)sm.egress_rid;
        hdr.h.inst = (bit<8>)sm.instance_type;
        hdr.h.port = (bit<8>)sm.egress_port;
    }
}

control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
