/* Types of the quantities the INA programs handle, so that a declaration says what a
 * field holds. The wire header (headers.p4: ina_h) keeps plain bit<N> fields: it is
 * checked field by field against the Python codec (tests/test_ina_p4.py). */
#ifndef _INA_TYPES_P4_
#define _INA_TYPES_P4_

typedef bit<9>  egressSpec_t;   /* a port number (v1model) */
typedef bit<48> macAddr_t;
typedef bit<32> ip4Addr_t;

typedef bit<8>  msgType_t;      /* INA_TYPE_* */
typedef bit<8>  inaFlags_t;     /* INA_FLAG_* bits */
typedef bit<16> jobId_t;
typedef bit<16> switchId_t;     /* a switch, or an agg_id (0 = the PS) */
typedef bit<64> workerSet_t;    /* a set of contributors, bit i <-> contributor i (INA_MAX_WORKERS
                                 * bits): worker i in a flat job, child i of the switch in a
                                 * hierarchical one (docs/protocol.md section 5.1) */
typedef bit<8>  childIndex_t;   /* a contributor's bit at one switch: 0 .. INA_MAX_WORKERS - 1 */
typedef bit<8>  contribCount_t; /* contributions summed */
typedef bit<32> slotIndex_t;    /* 0 .. INA_NUM_SLOTS - 1 */
typedef bit<80> slotKey_t;      /* job_id ++ round ++ chunk_id */
typedef bit<16> mcastGroup_t;
typedef bit<16> memberIndex_t;  /* entry of ina_nexthop */

#endif
