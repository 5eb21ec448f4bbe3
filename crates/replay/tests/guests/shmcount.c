// Four processes forked after a MAP_SHARED anonymous mapping count in it: one counter under a
// process-shared mutex (always 4 * ROUNDS), one without a lock (lost updates depend on how the
// processes interleave, so its value is whatever the recorded schedule made it), and each child
// appends its index to a shared log under the lock (the order is the schedule's). Issue 12.
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILDREN 4
#define ROUNDS 40000000

struct shared {
    pthread_mutex_t lock;
    long locked;
    volatile long racy;
    int log_len;
    char log[64];
};

int main(void) {
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&s->lock, &a);
    for (int c = 0; c < CHILDREN; c++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            for (long i = 0; i < ROUNDS; i++) {
                s->racy = s->racy + 1;
                if (i % 1000 == 0) {
                    pthread_mutex_lock(&s->lock);
                    s->locked += 1000;
                    if (i % 4000000 == 0 && s->log_len < 60)
                        s->log[s->log_len++] = (char)('a' + c);
                    pthread_mutex_unlock(&s->lock);
                }
            }
            _exit(0);
        }
    }
    for (int c = 0; c < CHILDREN; c++)
        wait(NULL);
    s->log[s->log_len] = 0;
    printf("locked %ld\nracy %ld\nlog %s\n", s->locked, s->racy, s->log);
    return 0;
}
