/* varbit fields as p4c + BMv2 run them: extract(hdr, nbits) with a run-time length, the
 * parser errors of a bad length (ParserInvalidArgument, PacketTooShort, HeaderTooShort, in
 * that order), emit with the extracted length, assignment of varbits (value and length),
 * `==` on varbits (values) and on headers holding them (both invalid, or both valid with
 * equal fields). */
#include <core.p4>
#include <v1model.p4>

header len_t {
    bit<8> len_a;   // bits of a.data
    bit<8> len_b;   // bits of b.data; 0xFF: no b
    bit<8> op;
    bit<8> res;     // written by ingress
}

header opt_t {
    bit<8> kind;
    varbit<32> data;
    bit<8> tail;
}

struct headers {
    len_t l;
    opt_t a;
    opt_t b;
}

struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.l);
        pkt.extract(hdr.a, (bit<32>)hdr.l.len_a);
        transition select(hdr.l.len_b) {
            0xFF: accept;
            default: parse_b;
        }
    }
    state parse_b {
        pkt.extract(hdr.b, (bit<32>)hdr.l.len_b);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.ParserInvalidArgument) {
            hdr.l.res = 0xE1;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.l.res = 0xE2;
        } else if (sm.parser_error == error.HeaderTooShort) {
            hdr.l.res = 0xE3;
        } else {
            if (hdr.l.op == 1) {
                hdr.a.data = hdr.b.data;  // a takes b's length too
            } else if (hdr.l.op == 2) {
                varbit<32> t = hdr.a.data;
                hdr.a.data = hdr.b.data;
                hdr.b.data = t;
            }
            hdr.l.res = (bit<1>)(hdr.a.data == hdr.b.data) ++ (bit<1>)(hdr.a == hdr.b) ++
                        (bit<1>)(hdr.a != hdr.b) ++ 5w0;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
