/* FS_IOC_GETVERSION, a Linux AIO read and io_uring_setup with a fallback, on the file argv[1]. */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return 3;
    long v = 0;
    if (ioctl(fd, FS_IOC_GETVERSION, &v) == 0)
        printf("version %ld\n", v);
    else
        printf("FS_IOC_GETVERSION: %s\n", strerror(errno));

    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, 8, &ctx) != 0) return 4;
    char buf[64] = {0};
    struct iocb cb;
    memset(&cb, 0, sizeof cb);
    cb.aio_fildes = fd;
    cb.aio_lio_opcode = IOCB_CMD_PREAD;
    cb.aio_buf = (unsigned long)buf;
    cb.aio_nbytes = 16;
    cb.aio_offset = 0;
    cb.aio_data = 0x1234;
    struct iocb *list[1] = {&cb};
    if (syscall(SYS_io_submit, ctx, 1, list) != 1) return 5;
    struct io_event ev[1];
    memset(ev, 0, sizeof ev);
    if (syscall(SYS_io_getevents, ctx, 1, 1, ev, NULL) != 1) return 6;
    printf("aio read %lld bytes, data %#llx: %.16s\n", (long long)ev[0].res,
           (unsigned long long)ev[0].data, buf);
    if (syscall(SYS_io_destroy, ctx) != 0) return 7;

    char params[120] = {0};
    long r = syscall(SYS_io_uring_setup, 8, params);
    if (r < 0) {
        printf("io_uring_setup: %s; reading with pread\n", strerror(errno));
        char b2[17] = {0};
        if (pread(fd, b2, 16, 0) != 16) return 8;
        printf("pread: %s\n", b2);
    } else {
        printf("io_uring available\n");
    }
    return 0;
}
