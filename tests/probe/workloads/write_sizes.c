/* Writes buffers of the sizes given as arguments to /dev/null, one write(2) each, in order. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static char buf[1 << 20];

int main(int argc, char **argv) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    for (int i = 1; i < argc; i++) {
        long n = atol(argv[i]);
        if (n < 0 || n > (long)sizeof buf)
            return 2;
        if (write(fd, buf, (size_t)n) != n)
            return 3;
    }
    close(fd);
    return 0;
}
