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
 * tests/test_ina_p4.py checks this declaration against it field by field. */
header ina_h {
    bit<8>  msg_type;   /* INA_TYPE_GRAD / PARTIAL / RESULT */
    bit<8>  flags;      /* INA_FLAG_* bits */
    bit<16> job_id;
    bit<32> round;
    bit<32> chunk_id;
    bit<16> agg_id;     /* aggregation point this packet is addressed to; 0 = the PS */
    bit<8>  fan_in;     /* contributions the agg_id switch waits for (not used at s_d) */
    bit<8>  count;      /* contributions summed in this packet (GRAD: 1) */
    bit<16> worker_id;  /* GRAD: sender; other types: informational */
    bit<64> bitmap;     /* set of workers summed in this packet; worker i <-> bit i */
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
    workerSet_t    job_mask;     /* full worker set of the job */
    bit<1>         is_ps_tor;    /* this switch is s_d (the PS's ToR) for the job */
    switchId_t     tor_id;       /* id(s_d): where this switch's PARTIALs and fallbacks go */
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
    contribCount_t contrib;      /* contributions this packet adds (GRAD 1, PARTIAL count) */
    workerSet_t    new_bitmap;
    contribCount_t new_count;
    switchId_t     next_agg_id;  /* next aggregation point: tor_id, or 0 (PS) at s_d */
    /* ECMP toward agg_id (tables ina_route, ps_route, ina_nexthop) */
    bit<1>         to_ps;        /* toward the job's PS (agg_id 0 or a retired switch id) */
    memberIndex_t  group_base;
    bit<16>        group_size;
    memberIndex_t  member_index;
}

#endif
