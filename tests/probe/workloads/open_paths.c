/* Opens each argument as a path (read-only) and closes it; "BAD" passes an invalid pointer
 * (address 1) to openat(2), which fails with EFAULT. Exits 0. */
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "BAD") == 0) {
            syscall(SYS_openat, AT_FDCWD, (const char *)1, O_RDONLY);
            continue;
        }
        int fd = open(argv[i], O_RDONLY);
        if (fd >= 0)
            close(fd);
    }
    return 0;
}
