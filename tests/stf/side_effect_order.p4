/* Side effects in the l-value, in P4's order (as p4c's SideEffectOrdering fixes it): the
 * index of the element assigned is evaluated once and before the right side, also for a
 * compound assignment; a list assigned to a struct is read completely before the struct
 * changes (a swap works, as p4c's RemoveAliases makes it), and its values are taken left
 * to right around a call with side effects. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> i;
    bit<8> r;
}
header e_t { bit<8> v; }

struct headers { h_t h; e_t[2] s; }
struct pair_t { bit<8> x; bit<8> y; }
struct metadata { pair_t p; }

bit<8> postinc(inout bit<8> x) {
    bit<8> old = x;
    x = x + 1;
    return old;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.s[0]);
        pkt.extract(hdr.s[1]);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            hdr.s[postinc(hdr.h.i) & 1].v = hdr.h.i;
        } else if (hdr.h.op == 2) {
            hdr.s[postinc(hdr.h.i) & 1].v |= 0xF0;
        } else if (hdr.h.op == 3) {
            hdr.h.r = hdr.s[postinc(hdr.h.i) & 1].v + hdr.h.i;
        } else if (hdr.h.op == 4) {
            meta.p = { hdr.s[0].v, hdr.s[1].v };
            meta.p = { meta.p.y, meta.p.x };
            hdr.s[0].v = meta.p.x;
            hdr.s[1].v = meta.p.y;
        } else if (hdr.h.op == 5) {
            hdr.h = { hdr.h.op, hdr.h.i, postinc(hdr.h.i) };
        } else if (hdr.h.op == 6) {
            meta.p = { hdr.h.i, postinc(hdr.h.i) };
            hdr.h.r = meta.p.x + meta.p.y;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.s);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
