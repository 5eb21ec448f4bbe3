// Sixteen threads started in a burst; each reads, first thing, a value the main thread stores
// (plain memory, no system call) right after each pthread_create. A recorded thread must not run
// before the recorder gives it the right to (issue 11: a new thread whose first stop came before
// its parent's clone event ran at once, beside the main thread, and replay then printed other
// values).
#include <pthread.h>
#include <stdio.h>

static volatile int v;
static int seen[16];

static void *first_read(void *arg) {
    seen[(long)arg] = v;
    return NULL;
}

int main(void) {
    pthread_t t[16];
    for (long i = 0; i < 16; i++) {
        pthread_create(&t[i], NULL, first_read, (void *)i);
        for (int k = 0; k < 20000; k++)
            v = (int)i * 100000 + k;
    }
    for (int i = 0; i < 16; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 16; i++)
        printf("%d%c", seen[i], i == 15 ? '\n' : ' ');
    return 0;
}
