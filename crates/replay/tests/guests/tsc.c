// Reads the time-stamp counter and CPUID directly (no system call): both must replay identically.
#include <cpuid.h>
#include <stdio.h>
#include <x86intrin.h>

int main(void) {
    unsigned long long a = __rdtsc();
    unsigned int aux;
    unsigned long long b = __rdtscp(&aux);
    unsigned int eax, ebx, ecx, edx;
    __cpuid(1, eax, ebx, ecx, edx);
    printf("tsc %llu %llu delta %llu\n", a, b, b - a);
    printf("cpuid.1 ecx rdrand bit %u\n", (ecx >> 30) & 1);
    return 0;
}
