/*
 * kv — the replicated state machine the simulator runs on every node: a
 * few int64 registers, changed by write(k, v) and cas(k, expect, new) ops
 * carried in RAFT_ENTRY_DATA entries. The cas result is decided at apply
 * time, so every replica computes it from its own state: the digest check
 * then shows the replicas agree.
 *
 * Threading: a struct kv belongs to one simulated node.
 */
#ifndef LARCH_SIM_KV_H
#define LARCH_SIM_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replication/raft.h"

#define KV_KEYS 7
#define KV_CLIENT_KEYS 5 /* keys 0..4: the clients' registers, with histories */
#define KV_LOAD_KEY 5    /* background writes: load, checked by digest only */
#define KV_STILL_KEY 6   /* never written: a corruption there stays (--corrupt) */
#define KV_OP_BYTES 24                 /* kind, key, 2 pad, op id, value, expect */
#define KV_SNAP_BYTES (8 + 8 * KV_KEYS) /* applied zxid, then each value */

enum kv_op_kind {
    KV_OP_WRITE = 1,
    KV_OP_CAS = 2,
};

struct kv_op {
    uint8_t kind; /* enum kv_op_kind */
    uint8_t key;  /* < KV_KEYS */
    uint32_t op_id; /* the client history's index for this op */
    int64_t value;  /* write: the value; cas: the new value */
    int64_t expect; /* cas only */
};

struct kv {
    int64_t values[KV_KEYS];
    int64_t applied_zxid; /* the last zxid applied (or the snapshot's) */
};

/* What applying one entry did: a no-op or membership entry has is_op
 * false. */
struct kv_result {
    bool is_op;
    struct kv_op op;
    bool cas_ok; /* cas: the expected value was there and was replaced */
};

void kv_init(struct kv *kv);

/* Encodes op into out (KV_OP_BYTES); kv_decode_op reads it back and
 * refuses anything that is not exactly such an encoding. */
void kv_encode_op(const struct kv_op *op, uint8_t out[KV_OP_BYTES]);
bool kv_decode_op(const uint8_t *data, size_t len, struct kv_op *op);

/* Applies entry e (zxid above applied_zxid) and reports what it did; a
 * NOOP or CONFIG entry changes only applied_zxid. False: a DATA or CONFIG
 * entry that does not decode, or another type (nothing changed). */
bool kv_apply(struct kv *kv, const struct raft_entry *e, struct kv_result *res);

/* A digest of the registers and applied_zxid: equal states, equal digests. */
uint64_t kv_digest(const struct kv *kv);

/* The state as snapshot bytes (KV_SNAP_BYTES), and back: kv_load refuses
 * a buffer of the wrong size. */
void kv_save(const struct kv *kv, uint8_t out[KV_SNAP_BYTES]);
bool kv_load(struct kv *kv, const uint8_t *data, size_t len);

#endif
