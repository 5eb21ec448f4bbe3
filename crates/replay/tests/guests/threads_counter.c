// 4 threads increment one shared counter 10^6 times each without a lock: natively the total
// varies from run to run (lost updates); a replay must print the recorded one.
#include <pthread.h>
#include <stdio.h>

static volatile long counter;

static void *run(void *arg) {
    for (long i = 0; i < 1000000; i++) counter = counter + 1;
    return arg;
}

int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, run, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    printf("total %ld\n", counter);
    return 0;
}
