// Starts a thread and joins it (recorded and replayed with the thread schedule).
#include <pthread.h>
#include <stdio.h>

static void *run(void *arg) { return arg; }

int main(void) {
    pthread_t t;
    printf("before thread\n");
    fflush(stdout);
    pthread_create(&t, NULL, run, NULL);
    pthread_join(t, NULL);
    printf("after thread\n");
    return 0;
}
