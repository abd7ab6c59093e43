/* Validation and membership of p4src/switchml.p4: which packets the switch accepts.
 *
 * Reads the job (job_table) and drops, counting why:
 *  - dropped_malformed: parser error (truncated), bad IPv4 checksum, IPv4 options, a bad
 *    SwitchML header (UDP length, a type other than UPDATE -- only the switch makes
 *    RESULTs --, ver above 1, count other than 1, worker_id beyond the worker set);
 *  - dropped_nonmember: an unknown job, or a (job, worker, port) not in sm_member;
 *  - dropped_no_slot: pool_index outside the job's pool, or a job whose pool (as
 *    job_table gives it) does not fit the switch's cells, has no workers or no group;
 *  - dropped_not_ipv4: anything but IPv4 (ARP, IPv6, LLDP...).
 * A dropped packet ends ingress here (exit). Control-plane names keep the MyIngress.
 * prefix, as ina.p4's do. */
#ifndef _SWITCHML_ADMISSION_P4_
#define _SWITCHML_ADMISSION_P4_

#include "switchml_headers.p4"

control SmAdmission(inout sm_headers_t hdr,
                    inout sm_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    @name(".MyIngress.dropped_malformed")
    counter(1, CounterType.packets_and_bytes) dropped_malformed;
    @name(".MyIngress.dropped_nonmember")
    counter(1, CounterType.packets_and_bytes) dropped_nonmember;
    @name(".MyIngress.dropped_no_slot")
    counter(1, CounterType.packets_and_bytes) dropped_no_slot;
    @name(".MyIngress.dropped_not_ipv4")
    counter(1, CounterType.packets_and_bytes) dropped_not_ipv4;

    action drop_malformed() {
        dropped_malformed.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_nonmember() {
        dropped_nonmember.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_no_slot() {
        dropped_no_slot.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_not_ipv4() {
        dropped_not_ipv4.count(0);
        mark_to_drop(standard_metadata);
    }

    @name(".MyIngress.set_job")
    action set_job(smCount_t num_workers, mcastGroup_t mcast_grp,
                   slotIndex_t pool_base, slotIndex_t pool_size) {
        meta.num_workers = num_workers;
        meta.mcast_grp = mcast_grp;
        meta.pool_base = pool_base;
        meta.pool_size = pool_size;
    }

    @name(".MyIngress.member_ok")
    action member_ok() {
    }

    @name(".MyIngress.job_table")
    table job_table {
        key = { hdr.sm.job_id: exact; }
        actions = { set_job; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    /* Which worker may send UPDATEs for which job on which port. */
    @name(".MyIngress.sm_member")
    table sm_member {
        key = {
            hdr.sm.job_id: exact;
            hdr.sm.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { member_ok; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        if (standard_metadata.parser_error != error.NoError
                || standard_metadata.checksum_error == 1) {
            drop_malformed();
            exit;
        }
        if (!hdr.ipv4.isValid()) {
            drop_not_ipv4();
            exit;
        }
        if (hdr.ipv4.version != 4 || hdr.ipv4.ihl != 5) {
            drop_malformed();
            exit;
        }
        if (!hdr.sm.isValid()) {
            return;  /* plain IPv4: delivery routes it */
        }
        if (hdr.udp.length != SWITCHML_UDP_LEN
                || hdr.sm.msg_type != SWITCHML_TYPE_UPDATE
                || hdr.sm.ver > 1
                || hdr.sm.count != 1
                || hdr.sm.worker_id >= INA_MAX_WORKERS) {
            drop_malformed();
            exit;
        }
        /* The switch rewrites the values: SwitchML datagrams carry no UDP checksum. */
        hdr.udp.checksum = 0;

        if (!job_table.apply().hit) {
            drop_nonmember();
            exit;
        }
        if (!sm_member.apply().hit) {
            drop_nonmember();
            exit;
        }
        /* The job's cells [base, base + 2 * size) must lie inside the registers; checked
         * in this order so that no sum below overflows. */
        if (meta.num_workers == 0 || meta.mcast_grp == 0
                || meta.pool_size == 0 || meta.pool_size > SWITCHML_CELLS / 2
                || meta.pool_base > SWITCHML_CELLS - (meta.pool_size + meta.pool_size)
                || (slotIndex_t)hdr.sm.pool_index >= meta.pool_size) {
            drop_no_slot();
            exit;
        }
        /* BMv2 shifts by at most 8 bits: the amount is cast (worker_id < 64 here). */
        meta.worker_bit = ((workerSet_t)1) << (bit<8>)hdr.sm.worker_id;
    }
}

#endif
