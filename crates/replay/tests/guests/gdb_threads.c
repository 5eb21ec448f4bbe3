/* A guest for gdb on a replay (crates/sightline/tests/replay_gdb.rs): main starts two workers,
 * waits until both run, then calls all_started() while they wait for it; `info threads` there
 * lists three threads. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int started, go;

static void *worker(void *arg) {
    pthread_mutex_lock(&m);
    started++;
    pthread_cond_broadcast(&c);
    while (!go)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    return arg;
}

void all_started(int n) {
    printf("%d workers started\n", n);
    fflush(stdout);
}

int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    pthread_mutex_lock(&m);
    while (started < 2)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    all_started(started);
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}
