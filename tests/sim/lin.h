/*
 * lin — a linearizability checker for one register (Wing & Gong's search
 * with Lowe's just-in-time linearization and memoization, as in Porcupine).
 * Histories are checked one key at a time (P-compositionality: a history
 * of independent registers is linearizable iff each key's is).
 *
 * An op has a call and a return time (distinct logical times, all calls
 * and returns of one history ordered). An op with an unknown outcome (a
 * write whose server crashed or lost its zxid) has no return: it may take
 * effect at any point after its call, or never.
 *
 * Threading: pure; all memory is the caller's or freed before returning.
 */
#ifndef LARCH_SIM_LIN_H
#define LARCH_SIM_LIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LIN_OPS_MAX 64 /* per key: the linearized set is one uint64_t */
#define LIN_CACHE_MAX (1u << 20) /* memo entries before the search gives up */

enum lin_kind {
    LIN_WRITE = 1,
    LIN_CAS = 2,
    LIN_READ = 3,
};

struct lin_op {
    uint8_t kind;   /* enum lin_kind */
    bool unknown;   /* no return: may or may not have taken effect */
    bool cas_ok;    /* cas with a known outcome: did it swap */
    int64_t value;  /* write: written; cas: new value; read: value seen */
    int64_t expect; /* cas */
    int64_t call;   /* logical time of the invocation */
    int64_t ret;    /* logical time of the response (ignored if unknown) */
};

enum lin_result {
    LIN_OK = 0,
    LIN_VIOLATION = 1,
    LIN_GAVE_UP = 2, /* the memo grew past LIN_CACHE_MAX */
};

/* Checks n (<= LIN_OPS_MAX) ops on one register that starts at init. */
enum lin_result lin_check(const struct lin_op *ops, size_t n, int64_t init);

const char *lin_result_name(enum lin_result r);

#endif
