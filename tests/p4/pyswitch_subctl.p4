/* pyswitch conformance: controls instantiated inside controls (p4c inlines them for BMv2).
 * Constructor parameters, in / out / inout apply parameters, two instances of one control,
 * an instance inside an instance, `return` ending only the instance, `exit` ending the
 * whole block, instance-qualified and absolute (@name(".x")) P4Info names, and a control
 * that takes packet_out in the deparser. tests/test_pyswitch_subctl.py is its test. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header t_h {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> r1;
    bit<8> r2;
    bit<8> r3;
    bit<8> r4;
    bit<8> r5;
}
struct headers { ethernet_t ethernet; t_h t; }
struct metadata { bit<8> acc; bit<8> seen; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88B6: parse_t;
            default: accept;
        }
    }
    state parse_t {
        packet.extract(hdr.t);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

/* cells[idx] += v + step; the cell's previous value goes out. */
control Tally(in bit<8> idx, in bit<8> v, out bit<8> before)(bit<32> cells, bit<8> step) {
    register<bit<8>>(cells) cell;
    apply {
        cell.read(before, (bit<32>)idx);
        cell.write((bit<32>)idx, before + v + step);
    }
}

/* op 0 returns early (the caller goes on); op 9 exits (ingress ends). */
control Classify(inout headers h, inout metadata m) {
    action mark(bit<8> tag) {
        h.t.r3 = tag;
    }
    @name(".MyIngress.classify_flat")
    table by_op {
        key = { h.t.op: exact; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    apply {
        m.seen = m.seen + 1;
        if (h.t.op == 0) {
            return;
        }
        by_op.apply();
        if (h.t.op == 9) {
            exit;
        }
        h.t.r4 = 8w1;
    }
}

control Inner(inout bit<8> x)(bit<8> k) {
    @name("inner_hits")  /* relative: prefixed by the instance path */
    counter(4, CounterType.packets) hits;
    /* an action of an instance inside an instance: its return ends the action only */
    action add_k() {
        x = x + k;
        return;
    }
    apply {
        hits.count(0);
        add_k();
    }
}

control Outer(inout metadata m) {
    @name("in2")  /* the instance's own name in that path */
    Inner(8w10) inner;
    apply {
        inner.apply(m.acc);
    }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    Tally(16, 8w1) small;
    Tally(32, 8w100) big;
    Classify() cls;
    Outer() outer;
    apply {
        standard_metadata.egress_spec = 1;
        if (!hdr.t.isValid()) {
            return;
        }
        bit<8> prev;
        small.apply(hdr.t.a, hdr.t.b, prev);
        hdr.t.r1 = prev;
        big.apply(hdr.t.a & 3, 8w0, hdr.t.r2);
        cls.apply(hdr, meta);
        meta.acc = hdr.t.b;
        outer.apply(meta);
        hdr.t.r5 = meta.acc + meta.seen;
        hdr.t.r4 = hdr.t.r4 | 0x80;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control EmitAll(packet_out p, in headers h) {
    apply {
        p.emit(h.ethernet);
        p.emit(h.t);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    EmitAll() all;
    apply {
        all.apply(packet, hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
