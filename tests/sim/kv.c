/* kv — see kv.h. */
#include "tests/sim/kv.h"

#include <string.h>

#include "base/base.h"
#include "tests/sim/hash.h"

/* Little-endian, so snapshot and entry bytes do not depend on the host. */
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void kv_init(struct kv *kv)
{
    memset(kv, 0, sizeof(*kv));
}

void kv_encode_op(const struct kv_op *op, uint8_t out[KV_OP_BYTES])
{
    BASE_ASSERT(op->kind == KV_OP_WRITE || op->kind == KV_OP_CAS);
    BASE_ASSERT(op->key < KV_KEYS);
    out[0] = op->kind;
    out[1] = op->key;
    out[2] = 0;
    out[3] = 0;
    for (int i = 0; i < 4; i++)
        out[4 + i] = (uint8_t)(op->op_id >> (8 * i));
    put_u64(out + 8, (uint64_t)op->value);
    put_u64(out + 16, (uint64_t)op->expect);
}

bool kv_decode_op(const uint8_t *data, size_t len, struct kv_op *op)
{
    if (len != KV_OP_BYTES || data == NULL)
        return false;
    if ((data[0] != KV_OP_WRITE && data[0] != KV_OP_CAS) || data[1] >= KV_KEYS)
        return false;
    if (data[2] != 0 || data[3] != 0)
        return false;
    op->kind = data[0];
    op->key = data[1];
    op->op_id = 0;
    for (int i = 0; i < 4; i++)
        op->op_id |= (uint32_t)data[4 + i] << (8 * i);
    op->value = (int64_t)get_u64(data + 8);
    op->expect = (int64_t)get_u64(data + 16);
    return true;
}

bool kv_apply(struct kv *kv, const struct raft_entry *e, struct kv_result *res)
{
    BASE_ASSERT(e->zxid > kv->applied_zxid);
    memset(res, 0, sizeof(*res));
    if (e->type == RAFT_ENTRY_DATA) {
        if (!kv_decode_op(e->data, e->len, &res->op))
            return false;
        res->is_op = true;
        int64_t *reg = &kv->values[res->op.key];
        if (res->op.kind == KV_OP_WRITE) {
            *reg = res->op.value;
        } else if (*reg == res->op.expect) {
            *reg = res->op.value;
            res->cas_ok = true;
        }
    } else if (e->type == RAFT_ENTRY_CONFIG) {
        /* A membership is the core's business; the state machine only
         * moves past it, as for a no-op (but it must be one). */
        struct raft_config conf;
        if (raft_config_decode(e->data, e->len, &conf) != RAFT_OK)
            return false;
    } else if (e->type != RAFT_ENTRY_NOOP) {
        return false;
    }
    kv->applied_zxid = e->zxid;
    return true;
}

uint64_t kv_digest(const struct kv *kv)
{
    uint64_t h = hash_u64(HASH_FNV_OFFSET, (uint64_t)kv->applied_zxid);
    for (int k = 0; k < KV_KEYS; k++)
        h = hash_u64(h, (uint64_t)kv->values[k]);
    return h;
}

void kv_save(const struct kv *kv, uint8_t out[KV_SNAP_BYTES])
{
    put_u64(out, (uint64_t)kv->applied_zxid);
    for (int k = 0; k < KV_KEYS; k++)
        put_u64(out + 8 + 8 * k, (uint64_t)kv->values[k]);
}

bool kv_load(struct kv *kv, const uint8_t *data, size_t len)
{
    if (len != KV_SNAP_BYTES || data == NULL)
        return false;
    kv->applied_zxid = (int64_t)get_u64(data);
    for (int k = 0; k < KV_KEYS; k++)
        kv->values[k] = (int64_t)get_u64(data + 8 + 8 * k);
    return true;
}
