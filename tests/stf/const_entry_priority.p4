/* Priorities of const entries as p4c's BMv2 backend sets them: an entry's @priority, else
 * its position (1, 2, ...); BMv2 takes the matching entry with the smallest number, the
 * first listed among equals. On a table of exact and lpm keys priorities do not count. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> a;
    bit<8>  b;
    bit<8>  ra;
    bit<8>  rb;
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
    action seta(bit<8> v) { hdr.h.ra = v; }
    action setb(bit<8> v) { hdr.h.rb = v; }

    table tern {
        key = { hdr.h.a: ternary; }
        actions = { seta; NoAction; }
        default_action = NoAction();
        const entries = {
            0x0001 &&& 0x000F : seta(1) @priority(3);
            0x1001            : seta(2);
            0x1001 &&& 0xF00F : seta(3) @priority(1);
            0x2000 &&& 0xF000 : seta(4) @priority(5);
            0x2002 &&& 0xF00F : seta(5);
            0x3000 &&& 0xF000 : seta(6) @priority(7);
            0x3003 &&& 0xF00F : seta(7) @priority(6);
        }
    }
    table pfx {
        key = { hdr.h.b: lpm; }
        actions = { setb; NoAction; }
        default_action = NoAction();
        const entries = {
            0x10 &&& 0xF0 : setb(1) @priority(1);
            0x12          : setb(2) @priority(9);
        }
    }
    apply {
        sm.egress_spec = 1;
        tern.apply();
        pfx.apply();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
