/* Validation and membership: which packets the INA switch accepts at all.
 *
 * Reads the switch, port and job configuration into `meta` (tables switch_config,
 * port_config, job_table, ina_member) and drops, counting why:
 *  - malformed: parser error (truncated), bad IPv4 checksum, IPv4 options, a bad INA
 *    header (UDP length, type, GRAD/PARTIAL count and bitmap: a GRAD's bitmap is its sender's
 *    bit in a flat job, 0 in a hierarchical one);
 *  - not a member: a GRAD from an unregistered (job, worker, port), a RESULT that does not
 *    enter at the PS's port of s_d, a PARTIAL from a host, contributions outside the job's
 *    worker set (flat job), a RESULT or an aggregation of an unknown job;
 *  - not IPv4 (dropped_not_ipv4: ARP, IPv6, LLDP... this data plane routes IPv4 only).
 * Every drop goes through a drop_* action that counts its reason, so that a frame that
 * disappears in a switch is always accounted for (docs/protocol.md §4, docs/design.md §9).
 * A dropped packet ends ingress here (exit). Control-plane names keep the MyIngress.
 * prefix of the single-control program (docs/protocol.md). */
#ifndef _INA_ADMISSION_P4_
#define _INA_ADMISSION_P4_

#include "headers.p4"

control InaAdmission(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    @name(".MyIngress.dropped_malformed")
    counter(1, CounterType.packets_and_bytes) dropped_malformed;
    @name(".MyIngress.dropped_nonmember")
    counter(1, CounterType.packets_and_bytes) dropped_nonmember;
    @name(".MyIngress.dropped_not_ipv4")
    counter(1, CounterType.packets_and_bytes) dropped_not_ipv4;

    action drop_not_ipv4() {
        dropped_not_ipv4.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_malformed() {
        dropped_malformed.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_nonmember() {
        dropped_nonmember.count(0);
        mark_to_drop(standard_metadata);
    }

    @name(".MyIngress.set_switch_config")
    action set_switch_config(switchId_t switch_id, bit<1> agg_enabled) {
        meta.switch_id = switch_id;
        meta.agg_enabled = agg_enabled;
    }

    @name(".MyIngress.set_port_fabric")
    action set_port_fabric() {
        meta.fabric_port = 1;
    }

    @name(".MyIngress.set_job")
    action set_job(workerSet_t full_mask, bit<1> is_ps_tor, switchId_t tor_id,
                   egressSpec_t ps_port, mcastGroup_t mcast_grp,
                   slotIndex_t slot_base, slotIndex_t slot_size,
                   bit<1> hier, contribCount_t fan_in) {
        meta.job_known = 1;
        meta.job_mask = full_mask;
        meta.hier = hier;
        meta.job_fan_in = fan_in;
        meta.is_ps_tor = is_ps_tor;
        meta.tor_id = tor_id;
        meta.ps_port = ps_port;
        meta.mcast_grp = mcast_grp;
        meta.slot_base = slot_base;
        meta.slot_size = slot_size;
    }

    @name(".MyIngress.member_ok")
    action member_ok() {
    }

    /* Keyless: the controller sets the default action's parameters. */
    @name(".MyIngress.switch_config")
    table switch_config {
        actions = { set_switch_config; }
        default_action = set_switch_config(0, 0);
        size = 1;
    }

    /* Switch-to-switch ports are marked fabric; everything else is a host port. */
    @name(".MyIngress.port_config")
    table port_config {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port_fabric; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    @name(".MyIngress.job_table")
    table job_table {
        key = { hdr.ina.job_id: exact; }
        actions = { set_job; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    /* Which worker may send GRADs for which job on which host port. */
    @name(".MyIngress.ina_member")
    table ina_member {
        key = {
            hdr.ina.job_id: exact;
            hdr.ina.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { member_ok; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        /* IPv4: parser error (truncated), bad checksum, options. */
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
        if (!hdr.ina.isValid()) {
            return;  /* plain IPv4: routing decides */
        }

        /* The INA header. */
        if (hdr.udp.length != INA_UDP_LEN
                || hdr.ina.msg_type < INA_TYPE_GRAD
                || hdr.ina.msg_type > INA_TYPE_RESULT) {
            drop_malformed();
            exit;
        }
        switch_config.apply();
        port_config.apply();
        job_table.apply();

        if (hdr.ina.msg_type == INA_TYPE_GRAD) {
            if (meta.hier == 1) {
                /* hierarchical job: the aggregation point's child table gives the bit */
                if (hdr.ina.count != 1 || hdr.ina.bitmap != 0) {
                    drop_malformed();
                    exit;
                }
            } else if (hdr.ina.count != 1 || hdr.ina.worker_id >= INA_MAX_WORKERS
                    || hdr.ina.bitmap != ((workerSet_t)1) << (bit<8>)hdr.ina.worker_id) {
                /* the amount is cast to bit<8>: BMv2 shifts by at most 8 bits (worker_id is
                 * below INA_MAX_WORKERS here) */
                drop_malformed();
                exit;
            }
            meta.contrib = 1;
        } else if (hdr.ina.msg_type == INA_TYPE_PARTIAL) {
            if (hdr.ina.count == 0 || hdr.ina.bitmap == 0) {
                drop_malformed();
                exit;
            }
            meta.contrib = hdr.ina.count;
        }
        /* Switches may rewrite the values: INA datagrams carry no UDP checksum. */
        hdr.udp.checksum = 0;

        /* Membership. On host ports: a GRAD needs its (job, worker, port) registered;
         * only the PS's port at s_d may inject RESULTs; PARTIALs never come from hosts.
         * From any port: the contribution must lie inside the job's worker set (flat). */
        if (meta.fabric_port == 0) {
            if (hdr.ina.msg_type == INA_TYPE_GRAD) {
                if (!ina_member.apply().hit) {
                    drop_nonmember();
                    exit;
                }
            } else if (hdr.ina.msg_type == INA_TYPE_RESULT) {
                if (meta.job_known == 0 || meta.is_ps_tor == 0
                        || standard_metadata.ingress_port != meta.ps_port) {
                    drop_nonmember();
                    exit;
                }
            } else {
                drop_nonmember();
                exit;
            }
        }
        if (hdr.ina.msg_type == INA_TYPE_RESULT) {
            if (meta.job_known == 0) {
                drop_nonmember();
                exit;
            }
        } else if (meta.job_known == 1) {
            /* (a hierarchical job's bits are children: its aggregation points check them) */
            if (meta.hier == 0 && (hdr.ina.bitmap & ~meta.job_mask) != 0) {
                drop_nonmember();
                exit;
            }
        } else if (meta.agg_enabled == 1 && meta.switch_id != 0
                   && hdr.ina.agg_id == meta.switch_id) {
            /* addressed to this aggregator, but its job is not configured here */
            drop_nonmember();
            exit;
        }
    }
}

#endif
