/* Known bytes for the copyin() cases, each written to /dev/null with one write(2):
 * 1. a 16-byte record {int32 305419896, int32 -7, uint64 0x0102030405060708} (little-endian);
 * 2. the 13 bytes "hello, copyin", from the start of a 2048-byte static buffer (so a copyin()
 *    of up to 2048 bytes from it stays in mapped memory);
 * 3. 4 bytes from address 1 (an invalid user address: write fails with EFAULT). */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

struct rec {
    int32_t a;
    int32_t b;
    uint64_t c;
};

int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    struct rec r = {305419896, -7, 0x0102030405060708ULL};
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        return 2;
    static char s[2048] = "hello, copyin";
    if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
        return 3;
    if (write(fd, (const void *)1, 4) != -1)
        return 4;
    close(fd);
    return 0;
}
