/* Misused string subroutines: each call is reported, with its usage. */
BEGIN
{
	a = strchr("abc", "b");
	b = strrchr("abc");
	c = index("abc");
	d = rindex("abc", 1);
	e = index("abc", "b", "c");
	f = substr(1, 2);
	g = basename(1);
	h = dirname("a", "b");
	i = strstr("abc", 'b');
	n = indx("abc", "b");
}
