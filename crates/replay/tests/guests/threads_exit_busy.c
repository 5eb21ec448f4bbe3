// exit() while three workers keep finishing short sleeps: their completed calls wait for the
// right to run when the exit_group kills them (issue 11: nothing of them may be recorded then).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *nap(void *arg) {
    (void)arg;
    for (;;)
        usleep(50);
    return NULL;
}

int main(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, nap, NULL);
    usleep(20000);
    printf("leaving\n");
    fflush(stdout);
    exit(7);
}
