/* Test target for probe-user: known calls, USDT probes with or without a semaphore.
 * Usage: target N [wait]   runs N iterations; with "wait", first reads one line from stdin. */
#include <stdio.h>
#include <stdlib.h>
#ifdef WITH_SEM
#define _SDT_HAS_SEMAPHORES 1
unsigned short sl_test_tick_semaphore __attribute__((unused)) __attribute__((section(".probes")));
#define TICK_ENABLED() (sl_test_tick_semaphore != 0)
#else
#define TICK_ENABLED() 1
#endif
#include <sys/sdt.h>

long counter = 5;
void *volatile sink; /* keeps malloc/free from being optimized away */

__attribute__((noinline)) int add(int a, int b) { return a + b; }

__attribute__((noinline)) long classify(long x) {
    if (x < 0) return -1;
    if (x == 0) return 0;
    return 1;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    char buf[16];
    if (argc > 2 && !fgets(buf, sizeof buf, stdin)) return 2;
    int enabled = 0;
    long total = 0;
    for (int i = 0; i < n; i++) {
        total += add(i, 1);
        total += classify(i - 2);
        if (TICK_ENABLED()) enabled++;
        DTRACE_PROBE3(sl_test, tick, i, (long)-i, counter);
        counter++;
        sink = malloc(16 * (i % 4 + 1));
        free(sink);
    }
    printf("%d %ld\n", enabled, total);
    return 0;
}
