/* INA-like workload for bench/pyswitch_pps.py and tests/test_pyswitch_ina_like.py:
 * parse Ethernet/IPv4/UDP + an aggregation header with 32 values, crc32 of
 * (job, round, chunk) -> slot, 32 register read-modify-writes, a counter, IPv4 LPM
 * forwarding and the IPv4 checksum update. */
#include <core.p4>
#include <v1model.p4>

#define AGG_UDP_PORT 0x4650
#define NUM_SLOTS 1024

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> len;
    bit<16> checksum;
}

header agg_t {
    bit<16> job;
    bit<16> round;
    bit<32> chunk;
    bit<8>  count;
}

header vals_t {
    bit<32> v0;
    bit<32> v1;
    bit<32> v2;
    bit<32> v3;
    bit<32> v4;
    bit<32> v5;
    bit<32> v6;
    bit<32> v7;
    bit<32> v8;
    bit<32> v9;
    bit<32> v10;
    bit<32> v11;
    bit<32> v12;
    bit<32> v13;
    bit<32> v14;
    bit<32> v15;
    bit<32> v16;
    bit<32> v17;
    bit<32> v18;
    bit<32> v19;
    bit<32> v20;
    bit<32> v21;
    bit<32> v22;
    bit<32> v23;
    bit<32> v24;
    bit<32> v25;
    bit<32> v26;
    bit<32> v27;
    bit<32> v28;
    bit<32> v29;
    bit<32> v30;
    bit<32> v31;
}

