/* Header and metadata types of the INA programs. */
#ifndef _INA_HEADERS_P4_
#define _INA_HEADERS_P4_

#include "constants.p4"
#include "types.p4"

const bit<16> TYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_UDP = 17;

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

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* The INA header (26 bytes). Python's truth is the Scapy layer workers.ina.wire.INA;
 * tests/test_ina_p4.py checks this declaration against it field by field.
 * A field may hold something else in each message type: each field's comment says what it
 * holds in a GRAD, a PARTIAL and a RESULT ("all types" when the same), as the declaration
 * beside the Scapy layer (workers.ina.wire.FIELD_MEANINGS) and the table of
 * docs/protocol.md section 1 do (tests/test_protocol.py checks that they agree). Three
 * uses belong to the hosts only and this program never reads them: the copy number in a
 * GRAD's flags bits 4-7 (kept when a GRAD is forwarded; make_partial writes the whole
 * byte), the echo in a RESULT's worker_id and fan_in, and a RESULT's previous chunk in
 * agg_id (docs/protocol.md section 6). */
header ina_h {
    bit<8>  msg_type;   /* GRAD: INA_TYPE_GRAD (1). PARTIAL: INA_TYPE_PARTIAL (2).
                         * RESULT: INA_TYPE_RESULT (3). */
    bit<8>  flags;      /* GRAD: INA_FLAG_RETRANSMIT, INA_FLAG_FALLBACK; bits 4-7: copy
                         *   number mod 16 (hosts only).
                         * PARTIAL: RETRANSMIT (re-emitted or flushed), INCOMPLETE (flushed),
                         *   FALLBACK; bits 4-7: 0.
                         * RESULT: RETRANSMIT on a resend (and on a NACK for a loss the PS
                         *   found itself); INCOMPLETE: a NACK, FALLBACK: a
                         *   merged packet fell back (hosts only).
                         * All types: INA_FLAG_ECN, set in egress by congestion.p4. */
    bit<16> job_id;     /* all types: the job. */
    bit<32> round;      /* all types: the training round. */
    bit<32> chunk_id;   /* all types: which K values of the gradient. */
    bit<16> agg_id;     /* GRAD: aggregation point it is addressed to; 0 (INA_AGG_ID_PS) =
                         *   the PS.
                         * PARTIAL: next aggregation point; 0 = the PS.
                         * RESULT: 0, or 1 + the chunk its PS completed before it mod
                         *   65535 (hosts only: RESULTs follow the multicast tree). */
    bit<8>  fan_in;     /* GRAD: contributions the agg_id switch waits for (not read at s_d,
                         *   nor in a hierarchical job).
                         * PARTIAL: that of the packet that made a switch emit it.
                         * RESULT: echo (hosts only): 1 + copy number if the packet that
                         *   caused it was a worker's own GRAD, else 0. */
    bit<8>  count;      /* GRAD: 1. PARTIAL: contributions summed (popcount of bitmap).
                         * RESULT: popcount of bitmap. */
    bit<16> worker_id;  /* GRAD: sender.
                         * PARTIAL: flat job: that of the packet that made a switch emit it;
                         *   hierarchical job: the emitting switch's id.
                         * RESULT: echo (hosts only): worker_id of the packet that caused
                         *   it, 0xFFFF for none. */
    bit<64> bitmap;     /* GRAD: flat job: 1 << worker_id; hierarchical job: 0 (the child
                         *   table of the agg_id switch gives the sender's bit).
                         * PARTIAL: contributions summed: flat job: worker i <-> bit i;
                         *   hierarchical job: the emitting switch's child i <-> bit i.
                         * RESULT: the round's members, worker i <-> bit i mod 64 (the job's
                         *   full mask in a flat job). */
}

/* header ina_values_h: INA_K x bit<32> (generated) */
#include "values_header.p4"

struct headers_t {
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
    ina_h        ina;
    ina_values_h vals;
}

/* Per-packet state shared by the controls of the include/ files. */
struct metadata_t {
    /* switch configuration (table switch_config) */
    switchId_t     switch_id;    /* 0 = unconfigured: never aggregates */
    bit<1>         agg_enabled;  /* 0 = plain forwarder (a "non-programmable" switch) */
    /* ingress port kind (table port_config): 1 = switch-to-switch link (trusted) */
    bit<1>         fabric_port;
    /* job (table job_table) */
    bit<1>         job_known;
    workerSet_t    job_mask;     /* full worker set of the job (flat job) */
    bit<1>         is_ps_tor;    /* the PS is next: s_d (flat), the tree's root (hierarchical) */
    switchId_t     tor_id;       /* where this switch's PARTIALs and fallbacks go: id(s_d)
                                  * (flat), the parent aggregation point (hierarchical) */
    egressSpec_t   ps_port;      /* at s_d: the port of the PS (only RESULTs enter there) */
    mcastGroup_t   mcast_grp;    /* multicast group of the job's RESULTs at this switch */
    slotIndex_t    slot_base;    /* the job's slot range at this switch: [base, base + size) */
    slotIndex_t    slot_size;    /* 0 = no slots here: what is addressed here goes to the PS */
    /* aggregation */
    slotIndex_t    slot;
    slotKey_t      key;          /* job_id ++ round ++ chunk_id */
    slotKey_t      slot_key;
    workerSet_t    slot_bitmap;
    contribCount_t slot_count;   /* 0 = slot free */
    contribCount_t contrib;      /* contributions this packet adds (GRAD 1, PARTIAL count;
                                  * 1 in a hierarchical job: one child) */
    workerSet_t    new_bitmap;
    contribCount_t new_count;
    switchId_t     next_agg_id;  /* next aggregation point: tor_id, or 0 (PS) at s_d */
    /* ECMP toward agg_id (tables ina_route, ps_route, ina_nexthop) */
    bit<1>         to_ps;        /* toward the job's PS (agg_id 0 or a retired switch id) */
    memberIndex_t  group_base;
    bit<16>        group_size;
    memberIndex_t  member_index;
    /* hierarchical jobs (docs/protocol.md section 5.1; job_table, ina_child) */
    bit<1>         hier;         /* 1 = hierarchical job: contributions are children */
    contribCount_t job_fan_in;   /* children this switch waits for */
    workerSet_t    bits;         /* contributors this packet adds: its bitmap (flat job), its
                                  * sender's child bit from ina_child (hierarchical job) */
}

#endif
