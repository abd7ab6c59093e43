/* SwitchML-style aggregation (p4src/switchml.p4): its own constants, read by Python too
 * (workers/switchml/constants.py parses this file after constants.p4, with the same reader
 * and the same rule: plain decimal or hex literals, + - * / over names defined earlier).
 *
 * What is the same fact as INA's comes from constants.p4 and is not repeated here: K
 * (INA_K, values per packet: the values header ina_values_h is shared) and the width of a
 * worker set (INA_MAX_WORKERS). */
#ifndef _SWITCHML_CONSTANTS_P4_
#define _SWITCHML_CONSTANTS_P4_

#include "constants.p4"

/* Aggregator cells per switch: each job's pool of S slots takes 2 * S of them (two shadow
 * copies, docs/switchml.md). Overridable at compile time (-D SWITCHML_CELLS=N). */
#ifndef SWITCHML_CELLS
#define SWITCHML_CELLS 512
#endif

/* UDP destination port that marks a datagram as SwitchML (not INA's: another header). */
const bit<16> SWITCHML_UDP_PORT = 18100;

/* The SwitchML header in bytes (without the values) and the UDP length of a well-formed
 * datagram: 8 (UDP) + SWITCHML_HDR_BYTES + 4 * INA_K. */
const bit<16> SWITCHML_HDR_BYTES = 18;
const bit<16> SWITCHML_UDP_LEN = 8 + SWITCHML_HDR_BYTES + 4 * INA_K;

/* Message types (field msg_type). */
const bit<8> SWITCHML_TYPE_UPDATE = 1;  /* worker -> switch: one chunk of its vector */
const bit<8> SWITCHML_TYPE_RESULT = 2;  /* switch -> workers: the chunk's sum */

/* Flag bits (field flags). */
const bit<8> SWITCHML_FLAG_RETRANSMIT = 1;  /* UPDATE sent again after a timeout */
const bit<8> SWITCHML_FLAG_SHADOW = 2;      /* RESULT answered from a completed copy (unicast) */

#endif
