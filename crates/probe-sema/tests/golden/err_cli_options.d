// -x quite
// -x bufsize=big
BEGIN { exit(0); }
