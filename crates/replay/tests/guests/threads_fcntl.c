/* A thread that makes trapped calls while the main thread makes calls on a pipe shared with a
 * child (each such call is a rendezvous point on the pipe). The worker's calls all come after
 * main's pipe calls (it waits for `go`), however fast or slow the recording's stops are. */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int go;

static void *worker(void *arg) {
    (void)arg;
    while (!go)
        ;
    for (int i = 0; i < 200; i++)
        getppid();
    return 0;
}

int main(void) {
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t c = fork();
    if (c == 0) {
        close(p[0]);
        write(p[1], "x", 1);
        _exit(0);
    }
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    int flags = 0;
    for (int i = 0; i < 50; i++) {
        int n = 0;
        ioctl(p[0], FIONREAD, &n);
        flags |= fcntl(p[0], F_GETFL);
    }
    go = 1;
    pthread_join(t, 0);
    char b = 0;
    read(p[0], &b, 1);
    waitpid(c, 0, 0);
    printf("%c %d\n", b, flags & O_ACCMODE);
    return 0;
}
