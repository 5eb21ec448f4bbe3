/* Maps the file named by argv[1] MAP_PRIVATE and writes its bytes to stdout (no read()). */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 3;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) return 4;
    char *p = mmap(0, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return 5;
    close(fd);
    if (write(1, p, st.st_size) != st.st_size) return 6;
    return 0;
}
