/* pyswitch conformance: forwarding by exact/lpm/ternary tables, default actions,
 * const entries, direct and indexed counters, registers, parser errors, exit. */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_IPV4 = 0x800;

typedef bit<9>  egressSpec_t;
typedef bit<48> macAddr_t;
typedef bit<32> ip4Addr_t;

header ethernet_t {
    macAddr_t dstAddr;
    macAddr_t srcAddr;
    bit<16>   etherType;
}

header ipv4_t {
    bit<4>    version;
    bit<4>    ihl;
    bit<8>    diffserv;
    bit<16>   totalLen;
    bit<16>   identification;
    bit<3>    flags;
    bit<13>   fragOffset;
    bit<8>    ttl;
    bit<8>    protocol;
    bit<16>   hdrChecksum;
    ip4Addr_t srcAddr;
    ip4Addr_t dstAddr;
}

struct metadata {
    bit<8> klass;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_rx;
    counter(4, CounterType.packets) errors_seen;
    direct_counter(CounterType.packets_and_bytes) acl_hits;
    register<bit<32>>(16) last_len;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action ipv4_forward(macAddr_t dstAddr, egressSpec_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_port(egressSpec_t port) {
        standard_metadata.egress_spec = port;
    }
    action flood() {
        standard_metadata.mcast_grp = 1;
    }
    action deny() {
        mark_to_drop(standard_metadata);
        exit;
    }
    action allow() {
        acl_hits.count();
    }
    action set_class(bit<8> k) {
        meta.klass = k;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 256;
        default_action = drop();
    }
    table mac_exact {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { set_port; flood; @defaultonly NoAction; }
        default_action = flood();
    }
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.protocol: ternary;
        }
        actions = { allow; deny; }
        default_action = allow();
        counters = acl_hits;
    }
    table classify {
        key = { hdr.ipv4.protocol: exact; }
        actions = { set_class; NoAction; }
        const default_action = NoAction();
        const entries = {
            1: set_class(10);
            6: set_class(20);
            17: set_class(30);
        }
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        if (standard_metadata.parser_error != error.NoError) {
            errors_seen.count(0);
            mark_to_drop(standard_metadata);
            exit;
        }
        if (standard_metadata.checksum_error == 1) {
            errors_seen.count(1);
            mark_to_drop(standard_metadata);
            return;
        }
        if (hdr.ipv4.isValid()) {
            last_len.write((bit<32>)hdr.ipv4.ttl[3:0], (bit<32>)hdr.ipv4.totalLen);
            acl.apply();
            classify.apply();
            switch (ipv4_lpm.apply().action_run) {
                ipv4_forward: {
                    hdr.ipv4.diffserv = meta.klass;
                }
                drop: {
                    errors_seen.count(2);
                }
            }
        } else {
            if (mac_exact.apply().hit) {
                errors_seen.count(3);
            }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
