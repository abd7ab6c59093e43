/* `exit` inside an action called with out/inout arguments, as p4c + BMv2 run it: called
 * from a control, the arguments are copied out before the exit (p4c puts the copy-out
 * before every exit); called from another action, p4c inlines the callee with its copy-out
 * after the body, so the exit skips that copy-out while the caller's own parameters are
 * still copied out. Statements after the exit never run. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers { h_t h; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_exit(inout bit<8> x) { x = 0x11; exit; }
    action just_exit() { exit; }
    action outer(inout bit<8> y, out bit<8> z) {
        y = 0x22;
        z = 0x33;
        just_exit();
        y = 0x99;
    }
    action nested(inout bit<8> y) {
        y = 0x44;
        set_exit(y);
        y = 0x98;
    }
    action nested_global() { set_exit(hdr.h.b); }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            set_exit(hdr.h.a);
            hdr.h.b = 0xEE;
        } else if (hdr.h.op == 2) {
            outer(hdr.h.a, hdr.h.b);
            hdr.h.c = 0xEE;
        } else if (hdr.h.op == 3) {
            nested(hdr.h.c);
            hdr.h.a = 0xEE;
        } else if (hdr.h.op == 4) {
            nested_global();
            hdr.h.a = 0xEE;
        }
        hdr.h.c = 0x77;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { hdr.h.op = hdr.h.op + 0x10; }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
