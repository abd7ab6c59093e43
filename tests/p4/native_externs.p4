/* The served externs that no other differential program calls (tests/test_native_externs.py):
 * verify in the parser, verify_checksum_with_payload / update_checksum_with_payload over a
 * UDP-like header and the payload, log_msg, clone_preserving_field_list from egress, and
 * random (WITH_RANDOM: one generator on both paths, a draw of 8 and of 82 bits);
 * VERIFY_AT_RUN_TIME: verify with an error known at run time only (a metadata field). */
#include <core.p4>
#include <v1model.p4>

error { BadVersion }

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header udp_t {
    bit<8>  version;
    bit<8>  ttl;
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> checksum;
}

struct metadata {
    @field_list(1)
    bit<8> seen;
    bit<8> coin;
    bit<100> wide;
#ifdef VERIFY_AT_RUN_TIME
    error err;
#endif
}

struct headers {
    ethernet_t ethernet;
    udp_t      udp;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88b8: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
#ifdef VERIFY_AT_RUN_TIME
        meta.err = error.BadVersion;
        transition select(hdr.udp.ttl) {
            0: ttl_zero;
            default: check;
        }
    }
    state ttl_zero {
        meta.err = error.HeaderTooShort;
        transition check;
    }
    state check {
        verify(hdr.udp.version == 1, meta.err);
#else
        verify(hdr.udp.version == 1, error.BadVersion);
#endif
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum_with_payload(hdr.udp.isValid(),
            { hdr.udp.srcPort, hdr.udp.dstPort, hdr.udp.version },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        log_msg("ingress port {}", {standard_metadata.ingress_port});
        if (standard_metadata.parser_error != error.NoError) {
            standard_metadata.egress_spec = 7;
            hdr.ethernet.etherType = 0xbad0;
#ifdef VERIFY_AT_RUN_TIME
            if (standard_metadata.parser_error == error.HeaderTooShort) {
                standard_metadata.egress_spec = 8;
            }
#endif
        } else if (standard_metadata.checksum_error == 1) {
            standard_metadata.egress_spec = 6;
        } else if (hdr.udp.isValid()) {
            hdr.udp.ttl = hdr.udp.ttl - 1;
            meta.seen = hdr.udp.ttl;
            standard_metadata.egress_spec = (bit<9>)hdr.udp.dstPort[2:0];
            hdr.udp.dstPort = hdr.udp.dstPort + 1;
#ifdef WITH_RANDOM
            random(meta.coin, 8w0, 8w3);
            hdr.udp.srcPort = hdr.udp.srcPort + (bit<16>)meta.coin;
            random(meta.wide, 100w5, 100w0x3ffffffffffffffffffff);  /* two outputs a draw */
            hdr.ethernet.dstAddr = meta.wide[47:0] ^ (bit<48>)meta.wide[99:52];
#endif
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.instance_type == 0 && hdr.udp.isValid()
                && hdr.udp.ttl[0:0] == 1) {
            clone_preserving_field_list(CloneType.E2E, 5, 1);
        }
        if (standard_metadata.instance_type == 2) {
            hdr.udp.ttl = meta.seen;
            hdr.ethernet.srcAddr = 0xc1;
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum_with_payload(hdr.udp.isValid(),
            { hdr.udp.srcPort, hdr.udp.dstPort, hdr.udp.version },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.udp);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
