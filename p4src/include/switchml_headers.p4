/* Header and metadata types of p4src/switchml.p4.
 *
 * Ethernet, IPv4, UDP and the K values (ina_values_h) are INA's declarations (headers.p4):
 * the same bytes on the wire. The SwitchML header is declared here, once; its Python twin
 * is workers/switchml/wire.py HEADER_FIELDS, and tests/test_switchml_p4.py checks that the
 * two are equal field by field. */
#ifndef _SWITCHML_HEADERS_P4_
#define _SWITCHML_HEADERS_P4_

#include "switchml_constants.p4"
#include "types.p4"
#include "headers.p4"

typedef bit<64> smKey_t;      /* round ++ chunk: which chunk a copy holds */
typedef bit<8>  smCount_t;    /* contributions summed in a copy; 0 = never used */
typedef bit<2>  smDeliver_t;  /* how a RESULT leaves (SM_DELIVER_*) */

const smDeliver_t SM_DELIVER_MULTICAST = 1;  /* completion: to every worker of the job */
const smDeliver_t SM_DELIVER_UNICAST = 2;    /* shadow copy: back to the sender's port */

/* The SwitchML header (18 bytes, network byte order). */
header switchml_h {
    bit<8>  msg_type;    /* SWITCHML_TYPE_UPDATE or SWITCHML_TYPE_RESULT. */
    bit<8>  flags;       /* UPDATE: RETRANSMIT on a resend. RESULT: SHADOW when answered
                          * from a completed copy to one worker. */
    bit<16> job_id;      /* the job (job_table). */
    bit<16> worker_id;   /* UPDATE: the sender (below INA_MAX_WORKERS). RESULT: the worker
                          * whose UPDATE completed the copy or asked for it again. */
    bit<16> pool_index;  /* the slot of the job's pool, 0 .. S - 1. */
    bit<8>  ver;         /* which copy of the slot: 0 or 1; flips on each reuse. */
    bit<8>  count;       /* UPDATE: 1. RESULT: contributions summed (the job's workers). */
    bit<32> round;       /* the all-reduce (one per training step). */
    bit<32> chunk;       /* which K values of the round's vector. */
}

struct sm_headers_t {
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
    switchml_h   sm;
    ina_values_h vals;
}

/* Per-packet state shared by the controls of switchml.p4. */
struct sm_metadata_t {
    /* the job (table job_table) */
    smCount_t    num_workers;  /* contributions that complete a copy */
    mcastGroup_t mcast_grp;    /* the job's workers (completed RESULTs) */
    slotIndex_t  pool_base;    /* the job's cells: [base, base + 2 * size) */
    slotIndex_t  pool_size;    /* S, slots of the job's pool */
    workerSet_t  worker_bit;   /* 1 << worker_id */
    /* the slot's two copies */
    slotIndex_t  cell;         /* the copy this packet addresses (ver) */
    slotIndex_t  other_cell;   /* the other copy (1 - ver) */
    smKey_t      key;          /* round ++ chunk of this packet */
    smKey_t      cell_key;
    workerSet_t  cell_bitmap;
    smCount_t    cell_count;
    workerSet_t  other_bitmap;
    smDeliver_t  deliver;      /* set when the packet leaves as a RESULT */
}

#endif
