/* A parent SIGKILLs a child blocked in pause() and reports how it died. The kill is emulated on
 * replay, so the replayer itself must end the child where the recording says SIGKILL did. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    pid_t p = fork();
    if (p == 0) {
        pause();
        _exit(0);
    }
    usleep(20000);
    kill(p, SIGKILL);
    int st = 0;
    waitpid(p, &st, 0);
    printf("child killed by signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return 0;
}