struct metadata {
    bit<32> slot;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    agg_t      agg;
    vals_t     vals;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            17: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            AGG_UDP_PORT: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        packet.extract(hdr.agg);
        packet.extract(hdr.vals);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(1024) agg0;
    register<bit<32>>(1024) agg1;
    register<bit<32>>(1024) agg2;
    register<bit<32>>(1024) agg3;
    register<bit<32>>(1024) agg4;
    register<bit<32>>(1024) agg5;
    register<bit<32>>(1024) agg6;
    register<bit<32>>(1024) agg7;
    register<bit<32>>(1024) agg8;
    register<bit<32>>(1024) agg9;
    register<bit<32>>(1024) agg10;
    register<bit<32>>(1024) agg11;
    register<bit<32>>(1024) agg12;
    register<bit<32>>(1024) agg13;
    register<bit<32>>(1024) agg14;
    register<bit<32>>(1024) agg15;
    register<bit<32>>(1024) agg16;
    register<bit<32>>(1024) agg17;
    register<bit<32>>(1024) agg18;
    register<bit<32>>(1024) agg19;
    register<bit<32>>(1024) agg20;
    register<bit<32>>(1024) agg21;
    register<bit<32>>(1024) agg22;
    register<bit<32>>(1024) agg23;
    register<bit<32>>(1024) agg24;
    register<bit<32>>(1024) agg25;
    register<bit<32>>(1024) agg26;
    register<bit<32>>(1024) agg27;
    register<bit<32>>(1024) agg28;
    register<bit<32>>(1024) agg29;
    register<bit<32>>(1024) agg30;
    register<bit<32>>(1024) agg31;
    register<bit<8>>(NUM_SLOTS) seen;
    counter(1, CounterType.packets_and_bytes) agg_packets;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; }
        default_action = drop();
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            drop();
            exit;
        }
        if (hdr.vals.isValid()) {
            agg_packets.count(0);
            hash(meta.slot, HashAlgorithm.crc32, 32w0,
                 { hdr.agg.job, hdr.agg.round, hdr.agg.chunk }, 32w1024);
            bit<32> t;
        agg0.read(t, meta.slot); t = t + hdr.vals.v0; agg0.write(meta.slot, t); hdr.vals.v0 = t;
        agg1.read(t, meta.slot); t = t + hdr.vals.v1; agg1.write(meta.slot, t); hdr.vals.v1 = t;
        agg2.read(t, meta.slot); t = t + hdr.vals.v2; agg2.write(meta.slot, t); hdr.vals.v2 = t;
        agg3.read(t, meta.slot); t = t + hdr.vals.v3; agg3.write(meta.slot, t); hdr.vals.v3 = t;
        agg4.read(t, meta.slot); t = t + hdr.vals.v4; agg4.write(meta.slot, t); hdr.vals.v4 = t;
        agg5.read(t, meta.slot); t = t + hdr.vals.v5; agg5.write(meta.slot, t); hdr.vals.v5 = t;
        agg6.read(t, meta.slot); t = t + hdr.vals.v6; agg6.write(meta.slot, t); hdr.vals.v6 = t;
        agg7.read(t, meta.slot); t = t + hdr.vals.v7; agg7.write(meta.slot, t); hdr.vals.v7 = t;
        agg8.read(t, meta.slot); t = t + hdr.vals.v8; agg8.write(meta.slot, t); hdr.vals.v8 = t;
        agg9.read(t, meta.slot); t = t + hdr.vals.v9; agg9.write(meta.slot, t); hdr.vals.v9 = t;
        agg10.read(t, meta.slot); t = t + hdr.vals.v10; agg10.write(meta.slot, t); hdr.vals.v10 = t;
        agg11.read(t, meta.slot); t = t + hdr.vals.v11; agg11.write(meta.slot, t); hdr.vals.v11 = t;
        agg12.read(t, meta.slot); t = t + hdr.vals.v12; agg12.write(meta.slot, t); hdr.vals.v12 = t;
        agg13.read(t, meta.slot); t = t + hdr.vals.v13; agg13.write(meta.slot, t); hdr.vals.v13 = t;
        agg14.read(t, meta.slot); t = t + hdr.vals.v14; agg14.write(meta.slot, t); hdr.vals.v14 = t;
        agg15.read(t, meta.slot); t = t + hdr.vals.v15; agg15.write(meta.slot, t); hdr.vals.v15 = t;
        agg16.read(t, meta.slot); t = t + hdr.vals.v16; agg16.write(meta.slot, t); hdr.vals.v16 = t;
        agg17.read(t, meta.slot); t = t + hdr.vals.v17; agg17.write(meta.slot, t); hdr.vals.v17 = t;
        agg18.read(t, meta.slot); t = t + hdr.vals.v18; agg18.write(meta.slot, t); hdr.vals.v18 = t;
        agg19.read(t, meta.slot); t = t + hdr.vals.v19; agg19.write(meta.slot, t); hdr.vals.v19 = t;
        agg20.read(t, meta.slot); t = t + hdr.vals.v20; agg20.write(meta.slot, t); hdr.vals.v20 = t;
        agg21.read(t, meta.slot); t = t + hdr.vals.v21; agg21.write(meta.slot, t); hdr.vals.v21 = t;
        agg22.read(t, meta.slot); t = t + hdr.vals.v22; agg22.write(meta.slot, t); hdr.vals.v22 = t;
        agg23.read(t, meta.slot); t = t + hdr.vals.v23; agg23.write(meta.slot, t); hdr.vals.v23 = t;
        agg24.read(t, meta.slot); t = t + hdr.vals.v24; agg24.write(meta.slot, t); hdr.vals.v24 = t;
        agg25.read(t, meta.slot); t = t + hdr.vals.v25; agg25.write(meta.slot, t); hdr.vals.v25 = t;
        agg26.read(t, meta.slot); t = t + hdr.vals.v26; agg26.write(meta.slot, t); hdr.vals.v26 = t;
        agg27.read(t, meta.slot); t = t + hdr.vals.v27; agg27.write(meta.slot, t); hdr.vals.v27 = t;
        agg28.read(t, meta.slot); t = t + hdr.vals.v28; agg28.write(meta.slot, t); hdr.vals.v28 = t;
        agg29.read(t, meta.slot); t = t + hdr.vals.v29; agg29.write(meta.slot, t); hdr.vals.v29 = t;
        agg30.read(t, meta.slot); t = t + hdr.vals.v30; agg30.write(meta.slot, t); hdr.vals.v30 = t;
        agg31.read(t, meta.slot); t = t + hdr.vals.v31; agg31.write(meta.slot, t); hdr.vals.v31 = t;
            bit<8> c;
            seen.read(c, meta.slot);
            c = c + 1;
            seen.write(meta.slot, c);
            hdr.agg.count = c;
        }
        ipv4_lpm.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

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
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
