/* Sleeps argv[1] milliseconds (default 500) with nanosleep(2). */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 500;
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, 0);
    return 0;
}
