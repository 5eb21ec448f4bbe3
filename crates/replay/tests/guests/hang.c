/* Writes one line, then hangs in pause() (until killed). */
#include <string.h>
#include <unistd.h>

int main(void) {
    const char *msg = "before the hang\n";
    if (write(1, msg, strlen(msg)) < 0) return 1;
    pause();
    return 0;
}
