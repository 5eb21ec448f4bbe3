/* Says it is ready, then makes short system calls for ever: a SIGTERM comes between two calls
 * (never one that blocks). */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    puts("ready");
    fflush(stdout);
    for (;;)
        getppid();
}
