/* syscall_price — what one system call costs on this machine, split the
 * way the benchmarks split a server's CPU: user time and system time
 * (getrusage). uring.sh prints it beside the raw loops, because on a
 * kernel that switches page tables on every entry and exit (page-table
 * isolation without PCID, as in many virtual machines) a good part of a
 * system call's price is charged to user time: the TLB is refilled after
 * the return, by user code. A server's "user space share" then says more
 * about how many system calls it makes than about how much code it runs.
 *
 * The call is getppid through syscall(2): the kernel does next to nothing
 * for it, so what is measured is the entry and exit. A second loop with
 * no system call, of about the same instructions, shows what the loop
 * itself costs.
 *
 *   syscall_price [CALLS]     prints "user_us sys_us" per call, then a
 *                              line of prose on standard error */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static double usec(struct timeval t)
{
    return (double)t.tv_sec * 1e6 + (double)t.tv_usec;
}

typedef struct {
    double user, sys; /* µs per iteration */
} split;

static split measure(long n, int with_call)
{
    struct rusage a, b;
    volatile long sink = 0;
    getrusage(RUSAGE_SELF, &a);
    for (long i = 0; i < n; i++) {
        if (with_call)
            sink += syscall(SYS_getppid);
        else
            sink += i;
    }
    getrusage(RUSAGE_SELF, &b);
    (void)sink;
    return (split){(usec(b.ru_utime) - usec(a.ru_utime)) / (double)n,
                   (usec(b.ru_stime) - usec(a.ru_stime)) / (double)n};
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n <= 0)
        n = 2000000;
    split call = measure(n, 1);
    split loop = measure(n, 0);
    printf("%.3f %.3f\n", call.user - loop.user, call.sys - loop.sys);
    fprintf(stderr,
            "syscall_price: an empty system call costs %.3f µs of user time and %.3f µs of "
            "system time (%ld calls; the loop alone %.4f µs)\n",
            call.user - loop.user, call.sys - loop.sys, n, loop.user + loop.sys);
    return 0;
}
