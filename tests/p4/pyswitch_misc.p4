/* pyswitch conformance: range/optional keys, a bool key, @name, lookahead, verify, user
 * errors, serializable enums, nested structs, struct and header copies, list assignment,
 * actions with out/inout parameters called directly, #if. */
#include <core.p4>
#include <v1model.p4>

#define MODE 2
#if MODE > 1 && defined(MODE)
#define DEFAULT_PORT 9w5
#else
#define DEFAULT_PORT 9w6
#endif

error { BadVersion }

enum bit<8> Kind {
    Small = 1,
    Large = 2
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header misc_t {
    bit<8>  version;
    bit<8>  kind;
    bit<16> len;
    bit<8>  flag;
}

header copy_t {
    bit<8>  version;
    bit<8>  kind;
    bit<16> len;
    bit<8>  flag;
}

struct inner_t {
    bit<16> a;
    bool    b;
}

struct metadata {
    inner_t in1;
    inner_t in2;
    bit<8>  peek;
    Kind    k;
}

struct headers {
    ethernet_t ethernet;
    misc_t     misc;
    copy_t     copy;
    misc_t     misc2;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88b7: parse_misc;
            default: accept;
        }
    }
    state parse_misc {
        meta.peek = packet.lookahead<bit<8>>();
        verify(meta.peek == 1 || meta.peek == 2, error.BadVersion);
        packet.extract(hdr.misc);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action add_to(inout bit<16> acc, in bit<16> v, out bool big) {
        acc = acc + v;
        big = acc > 1000;
    }
    @name("set_out_port")
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action nop() { }

    @name(".global_by_len")
    table by_len {
        key = {
            hdr.misc.len: range;
            hdr.misc.kind: optional;
            hdr.misc.isValid(): exact @name("misc_valid");
        }
        actions = { set_port; nop; }
        default_action = set_port(DEFAULT_PORT);
        size = 64;
    }

    apply {
        if (standard_metadata.parser_error == error.BadVersion) {
            standard_metadata.egress_spec = 7;
            exit;
        }
        if (!hdr.misc.isValid()) {
            mark_to_drop(standard_metadata);
            return;
        }
        meta.k = (Kind)hdr.misc.kind;
        meta.in1.a = hdr.misc.len;
        meta.in1.b = meta.k == Kind.Large;
        meta.in2 = meta.in1;
        add_to(meta.in2.a, 16w900, meta.in2.b);
        hdr.copy.setValid();
        hdr.copy.version = hdr.misc.version;
        hdr.copy.kind = (bit<8>)meta.k;
        hdr.copy.len = meta.in2.a;
        hdr.copy.flag = 6w0 ++ (bit<1>)meta.in2.b ++ (bit<1>)meta.in1.b;
        hdr.misc2 = {8w0xEE, 8w0xDD, 16w0xCCBB, 8w0xAA};
        by_len.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.misc);
        packet.emit(hdr.copy);
        packet.emit(hdr.misc2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
