/* rt_state.p4 — P4Runtime state test program: a ternary table with a direct counter,
 * an indirect counter and a register (read/written by the controller in the tests). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers {
    ethernet_t ethernet;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) acl_hits;
    counter(8, CounterType.packets) port_pkts;
    register<bit<32>>(16) store;

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
        acl_hits.count();
    }
    action nop() {
        acl_hits.count();
    }
    table acl {
        key = { hdr.ethernet.etherType: ternary; hdr.ethernet.dstAddr: exact; }
        actions = { set_port; nop; }
        counters = acl_hits;
        default_action = nop();
    }

    apply {
        acl.apply();
        port_pkts.count((bit<32>) standard_metadata.ingress_port);
        store.write(0, (bit<32>) hdr.ethernet.etherType);
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
