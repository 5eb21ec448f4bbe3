/* Exits 3 when argv[1] is a directory it can enter, 5 otherwise. chdir runs untrapped, so only the
 * exit status tells a replay that the world changed (used to check a diverging exit is reported). */
#include <unistd.h>
int main(int argc, char **argv) { return argc > 1 && chdir(argv[1]) == 0 ? 3 : 5; }
