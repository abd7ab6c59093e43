/* pyswitch conformance: multicast replication with rids, I2E/E2E clone, drop in ingress and
 * egress. Egress appends a tag header recording what egress saw. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header tag_t {
    bit<16> egress_port;
    bit<16> egress_rid;
    bit<32> instance_type;
    bit<16> ingress_port;
    bit<8>  ttl_seen;
}

struct metadata { bit<8> unused; }

struct headers {
    ethernet_t ethernet;
    tag_t      tag;
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
        /* the ingress modification must not be visible in an I2E clone */
        hdr.ethernet.srcAddr = 48w0x0000000000EE;
        if (hdr.ethernet.etherType == 0x1000) {
            standard_metadata.mcast_grp = 1;
        } else if (hdr.ethernet.etherType == 0x1001) {
            standard_metadata.egress_spec = 2;
            clone(CloneType.I2E, 5);
        } else if (hdr.ethernet.etherType == 0x1002) {
            standard_metadata.egress_spec = 3;
        } else if (hdr.ethernet.etherType == 0x1003) {
            mark_to_drop(standard_metadata);
        } else if (hdr.ethernet.etherType == 0x1004) {
            /* multicast wins over the drop port (BMv2 after-ingress order) */
            standard_metadata.egress_spec = 511;
            standard_metadata.mcast_grp = 2;
        } else if (hdr.ethernet.etherType == 0x1005) {
            standard_metadata.egress_spec = 4;
        }
        /* etherType 0x1006: egress_spec never set -> port 0 (BMv2 default) */
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == 4) {
            mark_to_drop(standard_metadata);
        }
        if (hdr.ethernet.etherType == 0x1002 && standard_metadata.instance_type == 0) {
            hdr.ethernet.dstAddr = 48w0xDD;
            clone(CloneType.E2E, 6);
        }
        hdr.tag.setValid();
        hdr.tag.egress_port = (bit<16>)standard_metadata.egress_port;
        hdr.tag.egress_rid = standard_metadata.egress_rid;
        hdr.tag.instance_type = standard_metadata.instance_type;
        hdr.tag.ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.tag.ttl_seen = (bit<8>)standard_metadata.egress_spec;
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
