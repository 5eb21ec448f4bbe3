/* Calls getpid(2) exactly argv[1] times (through syscall(2): glibc may not cache, but be sure). */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1;
    for (long i = 0; i < n; i++)
        syscall(SYS_getpid);
    return 0;
}
