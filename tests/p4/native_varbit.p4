/* varbits on the native path (tests/test_native_constructs.py), compared with the Python path
 * frame for frame: extract with a run-time length (and its three parser errors), varbits
 * between fixed fields, in a header stack filled with .next, in metadata; assignment of a
 * varbit and of whole headers, setValid / setInvalid (the empty varbit), == on varbits, on
 * headers and on stack elements, emit with the extracted length; an I2E clone and a drop in
 * egress (the Python general path gets the varbits boxed back as (length, value)); a header
 * with 160 fixed bits before its varbit (an IPv4 header with options), its checksum verified
 * and updated over the options; hashes of field lists with varbits; headers with varbits
 * through an action's inout parameters, copied between stack elements chosen at run time,
 * shifted by push_front. */
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

header vo_t {
    varbit<16> v;
}

header ip_t {  // 160 fixed bits before the varbit: read and written 64 bits at a time
    bit<4> version;
    bit<4> ihl;
    bit<8> tos;
    bit<16> len;
    bit<16> id;
    bit<3> flags;
    bit<13> frag;
    bit<8> ttl;
    bit<8> proto;
    bit<16> csum;
    bit<32> src;
    bit<32> dst;
    varbit<32> options;
}

struct headers {
    len_t l;
    opt_t a;
    opt_t b;
    opt_t c;
    vo_t[2] s;
    ip_t ip;
}

struct metadata {
    varbit<32> keep;
}

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
        transition select(hdr.l.op) {
            7: parse_s;
            13: parse_s;
            14: parse_s;
            9: parse_ip;
            default: accept;
        }
    }
    state parse_s {
        pkt.extract(hdr.s.next, (bit<32>)(hdr.l.len_a & 0x1F));
        pkt.extract(hdr.s.next, (bit<32>)(hdr.l.len_b & 0x1F));
        transition accept;
    }
    state parse_ip {
        pkt.extract(hdr.ip, (bit<32>)(hdr.l.len_a & 0x38));
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ip.isValid(),
            { hdr.ip.version, hdr.ip.ihl, hdr.ip.tos, hdr.ip.len, hdr.ip.id, hdr.ip.flags,
              hdr.ip.frag, hdr.ip.ttl, hdr.ip.proto, hdr.ip.src, hdr.ip.dst, hdr.ip.options },
            hdr.ip.csum, HashAlgorithm.csum16);
    }
}

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action swap(inout opt_t x, inout opt_t y) { opt_t t = x; x = y; y = t; }
    apply {
        if (hdr.l.op == 11) {
            swap(hdr.a, hdr.b);  // copy-in, copy-out of headers holding varbits
        } else if (hdr.l.op == 13) {
            hdr.s[hdr.l.len_a[3:3]] = hdr.s[hdr.l.len_b[3:3]];  // run-time indices
        } else if (hdr.l.op == 14) {
            hdr.s.push_front(1);
        }
        sm.egress_spec = 1;
        if (sm.parser_error == error.ParserInvalidArgument) {
            hdr.l.res = 0xE1;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.l.res = 0xE2;
        } else if (sm.parser_error == error.HeaderTooShort) {
            hdr.l.res = 0xE3;
        } else if (sm.parser_error != error.NoError) {
            hdr.l.res = 0xE4;
        } else {
            if (hdr.l.op == 1) {
                hdr.a.data = hdr.b.data;  // a takes b's length too
            } else if (hdr.l.op == 2) {
                meta.keep = hdr.a.data;
                hdr.a.data = hdr.b.data;
                hdr.b.data = meta.keep;
            } else if (hdr.l.op == 3) {
                hdr.b.setInvalid();
            } else if (hdr.l.op == 4) {
                hdr.c.setValid();  // its varbit is empty: nothing emitted for it
                hdr.c.kind = 0x77;
                hdr.c.tail = 0x78;
            } else if (hdr.l.op == 5) {
                hdr.c = hdr.a;
                hdr.c.tail = 0x5C;
                clone(CloneType.I2E, 5);
            } else if (hdr.l.op == 6) {
                hdr.c = hdr.b;
            } else if (hdr.l.op == 9 && hdr.ip.isValid()) {
                hdr.ip.ttl = hdr.ip.ttl - 1;
                hdr.ip.dst = hdr.ip.src;
                hdr.ip.frag = hdr.ip.frag + 1;
                hdr.ip.tos = (bit<8>)sm.checksum_error;
            } else if (hdr.l.op == 10) {  // hashes of field lists with varbits
                hash(hdr.a.tail, HashAlgorithm.crc16, 8w0, { hdr.a.kind, hdr.a.data, hdr.b.data },
                     9w256);
                hash(hdr.a.kind, HashAlgorithm.crc32, 8w0, { hdr.a.data, hdr.l.op }, 9w256);
                hash(hdr.b.tail, HashAlgorithm.identity, 8w0, { hdr.b.data, hdr.a.kind }, 9w256);
            }
            hdr.l.res = (bit<1>)(hdr.a.data == hdr.b.data) ++ (bit<1>)(hdr.a == hdr.b) ++
                        (bit<1>)(hdr.a != hdr.b) ++ (bit<1>)(hdr.s[0] == hdr.s[1]) ++
                        (bit<1>)(hdr.s[0].v == hdr.s[1].v) ++ (bit<1>)(hdr.c == hdr.a) ++
                        (bit<1>)(hdr.s[1].isValid()) ++ 1w1;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.l.op == 8) {
            mark_to_drop(sm);
        }
    }
}

control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ip.isValid(),
            { hdr.ip.version, hdr.ip.ihl, hdr.ip.tos, hdr.ip.len, hdr.ip.id, hdr.ip.flags,
              hdr.ip.frag, hdr.ip.ttl, hdr.ip.proto, hdr.ip.src, hdr.ip.dst, hdr.ip.options },
            hdr.ip.csum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
