/* A guest for gdb on a replay (crates/sightline/tests/replay_gdb.rs): work() runs in the parent
 * before and after a fork and in the child; gdb debugs the parent, so its breakpoint in work() stops
 * the parent twice while the child, which inherits the breakpoint, runs through it. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int work(int n) { return n * 3; }
int main(void) {
    int a = work(1);
    pid_t p = fork();
    if (p == 0) { printf("child %d\n", work(2)); return 0; }
    waitpid(p, NULL, 0);
    printf("parent %d %d\n", a, work(4));
    return 0;
}
