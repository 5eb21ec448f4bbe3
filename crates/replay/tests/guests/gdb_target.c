/* A guest for gdb on a replay (crates/sightline/tests/replay_gdb.rs): its values depend on
 * bytes read from /dev/urandom, so gdb shows the recorded run's values only if the replay feeds
 * the recorded input. Prints every value a test compares with what gdb prints. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int counter;
unsigned noise;

int square(int x) {
    int local = x * x + (int)(noise % 1000);
    return local;
}

int main(void) {
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &noise, sizeof noise) != sizeof noise)
        return 1;
    close(fd);
    long total = 0;
    for (int i = 1; i <= 4; i++) {
        counter = i * 10;
        int s = square(i);
        printf("square(%d) = %d\n", i, s);
        total += s;
    }
    printf("noise %u total %ld counter %d pid %d\n", noise, total, counter, (int)getpid());
    return 3;
}
