/* Action parameters with a direction of header, struct, enum and slice type, and arguments
 * bound in a table's actions list, as p4c + BMv2 run them: copy-in at the call, copy-out
 * after it (so the copy-out overwrites what the body wrote to the same storage directly),
 * an out header that the body never sets comes back invalid, and a bound action that
 * exits is copied out first. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
}
header e_t {
    bit<8> x;
    bit<8> y;
}

struct headers { h_t h; e_t e; }
struct metadata { }
struct pair_t { bit<8> p; bit<8> q; }
enum Color { Red, Green }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.e);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    pair_t pr;
    action set_e(inout e_t v) {
        hdr.e.x = 0xEE;
        v.y = v.y + 1;
    }
    action kill(out e_t v) { }
    action from_list(in e_t v) { hdr.h.c = v.x + v.y; }
    action mk(out pair_t s, in Color col) {
        s.p = 1;
        s.q = (col == Color.Green) ? 8w2 : 8w3;
    }
    action nib(inout bit<4> n) { n = 0xA; }
    action bump(inout bit<8> x, bit<8> d) {
        x = x + d;
        if (x == 0xFF) {
            exit;
        }
    }
    table t {
        key = { hdr.h.op: exact; }
        actions = { bump(hdr.h.b); NoAction; }
        default_action = bump(hdr.h.b, 1);
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            set_e(hdr.e);
        } else if (hdr.h.op == 2) {
            kill(hdr.e);
        } else if (hdr.h.op == 3) {
            from_list({ 8w3, 8w4 });
        } else if (hdr.h.op == 4) {
            mk(pr, Color.Green);
            hdr.h.a = pr.p;
            hdr.h.b = pr.q;
        } else if (hdr.h.op == 5) {
            mk(pr, Color.Red);
            hdr.h.a = pr.p;
            hdr.h.b = pr.q;
        } else if (hdr.h.op == 6) {
            nib(hdr.h.a[7:4]);
        } else {
            t.apply();
            hdr.h.c = 0x77;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.e);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
