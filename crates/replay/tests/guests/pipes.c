// Children talk to their parent over pipes; the parent reaps them in the order they exit, which
// depends on timing (each child sleeps a time derived from the clock and its pid).
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 4

int main(void) {
    int fds[N];
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        int p[2];
        if (pipe(p) != 0) return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            unsigned seed = (unsigned)ts.tv_nsec ^ (unsigned)getpid();
            for (int k = 0; k < 3; k++) {
                char msg[64];
                int n = snprintf(msg, sizeof msg, "child %d message %d\n", i, k);
                write(p[1], msg, n);
                usleep(1000 + rand_r(&seed) % 20000);
            }
            _exit(i);
        }
        close(p[1]);
        fds[i] = p[0];
        pids[i] = pid;
    }
    // Read everything, in whatever order it arrives.
    struct pollfd pfd[N];
    for (int i = 0; i < N; i++) pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
    int open_n = N;
    while (open_n > 0) {
        if (poll(pfd, N, -1) < 0) return 2;
        for (int i = 0; i < N; i++) {
            if (pfd[i].revents == 0) continue;
            char buf[256];
            ssize_t r = read(pfd[i].fd, buf, sizeof buf);
            if (r <= 0) { close(pfd[i].fd); pfd[i].fd = -1; open_n--; continue; }
            printf("from %d: %.*s", i, (int)r, buf);
        }
    }
    for (int i = 0; i < N; i++) {
        int st;
        pid_t w = wait(&st);
        int idx = -1;
        for (int j = 0; j < N; j++) if (pids[j] == w) idx = j;
        printf("reaped child %d (status %d)\n", idx, WEXITSTATUS(st));
    }
    printf("pid-derived: %d\n", (int)(getpid() % 1000));
    return 0;
}
