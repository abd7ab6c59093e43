/* lookahead<T>() of a header and of a struct (p4c's ExpandLookahead: the bits are read
 * without moving, the header comes out valid; too few bytes is PacketTooShort), a bare
 * lookahead<bit<N>>() statement (p4c drops it: no length check), and == / != on headers,
 * structs and header stacks as p4c defines them: headers are equal when both are invalid,
 * or both valid with equal fields; structs and stacks when all members are. */
#include <core.p4>
#include <v1model.p4>

header pair_t {
    bit<4> hi;
    bit<4> lo;
    bit<8> b;
}

struct pair_s {
    bit<4> hi;
    bit<12> rest;
}

header res_t {
    bit<8> peek_hi;    // lookahead<pair_t>().hi
    bit<8> peek_rest;  // lookahead<pair_s>().rest[7:0]
    bit<8> flags;      // comparisons
}

struct headers {
    res_t r;
    pair_t p0;
    pair_t p1;
    pair_t[2] s0;
    pair_t[2] s1;
}

struct metadata {
    pair_s m0;
    pair_s m1;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        hdr.r.setValid();
        pkt.lookahead<bit<64>>();
        pair_t t = pkt.lookahead<pair_t>();
        meta.m0 = pkt.lookahead<pair_s>();
        hdr.r.peek_hi = (bit<8>)t.hi;
        hdr.r.peek_rest = meta.m0.rest[7:0];
        transition select(t.hi) {
            0: accept;
            1: one;
            default: two;
        }
    }
    state one {
        pkt.extract(hdr.p0);
        transition accept;
    }
    state two {
        pkt.extract(hdr.p0);
        pkt.extract(hdr.p1);
        meta.m1 = pkt.lookahead<pair_s>();
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.s0[0] = hdr.p0;
        hdr.s1[0] = hdr.p1;
        hdr.r.flags = (bit<1>)(hdr.p0 == hdr.p1) ++ (bit<1>)(hdr.p0 != hdr.p1) ++
                      (bit<1>)(meta.m0 == meta.m1) ++ (bit<1>)(hdr.s0 == hdr.s1) ++
                      (bit<1>)(sm.parser_error == error.PacketTooShort) ++ 3w0;
        hdr.s0[0].setInvalid();
        hdr.s1[0].setInvalid();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.r);
        pkt.emit(hdr.p0);
        pkt.emit(hdr.p1);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
