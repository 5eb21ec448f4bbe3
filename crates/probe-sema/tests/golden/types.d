/* Integer promotions, usual arithmetic conversions and implicit casts made explicit. */
BEGIN
{
	c = (char)1;
	u = 3000000000u;
	x = c + c;
	y = u + 1;
	z = timestamp - 1;
	w = arg0 + u;
	s = execname;
	t = s == "bash";
	b = 1 << 40;
	n = -c;
	q = c ? u : 2;
	c = 300;
	c += 1;
	counts[execname, pid]++;
	counts["x", 1] = counts["y", 2] + 1;
	self->p = (char *)arg0;
	k = sizeof(int) + sizeof(execname);
	trace(stringof(self->p));
	exit(0);
}
