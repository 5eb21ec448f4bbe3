#pragma D option quiet
#pragma D option bufsize = 4m
#include <stdio.h>
#pragma D depends_on library net.d
BEGIN { x = 1; }
  #define X 1
