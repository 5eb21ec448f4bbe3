/* Forks argv[1] children (default 1); each execs argv[2] (default /bin/true) with no arguments;
 * the parent waits for all and fails if a child fails. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    const char *path = argc > 2 ? argv[2] : "/bin/true";
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0)
            return 1;
        if (p == 0) {
            execl(path, path, (char *)0);
            _exit(127);
        }
        int st;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 2;
    }
    return 0;
}
