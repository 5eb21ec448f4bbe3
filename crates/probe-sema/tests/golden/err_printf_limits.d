// Issue 22: a width or precision above 65535 is an error at its digits (a width that overflows
// int too); `*` widths are accepted and clamped when printed.
BEGIN { printf("%99999999999d\n", 1); }
BEGIN { printf("%999999999d\n", 1); }
BEGIN { printf("[%-8.70000s]\n", "x"); }
BEGIN { printf("%65535d %*d\n", 1, 2147483647, 2); }
BEGIN { printa("%65536@d\n", @a); @a = count(); }
