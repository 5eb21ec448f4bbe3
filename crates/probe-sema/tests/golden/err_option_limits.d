// Issue 22: options that size values have limits, each a located error.
#pragma D option strsize=99999999
#pragma D option strsize=4097
#pragma D option stackframes=100000
#pragma D option ustackframes=128
#pragma D option strsize=4096
#pragma D option stackframes=127
BEGIN { exit(0); }
