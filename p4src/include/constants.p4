/* INA shared constants: the single source of truth for the P4 programs AND for Python
 * (workers/ina/constants.py parses this file; keep every value a plain decimal or hex literal).
 *
 * Changing INA_K: edit it here, then run `python p4src/gen_values.py` to regenerate
 * p4src/include/values_header.p4 and values_regs.p4 (tests/test_ina_p4.py fails until then).
 */
#ifndef _INA_CONSTANTS_P4_
#define _INA_CONSTANTS_P4_

/* Sizes (macros: they size arrays and registers). */
#define INA_K 32            /* int32 values carried by one INA packet */
/* Aggregator slots per switch. Overridable at compile time (`-D INA_NUM_SLOTS=N`, e.g. a
 * tiny pool to force collisions): workers/ina/constants.py reads the same override from
 * INSYNC_INA_NUM_SLOTS, and controller/experiment/network.py compile_program passes that variable as
 * -D, so the program and Python's slot index never disagree (docs/protocol.md §2). */
#ifndef INA_NUM_SLOTS
#define INA_NUM_SLOTS 1024
#endif
/* = width of the bitmap field: the most contributors one switch (and, in a flat job, one
 * job) sums; worker i <-> bit i in a flat job, child i <-> bit i at each switch of a
 * hierarchical one, whose size is not bounded by it (docs/protocol.md section 5.1) */
#define INA_MAX_WORKERS 64

/* UDP port that marks a datagram as INA (destination port only). */
const bit<16> INA_UDP_PORT = 18000;

/* INA header length in bytes (without the values) and the UDP length of a well-formed
 * INA datagram: 8 (UDP) + INA_HDR_BYTES + 4 * INA_K. */
const bit<16> INA_HDR_BYTES = 26;
const bit<16> INA_UDP_LEN = 8 + INA_HDR_BYTES + 4 * INA_K;

/* Message types (field msg_type). */
const bit<8> INA_TYPE_GRAD = 1;     /* worker -> aggregation point (agg_id) */
const bit<8> INA_TYPE_PARTIAL = 2;  /* aggregation point -> next point / PS */
const bit<8> INA_TYPE_RESULT = 3;   /* PS -> switches -> workers (the ACK) */

/* Flag bits (field flags). */
const bit<8> INA_FLAG_RETRANSMIT = 1;  /* sent again after a timeout; never claims a slot */
const bit<8> INA_FLAG_FALLBACK = 2;    /* bypassed an aggregator (collision / no slot) */
const bit<8> INA_FLAG_INCOMPLETE = 4;  /* partial flushed before fan-in was reached */
const bit<8> INA_FLAG_ECN = 8;         /* crossed an egress queue over its threshold */

/* agg_id 0 addresses the parameter server itself; switches are numbered 1..65535. */
const bit<16> INA_AGG_ID_PS = 0;

#endif
