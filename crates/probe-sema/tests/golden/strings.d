/* The string subroutines ("Actions and Subroutines"): result types and argument conversions. */
BEGIN
{
	s = "/usr/lib/libc.so.6";
	b = basename(s);
	d = dirname(s);
	u = substr(s, -4);
	v = substr(s, 1, 3);
	c = strchr(s, 'l');
	r = strrchr(s, 47);
	t = strstr(s, "lib");
	i = index(s, "lib");
	j = index(s, "lib", 6);
	k = rindex(s, "lib");
	m = rindex(s, "lib", 5);
	exit(0);
}
