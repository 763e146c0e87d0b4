/*
 * fault — the fault schedule: each seed draws its own rates (struct
 * sim_profile), then every step may crash a node (between steps, or
 * armed to strike part-way through its next ready), arm a disk error
 * (ENOSPC on the next append, EIO on the next fdatasync), stall a disk,
 * or cut and heal links; with --corrupt, flip a bit in a follower's state
 * machine. Crashed nodes restart from their disks after a random pause.
 *
 * Threading: part of one struct sim.
 */
#ifndef LARCH_SIM_FAULT_H
#define LARCH_SIM_FAULT_H

#include "tests/sim/sim.h"

/* Draws s->prof from s->rng. */
void fault_pick_profile(struct sim *s);

/* Restarts nodes whose pause is over, then (while s->faults_on) strikes. */
void fault_step(struct sim *s);

/* The end phase: no more faults, every link heals, every disk recovers,
 * every down node restarts at the next step. */
void fault_stop(struct sim *s);

#endif
