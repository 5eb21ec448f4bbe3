/* The flight recorder's crash guest: calls getpid() N times (argv[1], default 5), then writes
 * through the address 0x10 two calls deep and dies of SIGSEGV. Frame pointers are kept so that
 * the user stack walks through deeper, crash_here and main. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KEEP_FRAMES __attribute__((noinline, optimize("no-omit-frame-pointer")))

KEEP_FRAMES void deeper(volatile int *p) {
    getppid(); /* not a leaf: it sets up its frame */
    *p = 42;
}

KEEP_FRAMES void crash_here(long a) {
    deeper((volatile int *)a);
    __asm__ volatile("" ::: "memory");
}

KEEP_FRAMES int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5;
    for (int i = 0; i < n; i++)
        syscall(SYS_getpid);
    crash_here(0x10);
    return 0;
}
