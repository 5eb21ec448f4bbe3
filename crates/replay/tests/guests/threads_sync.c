// Thread synchronization the scheduler must not deadlock on: a barrier, condition-variable waits
// that time out (FUTEX_WAIT_BITSET with a timeout), pthread_kill (tgkill) to threads with
// different signal masks (two take SIGUSR1 in a handler, two block it and sigwait), and an exit
// with a thread still blocked (exit_group with live threads).
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t b;
static volatile sig_atomic_t got[4];
static int waited[4];
static __thread int me;

static void on_usr1(int sig) {
    (void)sig;
    got[me]++;
}

static void *worker(void *arg) {
    me = (int)(long)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    if (me % 2) pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 2000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&m);
    waited[me] = pthread_cond_timedwait(&c, &m, &ts);
    pthread_mutex_unlock(&m);
    pthread_barrier_wait(&b);
    if (me % 2) {
        int sig;
        sigwait(&set, &sig);
        got[me]++;
    } else {
        while (!got[me]) usleep(100);
    }
    return NULL;
}

static void *forever(void *arg) {
    for (;;) pause();
    return arg;
}

int main(void) {
    struct sigaction sa = { 0 };
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_barrier_init(&b, NULL, 5);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_barrier_wait(&b);
    for (int i = 0; i < 4; i++) pthread_kill(t[i], SIGUSR1);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) printf("thread %d: timed wait %d, SIGUSR1 %d\n", i, waited[i], got[i]);
    pthread_t f;
    pthread_create(&f, NULL, forever, NULL);
    usleep(1000);
    printf("exit with a thread blocked\n");
    fflush(stdout);
    return 0;
}
