#pragma D option quite
#pragma D option bufsize=lots
#pragma D option strsize=0
#pragma D option switchrate=10qq
BEGIN { exit(0); }
