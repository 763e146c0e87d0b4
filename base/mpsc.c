/*
 * mpsc.c — Vyukov's intrusive multi-producer single-consumer queue (base.h).
 * Producers exchange the head and then link the previous head to their node;
 * the consumer walks from the tail. The stub node keeps the queue non-empty
 * in structure so that push never needs a compare-and-swap loop.
 */
#include "base/base.h"

#include <stdatomic.h>

void base_mpsc_init(struct base_mpsc *q)
{
    atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
    atomic_store_explicit(&q->head, &q->stub, memory_order_relaxed);
    q->tail = &q->stub;
}

void base_mpsc_push(struct base_mpsc *q, struct base_mpsc_node *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    /* seq_cst: one side of the consumers' sleep protocols (base.h) */
    struct base_mpsc_node *prev = atomic_exchange_explicit(&q->head, n, memory_order_seq_cst);
    atomic_store_explicit(&prev->next, n, memory_order_release);
}

struct base_mpsc_node *base_mpsc_pop(struct base_mpsc *q)
{
    struct base_mpsc_node *tail = q->tail;
    struct base_mpsc_node *next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (tail == &q->stub) {
        if (!next)
            return atomic_load_explicit(&q->head, memory_order_acquire) == tail ? NULL
                                                                                : BASE_MPSC_BUSY;
        q->tail = next;
        tail = next;
        next = atomic_load_explicit(&tail->next, memory_order_acquire);
    }
    if (next) {
        q->tail = next;
        return tail;
    }
    if (atomic_load_explicit(&q->head, memory_order_acquire) != tail)
        return BASE_MPSC_BUSY;
    base_mpsc_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (!next)
        return BASE_MPSC_BUSY;
    q->tail = next;
    return tail;
}

struct base_mpsc_node *base_mpsc_take(struct base_mpsc *q)
{
    struct base_mpsc_node *n;
    while ((n = base_mpsc_pop(q)) == BASE_MPSC_BUSY)
        ;
    return n;
}

/* The tail is always the next node to return, so any tail but the stub is a
 * node. */
bool base_mpsc_empty(struct base_mpsc *q)
{
    return q->tail == &q->stub &&
           atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL &&
           atomic_load_explicit(&q->head, memory_order_seq_cst) == &q->stub;
}
