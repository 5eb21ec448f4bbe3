/* A guest for gdb on a replay (crates/sightline/tests/replay_gdb.rs): a timer's SIGALRM arrives
 * while main computes; its handler counts it. gdb must stop at the recorded signal, and the
 * replay must deliver it as recorded. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

volatile sig_atomic_t alarms;

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(1);
    while (!alarms)
        pause();
    printf("alarms %d\n", (int)alarms);
    return 0;
}
