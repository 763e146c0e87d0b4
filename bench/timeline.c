/*
 * timeline.c — the phases of one run and the result bookkeeping around them.
 *
 * The drivers' threads read the phase on every completion: replies that land
 * while it is MEASURE are counted, the others only keep the load going. The
 * CPU samples are taken right at the flips, so "CPU per op" divides the CPU
 * of exactly the interval whose ops are counted.
 */
#include "bench/bench.h"

#include <string.h>
#include <time.h>

void bench_counts_add(struct bench_counts *dst, const struct bench_counts *src)
{
    dst->read_ok += src->read_ok;
    dst->write_ok += src->write_ok;
    for (int i = 0; i < BENCH_ERR_SLOTS; i++)
        dst->errors[i] += src->errors[i];
    dst->errors_other += src->errors_other;
    dst->notifications += src->notifications;
    dst->sessions_lost += src->sessions_lost;
}

void bench_counts_error(struct bench_counts *c, int32_t code)
{
    if (code <= 0 && code > -BENCH_ERR_SLOTS)
        c->errors[-code]++;
    else
        c->errors_other++;
}

void bench_record_op(struct bench_counts *c, struct bench_hist *all, struct bench_hist *by_kind,
                     bool write, int32_t err, uint64_t t0_ns, uint64_t now_ns)
{
    if (err != ZK_OK) {
        bench_counts_error(c, err);
        return;
    }
    uint64_t lat_ns = now_ns > t0_ns ? now_ns - t0_ns : 0;
    bench_hist_record(all, lat_ns);
    bench_hist_record(by_kind, lat_ns);
    if (write)
        c->write_ok++;
    else
        c->read_ok++;
}

uint64_t bench_counts_error_total(const struct bench_counts *c)
{
    uint64_t total = c->errors_other;
    for (int i = 0; i < BENCH_ERR_SLOTS; i++)
        total += c->errors[i];
    return total;
}

void bench_result_reset(struct bench_result *r, double read_pct)
{
    memset(&r->counts, 0, sizeof(r->counts));
    r->read_pct = read_pct;
    r->duration_s = 0;
    r->server_cpu_s = -1;
    r->bench_cpu_s = -1;
    bench_hist_reset(&r->all);
    bench_hist_reset(&r->read);
    bench_hist_reset(&r->write);
}

/* Sleeps up to seconds in 20 ms slices; false as soon as alive() says so. */
static bool sleep_while_alive(double seconds, bool (*alive)(void *arg), void *arg)
{
    uint64_t end_ns = (uint64_t)base_mono_ns() + (uint64_t)(seconds * 1e9);
    for (;;) {
        if (!alive(arg))
            return false;
        uint64_t now_ns = (uint64_t)base_mono_ns();
        if (now_ns >= end_ns)
            return true;
        uint64_t slice_ns = end_ns - now_ns;
        if (slice_ns > 20000000u)
            slice_ns = 20000000u;
        struct timespec ts = { (time_t)(slice_ns / 1000000000u), (long)(slice_ns % 1000000000u) };
        nanosleep(&ts, NULL);
    }
}

int bench_timeline(const struct bench_cfg *cfg, _Atomic int *phase, struct bench_result *r,
                   bool (*alive)(void *arg), void *arg)
{
    if (!sleep_while_alive(cfg->warmup_s, alive, arg)) {
        atomic_store(phase, BENCH_PHASE_DRAIN);
        return -1;
    }
    double server0 = cfg->server_pid ? bench_proc_cpu_s(cfg->server_pid) : -1;
    double self0 = bench_self_cpu_s();
    uint64_t t0_ns = (uint64_t)base_mono_ns();
    atomic_store(phase, BENCH_PHASE_MEASURE);
    bool ok = sleep_while_alive(cfg->duration_s, alive, arg);
    atomic_store(phase, BENCH_PHASE_DRAIN);
    uint64_t t1_ns = (uint64_t)base_mono_ns();
    double server1 = cfg->server_pid ? bench_proc_cpu_s(cfg->server_pid) : -1;
    double self1 = bench_self_cpu_s();
    r->duration_s = (double)(t1_ns - t0_ns) / 1e9;
    r->server_cpu_s = server0 >= 0 && server1 >= 0 ? server1 - server0 : -1;
    r->bench_cpu_s = self1 - self0;
    return ok ? 0 : -1;
}
