/* Parser errors inside expressions and statements, one per line. */
BEGIN
{
	a = b[];
	c = (1 + 2)(3);
	d = x->;
	e = self.x;
	f = this;
	g = int;
	h = (unsigned float)1;
	i = (long char)1;
	{ j = 1; }
	k = sizeof(;
	l = 1 ? 2;
}
