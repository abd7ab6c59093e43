/* native_exact.p4 — exact tables whose entries the native path holds in C memory
 * (pyswitch/native/exact.h; owned by tests/test_native_tables.py): a key of four fields of
 * odd widths (9, 3, 48 and 70 bits: one wider than a machine word), actions with wide
 * arguments, a direct counter, a table of one field applied on a hit, and a keyless table
 * read for its default only. */
#include <core.p4>
#include <v1model.p4>

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

header k_t {
    bit<9>  a;
    bit<3>  b;
    bit<4>  pad;
    bit<48> c;
    bit<70> d;
    bit<2>  pad2;
    bit<8>  res;
    bit<70> tag;
    bit<2>  pad3;
}

struct headers { eth_t eth; k_t k; }
struct metadata { bit<8> base; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.type) {
            0x88b5: parse_k;
            default: accept;
        }
    }
    state parse_k {
        packet.extract(hdr.k);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) fwd_hits;

    action to(bit<9> port, bit<70> tag) {
        standard_metadata.egress_spec = port;
        hdr.k.tag = tag;
        fwd_hits.count();
    }
    action mark(bit<8> v) {
        hdr.k.res = v;
        standard_metadata.egress_spec = 1;
        fwd_hits.count();
    }
    action drop() {
        mark_to_drop(standard_metadata);
        fwd_hits.count();
    }
    action add_out(bit<8> v) {
        hdr.k.res = hdr.k.res + v;
    }
    action set_base(bit<8> x) {
        meta.base = x;
    }

    table fwd {
        key = {
            hdr.k.a: exact;
            hdr.k.b: exact;
            hdr.k.c: exact;
            hdr.k.d: exact;
        }
        actions = { to; mark; drop; }
        default_action = mark(0xEE);
        counters = fwd_hits;
        size = 64;
    }
    table cls {
        key = { hdr.k.b: exact; }
        actions = { add_out; NoAction; }
        default_action = NoAction();
    }
    table cfg {
        actions = { set_base; }
        default_action = set_base(0);
    }

    apply {
        standard_metadata.egress_spec = 3;
        if (hdr.k.isValid()) {
            cfg.apply();
            if (fwd.apply().hit) {
                cls.apply();
            }
            hdr.k.res = hdr.k.res ^ meta.base;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.eth);
        packet.emit(hdr.k);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
