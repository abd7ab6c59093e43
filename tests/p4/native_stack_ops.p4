/* Stack shifts, a union stack parsed with .next, signed saturating subtraction and a for
 * loop counting up to a header's value, for tests/test_native_constructs.py (each once
 * refused by the native path). */
#include <core.p4>
#include <v1model.p4>

header op_t { bit<8> op; int<8> a; int<8> b; int<8> r; }
header h_t { bit<8> v; }
header u8_t { bit<8> x; }
header u16_t { bit<16> y; }
header_union u_t { u8_t a; u16_t b; }
struct headers { op_t op; h_t[3] hs; u_t[2] us; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.op);
        pkt.extract(hdr.hs.next);
        pkt.extract(hdr.hs.next);
        transition select(hdr.op.op[7:7]) { 1: unions; default: accept; }
    }
    state unions {
        pkt.extract(hdr.us.next.a);
        transition select(hdr.op.op[6:6]) { 0: accept; default: second; }
    }
    state second {
        pkt.extract(hdr.us.next.b);
        transition accept;
    }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action count_up() {
        bit<8> n = 0;
        for (bit<8> i = 0; i < (bit<8>)hdr.op.b; i = i + 1) { n = n + 2; }
        hdr.op.a = (int<8>)n;
    }
    apply {
        sm.egress_spec = 1;
        if ((hdr.op.op & 8) == 8) { count_up(); }
        hdr.op.r = hdr.op.a |-| hdr.op.b;
        bit<8> k = hdr.op.op & 7;
        if (k == 1) { hdr.hs.push_front(1); }
        else if (k == 2) { hdr.hs.pop_front(1); }
        else if (k == 3) { hdr.hs.push_front(2); }
        else if (k == 4) { hdr.hs.pop_front(2); }
        if (hdr.hs[0].isValid()) { hdr.hs[0].v = hdr.hs[0].v + 1; }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.op); pkt.emit(hdr.hs); pkt.emit(hdr.us); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
