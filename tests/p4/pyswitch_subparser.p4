/* pyswitch conformance: parsers instantiated inside a parser (p4c inlines them for BMv2).
 * Two instances of one parser with different constructor arguments, applied one after the
 * other in a state (the caller's state goes on after each accepts), out and inout
 * parameters, an out header reset by the second apply, and a truncated packet failing
 * inside an instance. tests/test_pyswitch_subparser.py is its test. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header inner_t { bit<8> kind; bit<8> len; }
header opt_t { bit<8> v; }
header tail_t { bit<16> t; }
struct headers { ethernet_t ethernet; inner_t a; opt_t opt; inner_t b; tail_t tail; }
struct metadata { bit<8> parsed; }

/* One inner header; when its kind is `opt_kind` an opt header follows. */
parser InnerParser(packet_in packet, out inner_t h, inout metadata meta, out opt_t o)
                  (bit<8> opt_kind) {
    state start {
        packet.extract(h);
        meta.parsed = meta.parsed + 1;
        transition select(h.kind) {
            opt_kind: with_opt;
            default: accept;
        }
    }
    state with_opt {
        packet.extract(o);
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    InnerParser(1) first;
    InnerParser(2) second;
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88B8: two;
            default: accept;
        }
    }
    state two {
        first.apply(packet, hdr.a, meta, hdr.opt);
        meta.parsed = meta.parsed + 10;
        second.apply(packet, hdr.b, meta, hdr.opt);
        transition select(hdr.b.kind) {
            7: with_tail;
            default: accept;
        }
    }
    state with_tail {
        packet.extract(hdr.tail);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        bit<8> status = 1;
        if (standard_metadata.parser_error == error.PacketTooShort) {
            status = 3;
        }
        hdr.ethernet.srcAddr = (bit<48>)(status ++ meta.parsed);
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.a);
        packet.emit(hdr.opt);
        packet.emit(hdr.b);
        packet.emit(hdr.tail);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
