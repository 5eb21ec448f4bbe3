/* Three children write to stdout at the same time, one byte per write(2): the interleaving depends
 * on scheduling. Replay must reproduce the recorded interleaving byte for byte. */
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    pid_t kids[3];
    for (int k = 0; k < 3; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            char c = (char)('0' + k);
            for (int i = 0; i < 300; i++)
                if (write(1, &c, 1) != 1)
                    _exit(1);
            _exit(0);
        }
    }
    for (int k = 0; k < 3; k++)
        waitpid(kids[k], 0, 0);
    return write(1, "\n", 1) == 1 ? 0 : 1;
}
