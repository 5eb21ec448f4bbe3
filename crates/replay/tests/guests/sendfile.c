/* sendfile(2) as servers use it: from the file argv[1] into a socket, with and without an offset
 * argument, then into stdout (which the recorder refuses: the program falls back to write). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int fd = open(argv[1], O_RDONLY);
    int sv[2];
    if (fd < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 3;
    off_t off = 4;
    ssize_t a = sendfile(sv[0], fd, &off, 10);
    ssize_t b = sendfile(sv[0], fd, NULL, 6);
    char buf[32] = {0};
    ssize_t n = read(sv[1], buf, sizeof buf - 1);
    printf("sent %zd then %zd, offset %lld, file position %lld, received %zd: %s\n", a, b,
           (long long)off, (long long)lseek(fd, 0, SEEK_CUR), n, buf);
    fflush(stdout);
    off = 0;
    if (sendfile(1, fd, &off, 7) < 0) {
        printf("sendfile to stdout: %s; writing instead\n", strerror(errno));
        char w[8] = {0};
        pread(fd, w, 7, 0);
        printf("%s\n", w);
    }
    return 0;
}
