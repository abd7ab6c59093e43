/* enum_action_data.p4 — serializable enums as action data (issue 43): a table action takes
 * an `enum bit<8>` parameter from the control plane, another action is called with an enum
 * member; the value lands in a header field of the enum type. */
#include <core.p4>
#include <v1model.p4>

enum bit<8> Reason_t {
    UNKNOWN_FLOW = 1,
    BAD_OPCODE   = 2
}

header tag_h {
    Reason_t reason;
    bit<8>   code;
}
struct headers_t { tag_h tag; }
struct meta_t { Reason_t last; }

parser P(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t s) {
    state start { p.extract(h.tag); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    action mark(Reason_t reason, bit<9> port) {
        h.tag.reason = reason;
        m.last = reason;
        s.egress_spec = port;
    }
    action mark_bad() { mark(Reason_t.BAD_OPCODE, 2); }
    table by_code {
        key = { h.tag.code: exact; }
        actions = { mark; mark_bad; NoAction; }
        default_action = mark_bad();
    }
    apply {
        by_code.apply();
        if (m.last == Reason_t.UNKNOWN_FLOW) { h.tag.code = 0xee; }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t s) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out p, in headers_t h) { apply { p.emit(h.tag); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
