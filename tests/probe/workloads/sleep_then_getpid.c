/* Sleeps argv[1] milliseconds, then calls getpid(2) argv[2] times, then exits: a process for
 * `-p PID` cases, started before sightline attaches. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 1000;
    long n = argc > 2 ? atol(argv[2]) : 1;
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, 0);
    for (long i = 0; i < n; i++)
        syscall(SYS_getpid);
    return 0;
}
