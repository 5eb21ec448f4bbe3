// Thread A spins on a flag without system calls; thread B sets it after usleep(1000). Without
// preemption of the spinning thread, a serialized schedule never runs B.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile int flag;
static void *spinner(void *arg) {
    while (!flag)
        ;
    return arg;
}

static void *setter(void *arg) {
    usleep(1000);
    flag = 1;
    return arg;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, NULL, spinner, NULL);
    pthread_create(&b, NULL, setter, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("flag seen\n");
    return 0;
}
