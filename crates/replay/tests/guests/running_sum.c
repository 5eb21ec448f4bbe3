// Go-live guest (issue 13): reads numbers from stdin, one a line, and prints the running sum of
// each to stdout and to the file named by argv[1] (opened for writing: a stand-in in replay). At
// end of input it reports what the kernel says of it: its seccomp mode, its tracer, and that RDTSC
// runs (a trapped RDTSC would kill it with SIGSEGV).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

static long status_field(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, name, n) == 0) {
            v = atol(line + n);
            break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv) {
    char line[256];
    long sum = 0;
    FILE *log = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
    if (!log)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0);
    setvbuf(log, NULL, _IONBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        sum += atol(line);
        printf("sum %ld\n", sum);
        fprintf(log, "%ld\n", sum);
    }
    unsigned long long t = __rdtsc();
    printf("end %ld seccomp %ld tracer %ld rdtsc %s\n", sum, status_field("Seccomp:"),
           status_field("TracerPid:"), t ? "ok" : "zero");
    return 0;
}
