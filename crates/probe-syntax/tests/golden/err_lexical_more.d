BEGIN
{
	a = $;
	b = 99999999999999999999;
	c = '';
	d = 'x;
	e = "\777";
	f = "\xzz";
	g = 1; # not a directive
	h = 1.5;
}
