// The leader leaves first (pthread_exit); a worker then ends the process with exit(3), an
// exit_group while another worker is blocked in pause(). What the blocked one printed varies
// natively; a replay prints what was recorded.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void *worker(void *arg) {
    usleep(2000);
    printf("worker %ld done\n", (long)arg);
    fflush(stdout);
    if (arg == (void *)1) exit(3);   /* exit_group from a non-leader thread */
    for (;;) pause();
}
int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)2);
    pthread_create(&t, NULL, worker, (void *)1);
    printf("main leaves\n");
    fflush(stdout);
    pthread_exit(NULL);               /* the leader exits first */
}
