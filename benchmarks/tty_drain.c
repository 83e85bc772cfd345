/* The tty-alone reader of bench_record_cpu.py, compiled: the same loop as its Python reader (a wait in
 * poll, the port drained, a pace before the next wait) with no interpreter in it, so what it costs is
 * what the kernel charges to hand the bytes over at that pace: the floor under any reader of a tty.
 * Built by the benchmark with `cc -O2 -shared -fPIC` into a temporary folder, called through ctypes
 * (which releases the GIL for the call). */
#include <poll.h>
#include <time.h>
#include <unistd.h>

static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Reads fd for `seconds`, draining it into buf after each wake-up and sleeping pace_us between;
 * returns the bytes read, with the reads made and this thread's CPU seconds through the pointers. */
long drain_for(int fd, char *buf, long cap, double seconds, long pace_us, long *reads, double *cpu_s)
{
    struct pollfd p = {fd, POLLIN, 0};
    struct timespec c0, c1, pace = {pace_us / 1000000, (pace_us % 1000000) * 1000};
    double t_end = monotonic() + seconds;
    long got = 0;
    *reads = 0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    while (monotonic() < t_end) {
        long n = 0;
        poll(&p, 1, 1000);
        while (n < cap - 4096) {
            ssize_t k = read(fd, buf + n, cap - n);
            ++*reads;
            if (k <= 0)
                break;
            n += k;
        }
        got += n;
        nanosleep(&pace, NULL);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    *cpu_s = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    return got;
}
