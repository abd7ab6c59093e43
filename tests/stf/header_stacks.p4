/* Header stacks as p4c + BMv2 (P4_16 stacks) run them (and header assignment from an
 * invalid header, which copies only the validity): a parser loop that extracts into
 * `next` and reads `last` and `lastIndex` (p4c allows those three in parsers only);
 * StackOutOfBounds when the stack is full; `size`; push_front / pop_front in a control
 * (BMv2 moves the elements by swapping them and marks the freed ones invalid); run-time
 * indices read and written, in a control and in an action; stack assignment; and
 * setValid of an invalid element, whose fields start at 0 (BMv2's add_header). */
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> op;      // what ingress does
    bit<8> idx;     // run-time index
    bit<8> val;
    bit<8> lastidx; // items.lastIndex after the parser
    bit<8> lastv;   // items.last.v after the parser
}

header item_t {
    bit<8> more;    // 1: another item follows
    bit<8> v;
}

struct headers {
    op_t op;
    item_t[4] items;
    item_t[4] copy;
}

struct metadata {
    bit<8> lastidx;
    bit<8> lastv;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.op);
        transition parse_item;
    }
    state parse_item {
        pkt.extract(hdr.items.next);
        meta.lastv = hdr.items.last.v;
        meta.lastidx = (bit<8>)hdr.items.lastIndex;
        transition select(hdr.items.last.more) {
            1: parse_item;
            default: accept;
        }
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action write_at(bit<8> i, bit<8> v) {
        hdr.items[i].v = v;
    }
    apply {
        sm.egress_spec = 1;
        hdr.op.lastv = meta.lastv;
        hdr.op.lastidx = meta.lastidx;
        if (sm.parser_error == error.StackOutOfBounds) {
            hdr.op.val = 0xEE;
        }
        if (hdr.op.op == 1) {
            hdr.items.push_front(1);
        } else if (hdr.op.op == 2) {
            hdr.items.pop_front(2);
        } else if (hdr.op.op == 3) {
            hdr.items[hdr.op.idx].v = hdr.op.val;
        } else if (hdr.op.op == 4) {
            hdr.op.val = hdr.items[hdr.op.idx].v + (bit<8>)hdr.items.size;
        } else if (hdr.op.op == 5) {
            hdr.copy = hdr.items;
            hdr.copy.push_front(1);
            hdr.copy[0].setValid();
            hdr.copy[0].v = 0x55;
            hdr.items.pop_front(1);
        } else if (hdr.op.op == 6) {
            hdr.items.pop_front(1);
            hdr.items[3].setValid();
            hdr.items[3].more = 0x33;
        } else if (hdr.op.op == 7) {
            write_at(hdr.op.idx, hdr.op.val);
        } else if (hdr.op.op == 8) {
            hdr.items.push_front(5);  // more than the stack holds: all invalid
        } else if (hdr.op.op == 9) {
            item_t none;
            hdr.items[0] = none;  // BMv2's assign_header: invalid, its fields stay
            hdr.op.val = hdr.items[0].v;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
