/* Sends itself SIGUSR1 argv[1] times (default 1), with a handler installed. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void on_usr1(int sig) {
    (void)sig;
    got++;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < n; i++)
        kill(getpid(), SIGUSR1);
    return got == n ? 0 : 1;
}
