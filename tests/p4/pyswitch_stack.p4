/* pyswitch conformance: header stacks with constant indices, a table keyed by stack
 * elements, a @controller_header. */
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header mpls_t {
    bit<20> label;
    bit<3>  tc;
    bit<1>  bos;
    bit<8>  ttl;
}

struct metadata { bit<8> unused; }

struct headers {
    packet_in_t packet_in;
    ethernet_t  ethernet;
    mpls_t[2]   mpls;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x8847: parse_mpls;
            default: accept;
        }
    }
    state parse_mpls {
        packet.extract(hdr.mpls[0]);
        packet.extract(hdr.mpls[1]);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action fwd(bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.mpls[0].ttl = hdr.mpls[0].ttl - 1;
        hdr.mpls[1].ttl = hdr.mpls[1].ttl - 1;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table by_label {
        key = {
            hdr.mpls[0].label: exact;
            hdr.mpls[1].label: exact;
        }
        actions = { fwd; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.mpls[1].isValid()) {
            by_label.apply();
        } else {
            drop();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.mpls);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
