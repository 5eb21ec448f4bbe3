// A pure compute loop (no system calls) that ends once it has received 3 SIGALRMs from an
// interval timer: the signals must reach it while it computes (at forced sync points). The loop
// only reads the tick count, so all its iterations look alike (see crate::sched on loops whose
// registers change at every iteration).
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>

static volatile sig_atomic_t ticks;

static void on_alarm(int sig) {
    (void)sig;
    // A fourth may come before the timer is stopped: counted as none, so the output is fixed.
    if (ticks < 3) ticks++;
}

int main(void) {
    struct sigaction sa = { 0 };
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { .it_interval = { 0, 10000 }, .it_value = { 0, 10000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    while (ticks < 3)
        ;
    struct itimerval off = { 0 };
    setitimer(ITIMER_REAL, &off, NULL);
    printf("%d ticks\n", (int)ticks);
    return 0;
}
