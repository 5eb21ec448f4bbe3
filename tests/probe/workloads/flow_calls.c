/* Calls main -> foo -> bar once, pinned to CPU 0 so every probe fires on one CPU (flowindent keeps
 * its indentation per CPU). The functions are not inlined and foo's call to bar is not a tail call. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>

__attribute__((noinline)) int bar(int x) {
    __asm__ volatile("" ::: "memory");
    return x + 1;
}

__attribute__((noinline)) int foo(int x) {
    int r = bar(x);
    __asm__ volatile("" ::: "memory");
    return r * 2;
}

int main(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        return 2;
    }
    volatile int v = foo(1);
    return v == 4 ? 0 : 1;
}
