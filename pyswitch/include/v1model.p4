/* pyswitch's own minimal v1model architecture declarations (P4_16).
 * Written for pyswitch; the behaviour of every extern is implemented by pyswitch
 * following BMv2 simple_switch. */
#ifndef _PYSWITCH_V1MODEL_P4_
#define _PYSWITCH_V1MODEL_P4_
/* p4c's v1model.p4 guard too: programs test it to know v1model.p4 is in. */
#define _V1_MODEL_P4_

#include <core.p4>

match_kind {
    range,
    optional,
    selector
}

/* as p4c's v1model.p4: a program may choose the version with #define V1MODEL_VERSION
 * before including this file; the compiler checks the value as p4c does. pyswitch's
 * declarations are those of 20200408, which differ from 20180101 only in spelling
 * (PortId_t is bit<9> in both). */
#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif
const bit<32> __v1model_version = V1MODEL_VERSION;

typedef bit<9> PortId_t;

struct standard_metadata_t {
    PortId_t ingress_port;
    PortId_t egress_spec;
    PortId_t egress_port;
    bit<32> instance_type;
    bit<32> packet_length;
    bit<32> enq_timestamp;
    bit<19> enq_qdepth;
    bit<32> deq_timedelta;
    bit<19> deq_qdepth;
    bit<48> ingress_global_timestamp;
    bit<48> egress_global_timestamp;
    bit<16> mcast_grp;
    bit<16> egress_rid;
    bit<1> checksum_error;
    error parser_error;
    bit<3> priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

enum CloneType {
    I2E,
    E2E
}

extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}

extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

extern register<RegT> {
    register(bit<32> size);
    void read(out RegT result, in bit<32> index);
    void write(in bit<32> index, in RegT value);
}

/* Declared so that programs using them get a clear "not supported" error. */
extern meter {
    meter(bit<32> size, MeterType type);
}
extern direct_meter<DmT> {
    direct_meter(MeterType type);
}
extern action_profile {
    action_profile(bit<32> size);
}
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

extern void random<RandT>(out RandT result, in RandT lo, in RandT hi);
extern void hash<HashO, HashT, HashD, HashM>(out HashO result, in HashAlgorithm algo,
                                             in HashT base, in HashD data, in HashM max);
extern void mark_to_drop(inout standard_metadata_t standard_metadata);
extern void clone(in CloneType type, in bit<32> session);
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);
extern void verify_checksum<VcT, VcO>(in bool condition, in VcT data, in VcO checksum,
                                      HashAlgorithm algo);
extern void update_checksum<UcT, UcO>(in bool condition, in UcT data, inout UcO checksum,
                                      HashAlgorithm algo);
extern void verify_checksum_with_payload<VpT, VpO>(in bool condition, in VpT data,
                                                   in VpO checksum, HashAlgorithm algo);
extern void update_checksum_with_payload<UpT, UpO>(in bool condition, in UpT data,
                                                   inout UpO checksum, HashAlgorithm algo);
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

parser Parser<PHdrT, PMetaT>(packet_in b, out PHdrT parsedHdr, inout PMetaT meta,
                             inout standard_metadata_t standard_metadata);
control VerifyChecksum<VHdrT, VMetaT>(inout VHdrT hdr, inout VMetaT meta);
control Ingress<IHdrT, IMetaT>(inout IHdrT hdr, inout IMetaT meta,
                               inout standard_metadata_t standard_metadata);
control Egress<EHdrT, EMetaT>(inout EHdrT hdr, inout EMetaT meta,
                              inout standard_metadata_t standard_metadata);
control ComputeChecksum<CHdrT, CMetaT>(inout CHdrT hdr, inout CMetaT meta);
control Deparser<DHdrT>(packet_out b, in DHdrT hdr);

package V1Switch<SwHdrT, SwMetaT>(Parser<SwHdrT, SwMetaT> p, VerifyChecksum<SwHdrT, SwMetaT> vr,
                                  Ingress<SwHdrT, SwMetaT> ig, Egress<SwHdrT, SwMetaT> eg,
                                  ComputeChecksum<SwHdrT, SwMetaT> ck, Deparser<SwHdrT> dep);

#endif
