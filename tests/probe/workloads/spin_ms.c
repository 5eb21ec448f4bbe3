/* Spins on the CPU for the number of milliseconds given as argument (default 1000), all of the
 * time inside the function spin(), whose loop spans many instructions (profile samples land on
 * several addresses of it). Exits 0. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void spin(long ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        for (int i = 0; i < 100000; i++) {
            sink += i;
            sink ^= sink >> 3;
            sink *= 2654435761u;
            sink -= i * 7;
            sink |= 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
            return;
    }
}

int main(int argc, char **argv) {
    spin(argc > 1 ? atol(argv[1]) : 1000);
    return 0;
}
