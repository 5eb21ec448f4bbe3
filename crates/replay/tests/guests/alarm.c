// A SIGALRM interval timer interrupts a loop that makes system calls; how many iterations run
// between signals depends on timing.
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t ticks;
static volatile long at_tick[16];
static volatile long iterations;

static void on_alarm(int sig) {
    (void)sig;
    if (ticks < 16) at_tick[ticks] = iterations;
    ticks++;
}

int main(void) {
    struct sigaction sa = { 0 };
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { .it_interval = { 0, 2000 }, .it_value = { 0, 2000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    while (ticks < 16) {
        getppid();
        iterations++;
    }
    struct itimerval off = { 0 };
    setitimer(ITIMER_REAL, &off, NULL);
    for (int i = 0; i < 16; i++) printf("tick %d at iteration %ld\n", i, at_tick[i]);
    return 0;
}
