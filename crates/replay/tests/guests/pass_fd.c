/* A parent passes an open file to its child over a socketpair (SCM_RIGHTS), as nginx's master
 * passes channels to its workers; the child reads through the received fd, then opens another
 * file, whose number follows the received one's. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 3;
    pid_t child = fork();
    if (child == 0) {
        close(sv[0]);
        char byte, control[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {&byte, 1};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        if (recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC) != 1) return 4;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        if (!c || c->cmsg_type != SCM_RIGHTS) return 5;
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
        char buf[16] = {0};
        ssize_t n = pread(fd, buf, 10, 0);
        int next = open("/dev/null", O_RDONLY);
        printf("child got fd %d (close-on-exec %d) and byte %c, read %zd: %s; next fd %d\n", fd,
               (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0, byte, n, buf, next);
        return 0;
    }
    close(sv[1]);
    int fd = open(argv[1], O_RDONLY);
    char control[CMSG_SPACE(sizeof(int))] = {0};
    char byte = 'x';
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(sv[0], &msg, 0) != 1) return 6;
    int status;
    waitpid(child, &status, 0);
    printf("parent: child exited %d\n", WEXITSTATUS(status));
    return 0;
}
