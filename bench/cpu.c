/*
 * cpu.c — clocks and CPU time: the server's from /proc/PID/stat, our own from
 * the process CPU clock.
 */
#include "bench/bench.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

/* /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces and
 * parentheses, so fields are counted from the last ')'. utime and stime are
 * fields 14 and 15 (proc(5)), in clock ticks, summed over all threads. */
double bench_proc_cpu_s(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long utime, stime;
    /* after ')': state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt
     * majflt cmajflt(13) utime(14) stime(15) */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
               &stime) != 2)
        return -1;
    long ticks = sysconf(_SC_CLK_TCK);
    if (ticks <= 0)
        return -1;
    return (double)(utime + stime) / (double)ticks;
}

double bench_self_cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return -1;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
