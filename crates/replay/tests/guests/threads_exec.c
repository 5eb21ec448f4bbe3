// execve from a process with live threads (issue 11). The kernel kills the other threads and the
// exec'ing thread takes the leader's tid. With argument "leader" the main thread execs while two
// workers live; otherwise a worker execs while the main thread waits in pthread_join and another
// worker sleeps.
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *sleeper(void *arg) {
    (void)arg;
    for (;;)
        usleep(1000);
    return NULL;
}

static void *execer(void *arg) {
    char *msg = arg;
    printf("worker %d execs\n", (int)getpid());
    fflush(stdout);
    execl("/bin/echo", "echo", msg, (char *)NULL);
    perror("execl");
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t a, b;
    printf("before threads\n");
    fflush(stdout);
    pthread_create(&b, NULL, sleeper, NULL);
    if (argc > 1 && strcmp(argv[1], "leader") == 0) {
        pthread_create(&a, NULL, sleeper, NULL);
        usleep(2000);
        execl("/bin/echo", "echo", "exec from the leader", (char *)NULL);
        perror("execl");
        return 1;
    }
    usleep(1000);
    pthread_create(&a, NULL, execer, "exec from a worker");
    pthread_join(a, NULL);
    printf("not reached\n");
    return 1;
}
