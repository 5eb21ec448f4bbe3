// A worker computes for about 0.3 s without a system call while the main thread wakes every
// 2 ms (a blocking call returns and waits for the right to run): the worker gets forced sync
// points inside a loop whose registers change at every pass, and ends right after the loop.
// Replay that runs past one of its points reaches the worker's exit instead.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static uint64_t result;

static void *work(void *arg) {
    uint64_t x = (uintptr_t)arg, acc[4] = { 0 };
    for (uint64_t i = 0; i < 300000000ULL; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        acc[i & 3] += x >> 33;
    }
    result = acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, work, (void *)42);
    for (int i = 0; i < 50; i++)
        usleep(2000);
    pthread_join(t, NULL);
    printf("%llu\n", (unsigned long long)result);
    return 0;
}
