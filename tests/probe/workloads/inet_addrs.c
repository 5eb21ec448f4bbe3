/* connect(2)s a UDP socket to each argument, an IPv4 or IPv6 address in text form (inet_pton),
 * port 9: the inet_ntoa/inet_ntoa6/inet_ntop cases read the sockaddr at connect's entry. A UDP
 * connect sends nothing; connects that fail (no route, a link-local address without a scope)
 * still enter the system call. Exits 0, or 1 when an argument is not an address. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        struct sockaddr_in v4;
        struct sockaddr_in6 v6;
        memset(&v4, 0, sizeof v4);
        memset(&v6, 0, sizeof v6);
        if (inet_pton(AF_INET, argv[i], &v4.sin_addr) == 1) {
            v4.sin_family = AF_INET;
            v4.sin_port = htons(9);
            int fd = socket(AF_INET, SOCK_DGRAM, 0);
            (void)connect(fd, (struct sockaddr *)&v4, sizeof v4);
            close(fd);
        } else if (inet_pton(AF_INET6, argv[i], &v6.sin6_addr) == 1) {
            v6.sin6_family = AF_INET6;
            v6.sin6_port = htons(9);
            int fd = socket(AF_INET6, SOCK_DGRAM, 0);
            (void)connect(fd, (struct sockaddr *)&v6, sizeof v6);
            close(fd);
        } else {
            return 1;
        }
    }
    return 0;
}
