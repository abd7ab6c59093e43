/* pyswitch egress queues: ingress sends etherType 0x2000 to port 2, 0x2001 to port 3,
 * 0x2002 to multicast group 1; priority from the low 3 bits of srcAddr.  Egress appends
 * a header with the queueing metadata it saw (BMv2's standard_metadata fields). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header q_t {
    bit<32> enq_timestamp;
    bit<32> enq_qdepth;
    bit<32> deq_timedelta;
    bit<32> deq_qdepth;
    bit<16> egress_port;
}

struct metadata { bit<8> unused; }

struct headers {
    ethernet_t ethernet;
    q_t        q;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.priority = hdr.ethernet.srcAddr[2:0];
        if (hdr.ethernet.etherType == 0x2000) {
            standard_metadata.egress_spec = 2;
        } else if (hdr.ethernet.etherType == 0x2001) {
            standard_metadata.egress_spec = 3;
        } else if (hdr.ethernet.etherType == 0x2002) {
            standard_metadata.mcast_grp = 1;
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.q.setValid();
        hdr.q.enq_timestamp = standard_metadata.enq_timestamp;
        hdr.q.enq_qdepth = (bit<32>)standard_metadata.enq_qdepth;
        hdr.q.deq_timedelta = standard_metadata.deq_timedelta;
        hdr.q.deq_qdepth = (bit<32>)standard_metadata.deq_qdepth;
        hdr.q.egress_port = (bit<16>)standard_metadata.egress_port;
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.q);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
