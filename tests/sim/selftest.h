/*
 * selftest — `larch-sim --self-test`: the simulator's own pieces checked
 * without a core: the linearizability checker on hand-made linearizable
 * and non-linearizable histories (and on large generated ones), the disk
 * model on torn tails (of one write and of a group commit), the state
 * machine's encodings.
 *
 * Threading: single-threaded; prints to out.
 */
#ifndef LARCH_SIM_SELFTEST_H
#define LARCH_SIM_SELFTEST_H

#include <stdbool.h>
#include <stdio.h>

/* Runs every self-test; false if any failed (each failure is printed). */
bool selftest_run(FILE *out);

#endif
