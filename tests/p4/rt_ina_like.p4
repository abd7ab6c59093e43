/* rt_ina_like.p4 — forwarding benchmark program (bench/pyswitch_forwarding.py):
 * an INA-like header of 32 x 32-bit values is added into 32 registers at a slot chosen by a
 * CRC32 hash of the chunk id; the running sums are written back into the packet, which is
 * then forwarded by an exact-match table on the ingress port. */
#include <core.p4>
#include <v1model.p4>

#define SLOTS 1024

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header agg_t {
    bit<32> chunk;
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

struct headers {
    ethernet_t ethernet;
    agg_t      agg;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88b6: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        packet.extract(hdr.agg);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(SLOTS) r0;
    register<bit<32>>(SLOTS) r1;
    register<bit<32>>(SLOTS) r2;
    register<bit<32>>(SLOTS) r3;
    register<bit<32>>(SLOTS) r4;
    register<bit<32>>(SLOTS) r5;
    register<bit<32>>(SLOTS) r6;
    register<bit<32>>(SLOTS) r7;
    register<bit<32>>(SLOTS) r8;
    register<bit<32>>(SLOTS) r9;
    register<bit<32>>(SLOTS) r10;
    register<bit<32>>(SLOTS) r11;
    register<bit<32>>(SLOTS) r12;
    register<bit<32>>(SLOTS) r13;
    register<bit<32>>(SLOTS) r14;
    register<bit<32>>(SLOTS) r15;
    register<bit<32>>(SLOTS) r16;
    register<bit<32>>(SLOTS) r17;
    register<bit<32>>(SLOTS) r18;
    register<bit<32>>(SLOTS) r19;
    register<bit<32>>(SLOTS) r20;
    register<bit<32>>(SLOTS) r21;
    register<bit<32>>(SLOTS) r22;
    register<bit<32>>(SLOTS) r23;
    register<bit<32>>(SLOTS) r24;
    register<bit<32>>(SLOTS) r25;
    register<bit<32>>(SLOTS) r26;
    register<bit<32>>(SLOTS) r27;
    register<bit<32>>(SLOTS) r28;
    register<bit<32>>(SLOTS) r29;
    register<bit<32>>(SLOTS) r30;
    register<bit<32>>(SLOTS) r31;

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; drop; }
        size = 64;
        default_action = drop();
    }

    apply {
        if (hdr.agg.isValid()) {
            bit<32> idx;
            bit<32> tmp;
            hash(idx, HashAlgorithm.crc32, (bit<32>) 0, { hdr.agg.chunk }, (bit<32>) SLOTS);
        r0.read(tmp, idx); tmp = tmp + hdr.agg.v0; r0.write(idx, tmp); hdr.agg.v0 = tmp;
        r1.read(tmp, idx); tmp = tmp + hdr.agg.v1; r1.write(idx, tmp); hdr.agg.v1 = tmp;
        r2.read(tmp, idx); tmp = tmp + hdr.agg.v2; r2.write(idx, tmp); hdr.agg.v2 = tmp;
        r3.read(tmp, idx); tmp = tmp + hdr.agg.v3; r3.write(idx, tmp); hdr.agg.v3 = tmp;
        r4.read(tmp, idx); tmp = tmp + hdr.agg.v4; r4.write(idx, tmp); hdr.agg.v4 = tmp;
        r5.read(tmp, idx); tmp = tmp + hdr.agg.v5; r5.write(idx, tmp); hdr.agg.v5 = tmp;
        r6.read(tmp, idx); tmp = tmp + hdr.agg.v6; r6.write(idx, tmp); hdr.agg.v6 = tmp;
        r7.read(tmp, idx); tmp = tmp + hdr.agg.v7; r7.write(idx, tmp); hdr.agg.v7 = tmp;
        r8.read(tmp, idx); tmp = tmp + hdr.agg.v8; r8.write(idx, tmp); hdr.agg.v8 = tmp;
        r9.read(tmp, idx); tmp = tmp + hdr.agg.v9; r9.write(idx, tmp); hdr.agg.v9 = tmp;
        r10.read(tmp, idx); tmp = tmp + hdr.agg.v10; r10.write(idx, tmp); hdr.agg.v10 = tmp;
        r11.read(tmp, idx); tmp = tmp + hdr.agg.v11; r11.write(idx, tmp); hdr.agg.v11 = tmp;
        r12.read(tmp, idx); tmp = tmp + hdr.agg.v12; r12.write(idx, tmp); hdr.agg.v12 = tmp;
        r13.read(tmp, idx); tmp = tmp + hdr.agg.v13; r13.write(idx, tmp); hdr.agg.v13 = tmp;
        r14.read(tmp, idx); tmp = tmp + hdr.agg.v14; r14.write(idx, tmp); hdr.agg.v14 = tmp;
        r15.read(tmp, idx); tmp = tmp + hdr.agg.v15; r15.write(idx, tmp); hdr.agg.v15 = tmp;
        r16.read(tmp, idx); tmp = tmp + hdr.agg.v16; r16.write(idx, tmp); hdr.agg.v16 = tmp;
        r17.read(tmp, idx); tmp = tmp + hdr.agg.v17; r17.write(idx, tmp); hdr.agg.v17 = tmp;
        r18.read(tmp, idx); tmp = tmp + hdr.agg.v18; r18.write(idx, tmp); hdr.agg.v18 = tmp;
        r19.read(tmp, idx); tmp = tmp + hdr.agg.v19; r19.write(idx, tmp); hdr.agg.v19 = tmp;
        r20.read(tmp, idx); tmp = tmp + hdr.agg.v20; r20.write(idx, tmp); hdr.agg.v20 = tmp;
        r21.read(tmp, idx); tmp = tmp + hdr.agg.v21; r21.write(idx, tmp); hdr.agg.v21 = tmp;
        r22.read(tmp, idx); tmp = tmp + hdr.agg.v22; r22.write(idx, tmp); hdr.agg.v22 = tmp;
        r23.read(tmp, idx); tmp = tmp + hdr.agg.v23; r23.write(idx, tmp); hdr.agg.v23 = tmp;
        r24.read(tmp, idx); tmp = tmp + hdr.agg.v24; r24.write(idx, tmp); hdr.agg.v24 = tmp;
        r25.read(tmp, idx); tmp = tmp + hdr.agg.v25; r25.write(idx, tmp); hdr.agg.v25 = tmp;
        r26.read(tmp, idx); tmp = tmp + hdr.agg.v26; r26.write(idx, tmp); hdr.agg.v26 = tmp;
        r27.read(tmp, idx); tmp = tmp + hdr.agg.v27; r27.write(idx, tmp); hdr.agg.v27 = tmp;
        r28.read(tmp, idx); tmp = tmp + hdr.agg.v28; r28.write(idx, tmp); hdr.agg.v28 = tmp;
        r29.read(tmp, idx); tmp = tmp + hdr.agg.v29; r29.write(idx, tmp); hdr.agg.v29 = tmp;
        r30.read(tmp, idx); tmp = tmp + hdr.agg.v30; r30.write(idx, tmp); hdr.agg.v30 = tmp;
        r31.read(tmp, idx); tmp = tmp + hdr.agg.v31; r31.write(idx, tmp); hdr.agg.v31 = tmp;
        }
        fwd.apply();
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
        packet.emit(hdr.agg);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
