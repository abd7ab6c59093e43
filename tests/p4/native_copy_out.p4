/* Actions with out/inout parameters, for tests/test_native_stacks.py: called from a
 * control (copy-out after the body and on exit), from another action, and bound in a
 * table's actions list (the table's wrapper passes the action data on). */
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct headers { h_t h; }
struct metadata { bit<8> m; bit<16> w; }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action bump(inout bit<8> x, out bit<16> y, bit<8> k) {
        y = (bit<16>)x + (bit<16>)k;
        if (x > 200) { x = 1; exit; }
        x = x + k;
    }
    action twice(inout bit<8> x) {
        bump(x, meta.w, 3);
        bump(x, meta.w, 5);
    }
    action flag(out bit<8> f, bit<8> v) {
        f = v;
        if (v == 7) { exit; }
        f = v + 1;
    }
    table t {
        key = { hdr.h.d: exact; }
        actions = { flag(hdr.h.c); NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        meta.m = hdr.h.a;
        bump(meta.m, meta.w, hdr.h.b);
        hdr.h.a = meta.m;
        hdr.h.b = (bit<8>)meta.w;
        if (hdr.h.d == 0) { twice(hdr.h.c); }
        t.apply();
        hdr.h.d = hdr.h.d + 1;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
