// Go-live guest with threads (issue 13): the main thread reads numbers from stdin, one a line,
// and hands each to a worker thread through a mutex and a condition variable (futex waits and
// wakes); the worker keeps the running sum and prints it. At end of input the main thread tells
// the worker to stop, joins it (the kernel's clear of the worker's tid wakes the join) and prints
// the total. Recorded while both threads block (main in read, the worker in its futex wait), it
// goes live only if both threads do. Each thread reports its own seccomp mode and tracer from
// /proc/thread-self/status (gone live: 0 and 0, nothing of Sightline's left on either).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long pending, have, done, sum;
static long worker_seccomp = -1, worker_tracer = -1;

static long status_field(const char *name) {
    FILE *f = fopen("/proc/thread-self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, name, n) == 0) {
            v = atol(line + n);
            break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!have && !done)
            pthread_cond_wait(&cv, &mu);
        if (have) {
            sum += pending;
            have = 0;
            printf("sum %ld\n", sum);
            pthread_cond_broadcast(&cv);
        } else if (done) {
            worker_seccomp = status_field("Seccomp:");
            worker_tracer = status_field("TracerPid:");
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 2;
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        pthread_mutex_lock(&mu);
        while (have)
            pthread_cond_wait(&cv, &mu);
        pending = atol(line);
        have = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    while (have)
        pthread_cond_wait(&cv, &mu);
    done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    printf("end %ld threads joined; seccomp %ld/%ld tracer %ld/%ld\n", sum, status_field("Seccomp:"),
           worker_seccomp, status_field("TracerPid:"), worker_tracer);
    return 0;
}
