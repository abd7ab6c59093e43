// P4Info rules of p4c, one construct each (tests/test_p4info_rules.py holds the
// expected P4Info, written from the rules in pyswitch/p4info.py and p4info_ids.py).
#include <core.p4>
#include <v1model.p4>

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

struct headers_t {
    eth_t eth;
}

struct meta_t {
    bit<8> v;
}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition accept;
    }
}

control VC(inout headers_t h, inout meta_t m) {
    apply { }
}

control c(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    counter(8, CounterType.packets) hits;
    direct_counter(CounterType.bytes) dbytes;
    register<bit<32>>(4) last;

    action helper() { m.v = 1; }                        // only called by an action: inlined
    @my_note("kept") action fwd(bit<9> port) { sm.egress_spec = port; helper(); }
    @name("rename_me") action set_v(bit<8> v) { m.v = v; }
    action drop() { mark_to_drop(sm); }
    action never_used() { m.v = 2; }
    action bump(bit<8> by) { m.v = m.v + by; }          // only called directly: no params
    action only_dead() { m.v = 3; }

    // these two names collide in the low 24 bits of their hash: the later one in sorted
    // order probes to the next id
    table t1626 {
        key = { h.eth.dst : exact; }
        actions = { fwd; @defaultonly drop; }
        support_timeout = true;
    }
    table t3872 {
        key = { h.eth.isValid() : exact; h.eth.type : ternary; }
        actions = { @tableonly fwd; drop; NoAction; }
        const default_action = drop();
        size = 64;
        counters = dbytes;
    }
    @id(0x77) table with_id {
        key = { h.eth.src : lpm; }
        actions = { set_v; }
        default_action = set_v(8w7);
        size = 0;
    }
    table consts {
        key = { h.eth.type : exact; }
        actions = { set_v; NoAction; }
        const entries = {
            0x0800 : set_v(4);
        }
    }
    table dup {
        actions = { NoAction; }
    }
    table unapplied {
        actions = { never_used; }
    }
    table dead {
        actions = { only_dead; }
    }

    apply {
        t1626.apply();
        t3872.apply();
        with_id.apply();
        consts.apply();
        dup.apply();
        hits.count(0);
        last.write(0, 1);
        bump(8w9);
        if (false) {
            dead.apply();
        }
    }
}

control e(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    table dup {
        actions = { NoAction; }
    }
    apply { dup.apply(); }
}

control D(packet_out pkt, in headers_t h) {
    apply { pkt.emit(h.eth); }
}

V1Switch(P(), VC(), c(), e(), VC(), D()) main;
