/* Known allocation sizes, no stdio (so libc allocates nothing else): 1x 1 byte, 2x 8, 3x 100,
 * 4x 1000, 5x 5000. */
#include <stdlib.h>
void *volatile sink;
int main(void) {
    size_t sizes[] = {1, 8, 100, 1000, 5000};
    for (int k = 0; k < 5; k++)
        for (int j = 0; j <= k; j++) {
            sink = malloc(sizes[k]);
            free(sink);
        }
    return 0;
}
