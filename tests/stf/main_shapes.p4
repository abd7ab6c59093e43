/* Other shapes of main, as p4c accepts them: V1Switch's type arguments written out,
 * arguments named after V1Switch's parameters (in any order), parser and control instances
 * declared at top level and passed by name, and a register instantiated at top level
 * (one instance that every control shares). */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> seen_in_ingress;
    bit<8> seen_in_egress;
}

struct headers { h_t h; }
struct metadata { }

register<bit<8>>(4) last_a;

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
        sm.egress_spec = 2;
        last_a.read(hdr.h.seen_in_ingress, 0);  // the a of the packet before
        last_a.write(0, hdr.h.a);
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        last_a.read(hdr.h.seen_in_egress, 0);  // written by ingress just now
    }
}

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr);
    }
}

I() the_ingress;
D() the_deparser;

V1Switch<headers, metadata>(dep = the_deparser, p = P(), vr = VC(), ig = the_ingress,
                            eg = Eg(), ck = CC()) main;
