/* clone_preserving_field_list: which user metadata fields an I2E or E2E clone keeps
 * (@field_list(index)), everything else reset, as BMv2.  Egress appends what it saw. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header seen_t {
    bit<32> instance_type;
    bit<16> keep1;
    bit<8>  keep12;
    bit<8>  not_kept;
    bit<8>  inner_a;
    bit<8>  inner_b;
}

struct inner_t {
    bit<8> a;
    bit<8> b;
}

struct metadata {
    @field_list(1)
    bit<16> keep1;
    @field_list(1, 2)
    bit<8> keep12;
    bit<8> not_kept;
    @field_list(2)
    inner_t inner;
}

struct headers {
    ethernet_t ethernet;
    seen_t     seen;
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
        meta.keep1 = 0x1111;
        meta.keep12 = 0x22;
        meta.not_kept = 0x33;
        meta.inner.a = 0x44;
        meta.inner.b = 0x55;
        standard_metadata.egress_spec = 2;
        if (hdr.ethernet.etherType == 0x3001) {
            clone_preserving_field_list(CloneType.I2E, 5, 1);
        } else if (hdr.ethernet.etherType == 0x3002) {
            clone_preserving_field_list(CloneType.I2E, 5, 2);
        } else if (hdr.ethernet.etherType == 0x3003) {
            clone(CloneType.I2E, 5);
        } else if (hdr.ethernet.etherType == 0x3005) {
            /* the last clone call wins, as in BMv2 */
            clone_preserving_field_list(CloneType.I2E, 5, 2);
            clone_preserving_field_list(CloneType.I2E, 5, 1);
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.ethernet.etherType == 0x3004 && standard_metadata.instance_type == 0) {
            meta.keep1 = 0x7777;
            meta.inner.b = 0x66;
            clone_preserving_field_list(CloneType.E2E, 6, 2);
        }
        hdr.seen.setValid();
        hdr.seen.instance_type = standard_metadata.instance_type;
        hdr.seen.keep1 = meta.keep1;
        hdr.seen.keep12 = meta.keep12;
        hdr.seen.not_kept = meta.not_kept;
        hdr.seen.inner_a = meta.inner.a;
        hdr.seen.inner_b = meta.inner.b;
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.seen);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
