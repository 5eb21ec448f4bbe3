// Two threads each run a tight compute loop, `x = x * A + B` for N iterations, with no system
// call and (at -O2) no instruction of 5 bytes or more in the loop: every instruction is short
// (imul, add, sub, jne), so a forced sync point there cannot carry a `jmp rel32` check. The
// registers change at every iteration: replay cannot stop at just any pass.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define N 40000000UL

__attribute__((noinline)) static uint64_t lcg(uint64_t x, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static void *run(void *arg) {
    uint64_t *x = arg;
    *x = lcg(*x, N);
    return NULL;
}

int main(void) {
    pthread_t t[2];
    uint64_t x[2] = { 1, 2 };
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, run, &x[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("%llu %llu\n", (unsigned long long)x[0], (unsigned long long)x[1]);
    return 0;
}
