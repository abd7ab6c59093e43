/* Header unions as p4c + BMv2 run them: at most one member is valid. extract, setValid
 * and assignment of a valid header make a member valid and the others invalid; setInvalid
 * touches one member; u.isValid() is true while a member is valid; a union assignment
 * copies the validity; emit writes the valid member; a stack of unions filled with
 * `extract(us.next.member)`. */
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> op;
    bit<8> kind;
    bit<8> valid_bits;  // u.isValid, u.a, u.b, u2.isValid, us[0].a, us[0].b, us[1].a, us[1].b
}

header a_t {
    bit<8> tag;
    bit<8> x;
}

header b_t {
    bit<8> tag;
    bit<16> y;
}

header_union u_t {
    a_t a;
    b_t b;
}

struct headers {
    op_t op;
    u_t u;
    u_t u2;
    u_t[2] us;
}

struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.op);
        transition select(hdr.op.kind) {
            1: parse_a;
            2: parse_b;
            3: parse_a_then_b;
            4: parse_stack;
            default: accept;
        }
    }
    state parse_a {
        pkt.extract(hdr.u.a);
        transition accept;
    }
    state parse_b {
        pkt.extract(hdr.u.b);
        transition accept;
    }
    state parse_a_then_b {
        pkt.extract(hdr.u.a);
        pkt.extract(hdr.u.b);  // a becomes invalid
        transition accept;
    }
    state parse_stack {
        pkt.extract(hdr.us.next.a);
        pkt.extract(hdr.us.next.b);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        a_t t;
        if (hdr.op.op == 1) {
            hdr.u.b.setValid();  // fields start at 0; a becomes invalid
            hdr.u.b.y = 0x1234;
        } else if (hdr.op.op == 2) {
            hdr.u.a.setInvalid();
        } else if (hdr.op.op == 3) {
            hdr.u2 = hdr.u;
        } else if (hdr.op.op == 4) {
            t.setValid();
            t.tag = 0x0A;
            t.x = 0x0B;
            hdr.u.a = t;  // a valid header: b becomes invalid
        } else if (hdr.op.op == 5) {
            hdr.u.a = t;  // an invalid header: a becomes invalid, b stays as it was
        } else if (hdr.op.op == 6) {
            hdr.u.a = { 0x0C, 0x0D };
        } else if (hdr.op.op == 7) {
            hdr.us[1].a.setValid();
            hdr.us[1].a.x = 0x77;
        }
        hdr.op.valid_bits = (bit<1>)hdr.u.isValid() ++ (bit<1>)hdr.u.a.isValid() ++
                            (bit<1>)hdr.u.b.isValid() ++ (bit<1>)hdr.u2.isValid() ++
                            (bit<1>)hdr.us[0].a.isValid() ++ (bit<1>)hdr.us[0].b.isValid() ++
                            (bit<1>)hdr.us[1].a.isValid() ++ (bit<1>)hdr.us[1].b.isValid();
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
