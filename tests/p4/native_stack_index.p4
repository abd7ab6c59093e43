/* Header stack elements chosen at run time, for tests/test_native_stacks.py: hs.next and
 * .last in the parser, a run-time index read and written in ingress (outside the stack:
 * read as zeros, written nowhere), and an extract at a run-time index (outside the stack:
 * StackIndexError, as BMv2 aborts). */
#include <core.p4>
#include <v1model.p4>

header idx_t { bit<8> i; bit<8> j; bit<8> x; bit<8> seen; }
header h_t { bit<8> v; }
struct headers { idx_t idx; h_t[4] hs; h_t extra; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.idx);
        transition select(hdr.idx.x) { 0: elems; 1: at_index; default: accept; }
    }
    state elems {
        pkt.extract(hdr.hs.next);
        transition select(hdr.hs.last.v) { 0: accept; default: elems; }
    }
    state at_index {
        pkt.extract(hdr.hs[hdr.idx.i]);
        transition accept;
    }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.hs[hdr.idx.i].v = hdr.hs[hdr.idx.j].v + 1;
        if (hdr.hs[hdr.idx.j & 3].isValid()) { hdr.idx.seen = hdr.hs[hdr.idx.j & 3].v; }
        sm.egress_spec = 1;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.idx); pkt.emit(hdr.hs); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
