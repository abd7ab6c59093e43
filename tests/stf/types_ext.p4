/* Types and forms p4c accepts: a struct (with a nested struct) and a bool inside a header,
 * laid out field by field; tuples (p4c makes them structs), compared; an action
 * parameter with a default value; a table without actions (NoAction is its default); an
 * assignment to a slice of a slice; packet.advance by a run-time amount; a table keyed by
 * an error (a 32-bit number on BMv2, core.p4's errors first). */
#include <core.p4>
#include <v1model.p4>

struct inner_t { bit<4> hi; bit<4> lo; }
struct row_t { bit<8> e; inner_t n; }

header h_t {
    bit<8> op;
    row_t  row;
    bool   flag;
    bit<7> pad;
    bit<8> len;
}
header t_t { bit<8> v; }

typedef tuple<bit<4>, bit<4>> pair4_t;

struct headers { h_t h; t_t t; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.advance((bit<32>)hdr.h.len * 8);
        pkt.extract(hdr.t);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action add(bit<8> a, bit<8> b = 1) { hdr.h.row.e = hdr.h.row.e + a + b; }
    table none {
        key = { }
        actions = { }
    }
    table t {
        key = { hdr.h.row.e: exact; }
        actions = { add; }
        default_action = add(2, 3);
    }
    action mark() { hdr.h.op = 0xEE; }
    table by_error {
        key = { sm.parser_error: exact; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        none.apply();
        by_error.apply();
        if (hdr.h.flag) {
            hdr.h.row.n.lo = hdr.h.row.n.hi;
        } else {
            hdr.h.flag = true;
        }
        pair4_t q = { hdr.h.row.n.hi, hdr.h.row.n.lo };
        tuple<bit<4>, bit<4>> q2 = { hdr.h.row.n.lo, hdr.h.row.n.hi };
        if (q == q2) {
            hdr.h.pad = 1;
        }
        hdr.t.v[7:4][1:0] = 2w3;
        t.apply();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.t);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
