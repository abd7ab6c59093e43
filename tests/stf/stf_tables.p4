/* STF runner test program: ternary keys with priorities, lpm with and without an
 * explicit prefix, a default action set by `setdefault`, range and optional keys. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<32> a;
    bit<16> b;
    bit<8>  c;
    bit<8>  res;
    bit<8>  tag;
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
    action set_out(bit<8> v) { hdr.h.res = v; }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    action set_tag(bit<8> t) { hdr.h.tag = t; }

    table tern {
        key = { hdr.h.a: ternary; }
        actions = { set_out; NoAction; }
        default_action = NoAction();
    }
    table route {
        key = { hdr.h.a: lpm; }
        actions = { fwd; drop; }
        default_action = drop();
    }
    table rng {
        key = { hdr.h.b: range; hdr.h.c: optional; }
        actions = { set_tag; NoAction; }
        default_action = NoAction();
    }
    apply {
        tern.apply();
        route.apply();
        rng.apply();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
