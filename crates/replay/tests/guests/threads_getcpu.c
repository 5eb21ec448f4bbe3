// 4 threads call sched_getcpu(); the CPU numbers come from the recording on replay.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static int cpu[4];

static void *run(void *arg) {
    int *slot = arg;
    *slot = sched_getcpu();
    return NULL;
}

int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, run, &cpu[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) printf("thread %d on cpu %d\n", i, cpu[i]);
    return 0;
}
