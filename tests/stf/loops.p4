/* for loops (P4 1.2.4; BMv2 runs them with jumps): a run-time bound in an action, nested
 * loops with break and continue, several initialisers and updates, compound updates, a
 * loop inside a function, and exit from inside a loop. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  n;
    bit<8>  op;
    bit<16> sum;
    bit<8>  x;
}

struct headers { h_t h; }
struct metadata { }

bit<8> count_bits(in bit<8> v) {
    bit<8> c = 0;
    bit<8> w = v;
    for (bit<8> k = 0; k < 8; k += 1) {
        if (w[0:0] == 1) {
            c = c + 1;
        }
        w = w >> 1;
    }
    return c;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action sum_to_n() {
        hdr.h.sum = 0;
        for (bit<8> i = 1; i <= hdr.h.n; i = i + 1) {
            hdr.h.sum = hdr.h.sum + (bit<16>)i;
        }
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            sum_to_n();
        } else if (hdr.h.op == 2) {
            hdr.h.sum = 0;
            for (bit<8> i = 0; i < hdr.h.n; i += 1) {
                if (i == 3) {
                    continue;
                }
                for (bit<8> j = 0; j < 100; j = j + 1) {
                    if (j == i) {
                        break;
                    }
                    hdr.h.sum = hdr.h.sum + 1;
                }
            }
        } else if (hdr.h.op == 3) {
            bit<8> a;
            bit<8> b;
            for (a = 0, b = 10; a < b; a = a + 1, b = b - 1) { }
            hdr.h.sum = a ++ b;
        } else if (hdr.h.op == 4) {
            hdr.h.x = count_bits(hdr.h.n);
        } else if (hdr.h.op == 5) {
            for (bit<8> i = 0; i < 10; i = i + 1) {
                hdr.h.x = i;
                if (i == hdr.h.n) {
                    exit;
                }
            }
            hdr.h.sum = 0xFFFF;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
