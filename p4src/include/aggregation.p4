/* Slot aggregation: the aggregator slots and everything that reads or writes them.
 *
 * Applied to a GRAD/PARTIAL addressed to this switch (agg_id == switch_id) and to every
 * RESULT. Slot slot_base + crc32(job_id ++ round ++ chunk_id) mod slot_size, the job's range
 * from job_table (the whole pool [0, INA_NUM_SLOTS) when jobs share it), computed once per
 * packet, holds one key's running sums; the key includes the job id, so a slot held by
 * another job is a collision, never a join (jobs never touch each other's sums): a GRAD/PARTIAL claims a free (or stale) slot,
 * joins its key, or is re-emitted / flushed / sent on when it cannot be added
 * (docs/protocol.md has the state machine); a complete slot turns the packet into the
 * PARTIAL for the next aggregation point, an incomplete one absorbs it (exit). A RESULT
 * releases the slot holding its key. A switch with agg_enabled = 0 sends what is
 * addressed to it on to the PS. Control-plane names keep the MyIngress. prefix.
 *
 * Two numberings of the contributors (docs/protocol.md section 5.1), chosen per job by
 * job_table: a flat job's bitmaps hold worker bits and s_d completes on the job's full mask
 * (at most INA_MAX_WORKERS workers); a hierarchical job's slot holds the bits of this
 * switch's CHILDREN (a worker, or an aggregation point below whose PARTIAL is one
 * contribution), each child's bit from the controller's table ina_child keyed by the
 * sender (a GRAD's worker_id, a PARTIAL's emitting switch), and a slot completes when it
 * holds the job_fan_in children set_job gives this switch: the state per slot does not
 * grow with the job, only the children of one switch are bounded by INA_MAX_WORKERS. */
#ifndef _INA_AGGREGATION_P4_
#define _INA_AGGREGATION_P4_

#include "headers.p4"
#include "values_regs.p4"

