/* Forms of P4 that p4c accepts and prints: compound assignment (x += e, on slices too),
 * switch on a value with constant labels (numbers, constants, enum members; fall-through
 * labels; a default that runs only when no label matches, wherever it is written),
 * packet methods with explicit type arguments (extract<H>(hdr.h), extract<H>(_) to skip a
 * header, emit<H>), `return { ... }` for a header result, stray ';' between
 * declarations, and function-like macros (nested, arguments expanded first). */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
}
header s_t { bit<16> skip; }
header t_t { bit<8> v; }

struct headers { h_t h; t_t t; };
struct metadata { };

enum bit<8> Op_t { ONE = 1, TWO = 2 }
const bit<8> FOUR = 4;
#define TWICE(v) ((v) + (v))
#define ADD(dst, v) dst = dst + TWICE(v)

t_t mk() { return { 8w0x5A }; }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract<h_t>(hdr.h);
        pkt.extract<s_t>(_);
        pkt.extract<t_t>(hdr.t);
        transition accept;
    }
};

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        switch (hdr.h.op) {
            1: {
                hdr.h.a += 1;
                hdr.h.b -= 1;
            }
            default: { hdr.h.c = 0xDD; }
            2:
            3: {
                hdr.h.a <<= 2;
                hdr.h.b |+|= 0xF0;
            }
            FOUR: { hdr.h.a[3:0] ^= 4w0xF; }
            5: {
                hdr.t = mk();
                ADD(hdr.h.b, 8w3);
            }
        }
        switch ((Op_t)hdr.h.b) {
            Op_t.ONE: { hdr.h.c = 0x11; }
            Op_t.TWO: { hdr.h.c = 0x22; }
        }
    }
};

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit<h_t>(hdr.h);
        pkt.emit(hdr.t);
    }
};

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
