/* Function declarations, inlined as p4c does: copy-in/copy-out of every argument, several
 * returns, functions calling functions, header and struct parameters and results, a slice
 * as inout argument, P4's left-to-right order around a call that writes its argument, and
 * && / ?: that run a call only when its value is needed. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  op;
    bit<8>  a;
    bit<8>  b;
    bit<8>  c;
    bit<16> w;
}
header o_t {
    bit<8> x;
    bit<8> y;
}

struct headers { h_t h; o_t o; }
struct metadata { }
struct pair_t { bit<8> lo; bit<8> hi; }

// a constant result: the shift by a bit<16> amount is legal on BMv2 once p4c folds it
bit<16> amount() { return 16w4; }

bit<8> max8(in bit<8> x, in bit<8> y) {
    if (x > y) {
        return x;
    }
    return y;
}

bit<8> bump(inout bit<8> v) {
    v = v + 1;
    return 8w10;
}

bit<8> twice(in bit<8> v) { return max8(v, v) + v; }

void fill(out o_t o, in bit<8> v) {
    o.setValid();
    o.x = v;
    o.y = v + 1;
}

void inc(inout o_t o) { o.x = o.x + 1; }

pair_t split(in bit<16> w) {
    pair_t p;
    p.lo = w[7:0];
    p.hi = w[15:8];
    return p;
}

bit<8> classify(in bit<8> v) {
    if (v == 0) {
        return 0xA0;
    } else if (v < 10) {
        if (v == 5) {
            return 0xA5;
        }
        return 0xA1;
    }
    return 0xAF;
}

void setlow(inout bit<4> n) { n = 0xF; }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            hdr.h.w = hdr.h.w << amount();
            hdr.h.a = max8(hdr.h.a, hdr.h.b);
            hdr.h.c = classify(hdr.h.c);
        } else if (hdr.h.op == 2) {
            hdr.h.c = hdr.h.a + bump(hdr.h.a);
            hdr.h.b = twice(hdr.h.b);
        } else if (hdr.h.op == 3) {
            fill(hdr.o, hdr.h.a);
            inc(hdr.o);
            pair_t p = split(hdr.h.w);
            hdr.h.a = p.lo;
            hdr.h.b = p.hi;
        } else if (hdr.h.op == 4) {
            if (hdr.h.a == 1 && bump(hdr.h.b) == 10) {
                hdr.h.c = 0xCC;
            }
            hdr.h.w = (hdr.h.a == 2) ? (bit<16>)bump(hdr.h.c) : 16w7;
        } else if (hdr.h.op == 5) {
            setlow(hdr.h.a[3:0]);
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.o);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