control InaAggregation(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    /* Index 0 only; P4Runtime reads them by name. */
    @name(".MyIngress.aggregated")
    counter(1, CounterType.packets_and_bytes) aggregated;  /* claimed or joined a slot */
    @name(".MyIngress.completed")
    counter(1, CounterType.packets_and_bytes) completed;   /* PARTIALs emitted on completion */
    @name(".MyIngress.duplicate")
    counter(1, CounterType.packets_and_bytes) duplicate;   /* contribution already in the slot */
    @name(".MyIngress.reemitted")
    counter(1, CounterType.packets_and_bytes) reemitted;   /* stored PARTIAL sent again */
    @name(".MyIngress.flushed")
    counter(1, CounterType.packets_and_bytes) flushed;     /* INCOMPLETE partial sent to the PS */
    @name(".MyIngress.collision")
    counter(1, CounterType.packets_and_bytes) collision;   /* slot held another key */
    @name(".MyIngress.bypassed")
    counter(1, CounterType.packets_and_bytes) bypassed;    /* not aggregatable here, sent on to the PS */
    @name(".MyIngress.evicted")
    counter(1, CounterType.packets_and_bytes) evicted;     /* stale slot (older round) reclaimed */
    @name(".MyIngress.release")
    counter(1, CounterType.packets_and_bytes) release;     /* slot released by a RESULT */
    @name(".MyIngress.asked")
    counter(1, CounterType.packets_and_bytes) asked;       /* NACKs to this point's children */
    /* The two ways a frame ends here without leaving the switch (docs/protocol.md §4):
     * summed into a slot that is not complete yet, or already in such a slot. */
    @name(".MyIngress.absorbed")
    counter(1, CounterType.packets_and_bytes) absorbed;    /* summed into an incomplete slot */
    @name(".MyIngress.dropped_duplicate")
    counter(1, CounterType.packets_and_bytes) dropped_duplicate; /* already in an incomplete slot */

    @name(".MyIngress.slot_key")
    register<slotKey_t>(INA_NUM_SLOTS) slot_key;          /* job_id ++ round ++ chunk_id */
    @name(".MyIngress.slot_bitmap")
    register<workerSet_t>(INA_NUM_SLOTS) slot_bitmap;     /* workers summed so far */
    @name(".MyIngress.slot_count")
    register<contribCount_t>(INA_NUM_SLOTS) slot_count;   /* contributions summed; 0 = free */

    InaValues() values;  /* the slots' sums (generated: include/values_regs.p4) */

    @name(".MyIngress.set_child")
    action set_child(childIndex_t index) {
        meta.bits = ((workerSet_t)1) << index;
    }

    /* Hierarchical jobs: the sender's child bit at this switch, keyed by the job and the
     * sender (worker_id: a GRAD's worker, a PARTIAL's emitting switch). A sender that is no
     * child of this switch is sent on to the PS unaggregated. */
    @name(".MyIngress.ina_child")
    table ina_child {
        key = {
            hdr.ina.job_id: exact;
            hdr.ina.msg_type: exact;
            hdr.ina.worker_id: exact;
        }
        actions = { set_child; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    /* Slot bookkeeping after a claim or join (the sums are the values control's). */
    action slot_update() {
        slot_key.write(meta.slot, meta.key);
        slot_bitmap.write(meta.slot, meta.new_bitmap);
        slot_count.write(meta.slot, meta.new_count);
    }

    action slot_release() {
        slot_key.write(meta.slot, 0);
        slot_bitmap.write(meta.slot, 0);
        slot_count.write(meta.slot, 0);
    }

    /* Summed into the slot; nothing leaves the switch. */
    action absorb() {
        absorbed.count(0);
        mark_to_drop(standard_metadata);
    }

    /* Already summed into a slot that is not complete, not a retransmission: nothing to
     * answer with (also counted in duplicate, with the re-emits and flushes). */
    action drop_duplicate() {
        dropped_duplicate.count(0);
        mark_to_drop(standard_metadata);
    }

    /* Turn this packet into the PARTIAL of the slot (values already set). */
    action make_partial(inaFlags_t flags, switchId_t agg_id) {
        hdr.ina.msg_type = INA_TYPE_PARTIAL;
        hdr.ina.flags = flags;
        hdr.ina.agg_id = agg_id;
    }

    /* A retransmission found this point's slot incomplete: ask the children it lacks
     * (docs/protocol.md §6, "Points ask their children"). The packet becomes a NACK, a
     * RESULT flagged INCOMPLETE whose bitmap is what the slot holds and whose agg_id names
     * this switch, multicast down to the point's workers (routing, ask_group); a worker
     * of this point whose bit it lacks resends. Its values say nothing. */
    action ask_children() {
        hdr.ina.msg_type = INA_TYPE_RESULT;
        hdr.ina.flags = INA_FLAG_INCOMPLETE;
        hdr.ina.agg_id = meta.switch_id;
        hdr.ina.count = meta.slot_count;
        hdr.ina.bitmap = meta.slot_bitmap;
        asked.count(0);
    }

    /* Send the packet on, unaggregated, to the aggregation point agg_id. */
    action fall_back(switchId_t agg_id) {
        hdr.ina.flags = hdr.ina.flags | INA_FLAG_FALLBACK;
        hdr.ina.agg_id = agg_id;
    }

    apply {
        if (meta.agg_enabled == 0) {
            if (hdr.ina.msg_type != INA_TYPE_RESULT) {
                /* not an aggregator: "aggregator unavailable", straight to the PS */
                fall_back(INA_AGG_ID_PS);
                bypassed.count(0);
            }
            return;
        }

        if (meta.slot_size == 0 || meta.slot_size > INA_NUM_SLOTS
                || meta.slot_base > INA_NUM_SLOTS - meta.slot_size) {
            /* the job has no slots at this switch (partitioned pool, docs/design.md
             * §3.10; a range outside the pool counts as none): what is addressed here
             * goes on to the PS unaggregated */
            if (hdr.ina.msg_type != INA_TYPE_RESULT) {
                fall_back(INA_AGG_ID_PS);
                bypassed.count(0);
            }
            return;
        }
        /* the job's slot range [slot_base, slot_base + slot_size) (job_table): the whole
         * pool under the shared policy, the job's own part under the partitioned one */
        hash(meta.slot, HashAlgorithm.crc32, meta.slot_base,
             { hdr.ina.job_id, hdr.ina.round, hdr.ina.chunk_id }, meta.slot_size);
        meta.key = hdr.ina.job_id ++ hdr.ina.round ++ hdr.ina.chunk_id;
        slot_key.read(meta.slot_key, meta.slot);
        slot_count.read(meta.slot_count, meta.slot);

        /* RESULT: release the slot holding this key (not a point's NACK on its way to the
         * point's children: the chunk is not complete). */
        if (hdr.ina.msg_type == INA_TYPE_RESULT) {
            if ((hdr.ina.flags & INA_FLAG_INCOMPLETE) == 0
                    && meta.slot_count != 0 && meta.slot_key == meta.key) {
                slot_release();
                values.apply(hdr.vals, meta.slot, VALUES_CLEAR);
                release.count(0);
            }
            return;
        }

        /* GRAD / PARTIAL addressed to this switch: aggregate. */
        if (meta.is_ps_tor == 1) {
            meta.next_agg_id = INA_AGG_ID_PS;
        } else {
            meta.next_agg_id = meta.tor_id;
        }
        slot_bitmap.read(meta.slot_bitmap, meta.slot);

        /* What this packet contributes: its own bits (flat job), or its sender's child bit
         * here (hierarchical job: one child, one contribution). */
        meta.bits = hdr.ina.bitmap;
        if (meta.hier == 1) {
            meta.bits = 0;
            ina_child.apply();
            if (meta.bits == 0) {
                /* not a child of this switch: on to the PS */
                fall_back(INA_AGG_ID_PS);
                bypassed.count(0);
                return;
            }
            meta.contrib = 1;
        }

        bool add = false;
        bool emitted = false;  /* this switch emits the slot's PARTIAL */
        if (meta.slot_count == 0
                || (meta.slot_key[79:64] == hdr.ina.job_id
                    && meta.slot_key[63:32] < hdr.ina.round)) {
            /* Free slot (or one left over from an older round of this job, which is
             * stale: see docs/protocol.md). Retransmissions never claim: the chunk may
             * already be complete at the PS. */
            if ((hdr.ina.flags & INA_FLAG_RETRANSMIT) != 0) {
                fall_back(INA_AGG_ID_PS);
                bypassed.count(0);
            } else {
                if (meta.slot_count != 0) {
                    evicted.count(0);
                }
                values.apply(hdr.vals, meta.slot, VALUES_STORE);
                meta.new_bitmap = meta.bits;
                meta.new_count = meta.contrib;
                add = true;
            }
        } else if (meta.slot_key != meta.key) {
            /* Collision: aggregator unavailable for this key. */
            fall_back(meta.next_agg_id);
            collision.count(0);
        } else if ((meta.slot_bitmap & meta.bits) == 0) {
            /* Join. */
            values.apply(hdr.vals, meta.slot, VALUES_ADD);
            meta.new_bitmap = meta.slot_bitmap | meta.bits;
            meta.new_count = meta.slot_count + meta.contrib;
            add = true;
        } else if ((meta.slot_bitmap & meta.bits) == meta.bits) {
            /* Duplicate: every contribution already summed here. */
            duplicate.count(0);
            bool slot_complete = false;
            if (meta.hier == 1) {
                slot_complete = meta.slot_count == meta.job_fan_in;
            } else if (meta.is_ps_tor == 1) {
                slot_complete = meta.slot_bitmap == meta.job_mask;
            } else {
                slot_complete = meta.slot_count == hdr.ina.fan_in;
            }
            if (slot_complete) {
                /* The PARTIAL was lost (or is late): send the stored one again. */
                values.apply(hdr.vals, meta.slot, VALUES_LOAD);
                hdr.ina.count = meta.slot_count;
                hdr.ina.bitmap = meta.slot_bitmap;
                make_partial(INA_FLAG_RETRANSMIT, meta.next_agg_id);
                emitted = true;
                reemitted.count(0);
            } else if ((hdr.ina.flags & INA_FLAG_RETRANSMIT) != 0
                    && meta.hier == 0 && meta.is_ps_tor == 0) {
                if ((hdr.ina.flags & INA_FLAG_INCOMPLETE) != 0) {
                    /* a worker's answer to this point's NACK whose first copy came
                     * after all: asking again would make the answers ask, on and on */
                    drop_duplicate();
                    exit;
                }
                /* A sender timed out on a flat job's incomplete slot below s_d: the
                 * point asks its own workers, not the PS (one loop, not three). */
                ask_children();
            } else if ((hdr.ina.flags & INA_FLAG_RETRANSMIT) != 0) {
                /* A sender timed out on an incomplete slot: hand what is summed so far
                 * to the PS (never aggregated again in the network). */
                values.apply(hdr.vals, meta.slot, VALUES_LOAD);
                hdr.ina.count = meta.slot_count;
                hdr.ina.bitmap = meta.slot_bitmap;
                make_partial(INA_FLAG_RETRANSMIT | INA_FLAG_INCOMPLETE, INA_AGG_ID_PS);
                emitted = true;
                flushed.count(0);
            } else {
                drop_duplicate();
                exit;
            }
        } else {
            /* Overlaps the slot only partly: adding would double-count. */
            fall_back(INA_AGG_ID_PS);
            bypassed.count(0);
        }

        if (add) {
            slot_update();
            aggregated.count(0);
            bool complete = false;
            if (meta.hier == 1) {
                complete = meta.new_count == meta.job_fan_in;
            } else if (meta.is_ps_tor == 1) {
                complete = meta.new_bitmap == meta.job_mask;
            } else {
                complete = meta.new_count == hdr.ina.fan_in;
            }
            if (!complete) {
                absorb();
                exit;
            }
            /* The values control left the slot's sums in the packet. */
            hdr.ina.count = meta.new_count;
            hdr.ina.bitmap = meta.new_bitmap;
            make_partial(0, meta.next_agg_id);
            emitted = true;
            completed.count(0);
        }
        if (emitted && meta.hier == 1) {
            /* a hierarchical job's PARTIAL names the switch that emitted it: its bitmap is
             * that switch's children (not in make_partial: no conditional in an action) */
            hdr.ina.worker_id = meta.switch_id;
        }
    }
}

#endif
