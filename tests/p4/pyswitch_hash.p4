/* pyswitch conformance: v1model hash() with every supported algorithm, the calls of
 * tests/data/bmv2-hash-vectors.json (measured on BMv2, see tests/data/README.md). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header in_t {
    bit<4>  p;
    bit<12> q;
    bit<4>  r;
    bit<4>  pad;
    bit<32> d;
}

header out_t {
    bit<16> crc16_pq;
    bit<32> crc32_pq;
    bit<16> csum16_pq;
    bit<16> crc16_pqr;
    bit<32> crc32_pqr;
    bit<16> csum16_pqr;
    bit<16> crc16_q;
    bit<32> crc32_q;
    bit<16> crc16_d;
    bit<32> crc32_d;
    bit<16> csum16_d;
    bit<16> crc32_d_base7_max13;
    bit<8>  crc16_d_to8;
    bit<32> ident_pqr;
}

struct metadata { bit<8> unused; }

struct headers {
    ethernet_t ethernet;
    in_t       inp;
    out_t      res;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.inp);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        hdr.res.setValid();
        hash(hdr.res.crc16_pq, HashAlgorithm.crc16, 16w0, {hdr.inp.p, hdr.inp.q}, 32w65536);
        hash(hdr.res.crc32_pq, HashAlgorithm.crc32, 32w0, {hdr.inp.p, hdr.inp.q},
             64w4294967296);
        hash(hdr.res.csum16_pq, HashAlgorithm.csum16, 16w0, {hdr.inp.p, hdr.inp.q}, 32w65536);
        hash(hdr.res.crc16_pqr, HashAlgorithm.crc16, 16w0, {hdr.inp.p, hdr.inp.q, hdr.inp.r},
             32w65536);
        hash(hdr.res.crc32_pqr, HashAlgorithm.crc32, 32w0, {hdr.inp.p, hdr.inp.q, hdr.inp.r},
             64w4294967296);
        hash(hdr.res.csum16_pqr, HashAlgorithm.csum16, 16w0,
             {hdr.inp.p, hdr.inp.q, hdr.inp.r}, 32w65536);
        hash(hdr.res.crc16_q, HashAlgorithm.crc16, 16w0, {hdr.inp.q}, 32w65536);
        hash(hdr.res.crc32_q, HashAlgorithm.crc32, 32w0, {hdr.inp.q}, 64w4294967296);
        hash(hdr.res.crc16_d, HashAlgorithm.crc16, 16w0, {hdr.inp.d}, 32w65536);
        hash(hdr.res.crc32_d, HashAlgorithm.crc32, 32w0, {hdr.inp.d}, 64w4294967296);
        hash(hdr.res.csum16_d, HashAlgorithm.csum16, 16w0, {hdr.inp.d}, 32w65536);
        hash(hdr.res.crc32_d_base7_max13, HashAlgorithm.crc32, 16w7, {hdr.inp.d}, 32w13);
        hash(hdr.res.crc16_d_to8, HashAlgorithm.crc16, 8w0, {hdr.inp.d}, 32w65536);
        hash(hdr.res.ident_pqr, HashAlgorithm.identity, 32w0,
             {hdr.inp.p, hdr.inp.q, hdr.inp.r}, 64w4294967296);
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.inp);
        packet.emit(hdr.res);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
