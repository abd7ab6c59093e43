/* The pool of p4src/switchml.p4: every job's S slots, each in two shadow copies.
 *
 * An UPDATE for slot i with version v addresses cell pool_base + v * S + i (the copy) and
 * knows the other copy at pool_base + (1 - v) * S + i. Per cell: the chunk it holds (key
 * = round ++ chunk), the workers summed (bitmap), how many (count; 0 = never used) and the
 * K running sums (SmValues, generated: include/switchml_values.p4). A copy is complete
 * when count = the job's num_workers; it then keeps its result until the slot comes back
 * to this version for a later chunk (docs/switchml.md has the argument why no worker can
 * still need it then).
 *
 * The decision for an UPDATE of worker w, chunk key k, on copy c:
 *  - c holds k, complete, w's bit set: w lost the RESULT: answer from the copy, unicast
 *    back to w's port (shadow_reply);
 *  - c holds k, complete, w's bit clear: w already moved on (its next chunk cleared the
 *    bit), a late duplicate: dropped_stale;
 *  - c holds k, not complete, w's bit set: a duplicate, already summed: dropped_duplicate;
 *  - c holds k, not complete, w's bit clear: join (add; the packet carries the sum);
 *  - c never used, or complete with an older chunk: claim (store; bitmap = w, count 1);
 *  - c holds a newer chunk than k: a late packet: dropped_stale;
 *  - c holds an older chunk that is not complete: impossible while every worker follows
 *    the protocol (docs/switchml.md), dropped_busy.
 * After a claim or join, w's bit is cleared in the other copy: w sent this chunk only after
 * it had the other copy's result. A copy that the claim or join completes turns the
 * packet into the RESULT, multicast to the job (meta.deliver); otherwise it is absorbed.
 * Control-plane names keep the MyIngress. prefix. */
#ifndef _SWITCHML_POOL_P4_
#define _SWITCHML_POOL_P4_

#include "switchml_headers.p4"
#include "switchml_values.p4"

control SmPool(inout sm_headers_t hdr,
               inout sm_metadata_t meta,
               inout standard_metadata_t standard_metadata) {

    @name(".MyIngress.aggregated")
    counter(1, CounterType.packets_and_bytes) aggregated;    /* claimed or joined a copy */
    @name(".MyIngress.completed")
    counter(1, CounterType.packets_and_bytes) completed;     /* RESULTs multicast */
    @name(".MyIngress.shadow_reply")
    counter(1, CounterType.packets_and_bytes) shadow_reply;  /* RESULTs unicast from a copy */
    @name(".MyIngress.absorbed")
    counter(1, CounterType.packets_and_bytes) absorbed;      /* summed into an incomplete copy */
    @name(".MyIngress.dropped_duplicate")
    counter(1, CounterType.packets_and_bytes) dropped_duplicate;
    @name(".MyIngress.dropped_stale")
    counter(1, CounterType.packets_and_bytes) dropped_stale;
    @name(".MyIngress.dropped_busy")
    counter(1, CounterType.packets_and_bytes) dropped_busy;

    @name(".MyIngress.sm_key")
    register<smKey_t>(SWITCHML_CELLS) sm_key;
    @name(".MyIngress.sm_bitmap")
    register<workerSet_t>(SWITCHML_CELLS) sm_bitmap;
    @name(".MyIngress.sm_count")
    register<smCount_t>(SWITCHML_CELLS) sm_count;

    SmValues() values;

    action absorb() {
        absorbed.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_duplicate() {
        dropped_duplicate.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_stale() {
        dropped_stale.count(0);
        mark_to_drop(standard_metadata);
    }

    action drop_busy() {
        dropped_busy.count(0);
        mark_to_drop(standard_metadata);
    }

    /* This packet becomes the RESULT of the copy (its values already the sums). */
    action make_result(bit<8> flags, smCount_t count, smDeliver_t deliver) {
        hdr.sm.msg_type = SWITCHML_TYPE_RESULT;
        hdr.sm.flags = flags;
        hdr.sm.count = count;
        meta.deliver = deliver;
    }

    apply {
        /* The two copies; ver is 0 or 1 (admission), so no multiplication is needed. */
        meta.cell = meta.pool_base + (slotIndex_t)hdr.sm.pool_index;
        meta.other_cell = meta.cell + meta.pool_size;
        if (hdr.sm.ver == 1) {
            meta.other_cell = meta.cell;
            meta.cell = meta.cell + meta.pool_size;
        }
        meta.key = hdr.sm.round ++ hdr.sm.chunk;
        sm_key.read(meta.cell_key, meta.cell);
        sm_bitmap.read(meta.cell_bitmap, meta.cell);
        sm_count.read(meta.cell_count, meta.cell);

        bool add = false;
        smCount_t new_count = 0;
        workerSet_t new_bitmap = 0;
        if (meta.cell_count != 0 && meta.cell_key == meta.key) {
            if (meta.cell_count == meta.num_workers) {
                if ((meta.cell_bitmap & meta.worker_bit) != 0) {
                    /* the RESULT was lost on its way to this worker: the shadow copy */
                    values.apply(hdr.vals, meta.cell, SM_VALUES_LOAD);
                    make_result(SWITCHML_FLAG_SHADOW, meta.cell_count, SM_DELIVER_UNICAST);
                    shadow_reply.count(0);
                } else {
                    drop_stale();
                    exit;
                }
            } else if ((meta.cell_bitmap & meta.worker_bit) != 0) {
                drop_duplicate();
                exit;
            } else {
                values.apply(hdr.vals, meta.cell, SM_VALUES_ADD);
                new_bitmap = meta.cell_bitmap | meta.worker_bit;
                new_count = meta.cell_count + 1;
                add = true;
            }
        } else if (meta.cell_count == 0
                   || (meta.cell_count == meta.num_workers && meta.key > meta.cell_key)) {
            values.apply(hdr.vals, meta.cell, SM_VALUES_STORE);
            new_bitmap = meta.worker_bit;
            new_count = 1;
            add = true;
        } else if (meta.key < meta.cell_key) {
            drop_stale();
            exit;
        } else {
            drop_busy();
            exit;
        }

        if (add) {
            sm_key.write(meta.cell, meta.key);
            sm_bitmap.write(meta.cell, new_bitmap);
            sm_count.write(meta.cell, new_count);
            /* the worker had the other copy's result before it sent this chunk */
            sm_bitmap.read(meta.other_bitmap, meta.other_cell);
            sm_bitmap.write(meta.other_cell, meta.other_bitmap & ~meta.worker_bit);
            aggregated.count(0);
            if (new_count != meta.num_workers) {
                absorb();
                exit;
            }
            make_result(0, new_count, SM_DELIVER_MULTICAST);
            completed.count(0);
        }
    }
}

#endif
